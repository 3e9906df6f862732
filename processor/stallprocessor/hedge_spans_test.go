// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallprocessor

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/streamstall/streamstall/internal/semconv"
)

// hedgeSpansFile holds the spans of a hedged call as the hedge client emits
// them: written by the hedge package's TestTelemetryOfAHedgedCall (fake clock:
// the hedge starts after 100 ms, its first chunk comes 50 ms later, the next
// one after 10 ms, the last after a 3 s silence filled by a keepalive).
const hedgeSpansFile = "../../hedge/testdata/hedged_call.spans.json"

type hedgeSpan struct {
	TraceID       string       `json:"trace_id"`
	SpanID        string       `json:"span_id"`
	ParentSpanID  string       `json:"parent_span_id"`
	Name          string       `json:"name"`
	Kind          string       `json:"kind"`
	Start         int64        `json:"start_unix_nano"`
	End           int64        `json:"end_unix_nano"`
	Attributes    []hedgeAttr  `json:"attributes"`
	Events        []hedgeEvent `json:"events"`
	StatusCode    string       `json:"status_code"`
	StatusMessage string       `json:"status_message"`
}

type hedgeEvent struct {
	Name       string      `json:"name"`
	Time       int64       `json:"time_unix_nano"`
	Attributes []hedgeAttr `json:"attributes"`
}

type hedgeAttr struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

func putHedgeAttrs(t *testing.T, m pcommon.Map, attrs []hedgeAttr) {
	t.Helper()
	for _, a := range attrs {
		switch a.Type {
		case "STRING":
			m.PutStr(a.Key, a.Value.(string))
		case "INT64":
			m.PutInt(a.Key, int64(a.Value.(float64)))
		case "FLOAT64":
			m.PutDouble(a.Key, a.Value.(float64))
		case "BOOL":
			m.PutBool(a.Key, a.Value.(bool))
		case "STRINGSLICE":
			s := m.PutEmptySlice(a.Key)
			for _, v := range a.Value.([]any) {
				s.AppendEmpty().SetStr(v.(string))
			}
		default:
			t.Fatalf("attribute %s: type %s", a.Key, a.Type)
		}
	}
}

func hexBytes(t *testing.T, s string, n int) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	require.Len(t, b, n)
	return b
}

// loadHedgeSpans converts the file to pdata, as an OTLP exporter would.
func loadHedgeSpans(t *testing.T) ptrace.Traces {
	t.Helper()
	b, err := os.ReadFile(hedgeSpansFile)
	require.NoError(t, err)
	var spans []hedgeSpan
	require.NoError(t, json.Unmarshal(b, &spans))
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(semconv.AttrServiceName, "hedge-test")
	out := rs.ScopeSpans().AppendEmpty().Spans()
	kinds := map[string]ptrace.SpanKind{"internal": ptrace.SpanKindInternal, "client": ptrace.SpanKindClient}
	for _, s := range spans {
		span := out.AppendEmpty()
		span.SetTraceID(pcommon.TraceID(hexBytes(t, s.TraceID, 16)))
		span.SetSpanID(pcommon.SpanID(hexBytes(t, s.SpanID, 8)))
		if s.ParentSpanID != "" {
			span.SetParentSpanID(pcommon.SpanID(hexBytes(t, s.ParentSpanID, 8)))
		}
		span.SetName(s.Name)
		kind, ok := kinds[s.Kind]
		require.True(t, ok, "span kind %q", s.Kind)
		span.SetKind(kind)
		span.SetStartTimestamp(pcommon.Timestamp(s.Start))
		span.SetEndTimestamp(pcommon.Timestamp(s.End))
		putHedgeAttrs(t, span.Attributes(), s.Attributes)
		for _, e := range s.Events {
			ev := span.Events().AppendEmpty()
			ev.SetName(e.Name)
			ev.SetTimestamp(pcommon.Timestamp(e.Time))
			putHedgeAttrs(t, ev.Attributes(), e.Attributes)
		}
		if s.StatusCode == "Error" {
			span.Status().SetCode(ptrace.StatusCodeError)
			span.Status().SetMessage(s.StatusMessage)
		}
	}
	return td
}

func hedgeClientAttempt(t *testing.T, td ptrace.Traces, attempt int64) ptrace.Span {
	t.Helper()
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := range spans.Len() {
		if v, ok := spans.At(i).Attributes().Get(semconv.AttrHedgeAttempt); ok && v.Int() == attempt {
			return spans.At(i)
		}
	}
	t.Fatalf("no span of attempt %d", attempt)
	return ptrace.Span{}
}

// TestHedgeClientSpans feeds the spans of the hedge client to the processor
// with its default configuration: the loser is flagged, the winner gets its
// stream figures.
func TestHedgeClientSpans(t *testing.T) {
	td := loadHedgeSpans(t)
	require.Equal(t, 3, td.SpanCount())
	factory := NewFactory()
	sink := new(consumertest.TracesSink)
	proc, err := factory.CreateTraces(context.Background(), processortest.NewNopSettings(factory.Type()), factory.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, proc.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, proc.ConsumeTraces(context.Background(), td))
	require.NoError(t, proc.Shutdown(context.Background()))
	require.Len(t, sink.AllTraces(), 1)
	out := sink.AllTraces()[0]
	loser, winner := hedgeClientAttempt(t, out, 0), hedgeClientAttempt(t, out, 1)

	get := func(s ptrace.Span, key string) pcommon.Value {
		t.Helper()
		v, ok := s.Attributes().Get(key)
		require.True(t, ok, "span %q lacks %s", s.Name(), key)
		return v
	}
	assert.True(t, get(loser, semconv.AttrHedgeLoser).Bool())
	_, flagged := winner.Attributes().Get(semconv.AttrHedgeLoser)
	assert.False(t, flagged)
	assert.Equal(t, int64(3), get(winner, semconv.AttrChunkCount).Int())
	assert.InDelta(t, 50, get(winner, semconv.AttrTTFTMs).Double(), 1e-9)
	assert.InDelta(t, 3010, get(winner, semconv.AttrGenerationMs).Double(), 1e-9)
	assert.Equal(t, int64(1), get(winner, semconv.AttrStallCount).Int())
	assert.InDelta(t, 3000, get(winner, semconv.AttrStallMs).Double(), 1e-9, "the keepalive did not break the stall")
	assert.InDelta(t, 10, get(winner, semconv.AttrActiveGenerationMs).Double(), 1e-9)
	assert.Equal(t, 150*time.Millisecond, loser.EndTimestamp().AsTime().Sub(loser.StartTimestamp().AsTime()))
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedge

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamstall/streamstall/internal/semconv"
)

var update = flag.Bool("update", false, "rewrite testdata/hedged_call.spans.json from the spans of the test")

// goldenSpans is the file that carries the spans of a hedged call to the
// stall processor's tests (processor/stallprocessor), which convert it to
// pdata as an OTLP exporter would and check what the processor derives.
const goldenSpans = "testdata/hedged_call.spans.json"

// spanJSON is a span in a plain JSON form: the SDK's own span types do not
// decode from JSON, and OTLP encoding would put an exporter in the tests of a
// client whose users should not have to download one.
type spanJSON struct {
	TraceID       string      `json:"trace_id"`
	SpanID        string      `json:"span_id"`
	ParentSpanID  string      `json:"parent_span_id,omitempty"`
	Name          string      `json:"name"`
	Kind          string      `json:"kind"`
	Start         int64       `json:"start_unix_nano"`
	End           int64       `json:"end_unix_nano"`
	Attributes    []attrJSON  `json:"attributes"`
	Events        []eventJSON `json:"events,omitempty"`
	StatusCode    string      `json:"status_code"`
	StatusMessage string      `json:"status_message,omitempty"`
}

type eventJSON struct {
	Name       string     `json:"name"`
	Time       int64      `json:"time_unix_nano"`
	Attributes []attrJSON `json:"attributes,omitempty"`
}

// attrJSON is one attribute; Type is the name of its attribute.Type (STRING,
// INT64, FLOAT64, BOOL, STRINGSLICE).
type attrJSON struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

func attrsJSON(kvs []attribute.KeyValue) []attrJSON {
	out := make([]attrJSON, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, attrJSON{Key: string(kv.Key), Type: kv.Value.Type().String(), Value: kv.Value.AsInterface()})
	}
	return out
}

func spansJSON(stubs tracetest.SpanStubs) []spanJSON {
	out := make([]spanJSON, 0, len(stubs))
	for _, s := range stubs {
		j := spanJSON{
			TraceID: s.SpanContext.TraceID().String(), SpanID: s.SpanContext.SpanID().String(),
			Name: s.Name, Kind: s.SpanKind.String(),
			Start: s.StartTime.UnixNano(), End: s.EndTime.UnixNano(),
			Attributes: attrsJSON(s.Attributes),
			StatusCode: s.Status.Code.String(), StatusMessage: s.Status.Description,
		}
		if s.Parent.HasSpanID() {
			j.ParentSpanID = s.Parent.SpanID().String()
		}
		for _, e := range s.Events {
			j.Events = append(j.Events, eventJSON{Name: e.Name, Time: e.Time.UnixNano(), Attributes: attrsJSON(e.Attributes)})
		}
		out = append(out, j)
	}
	return out
}

// seqIDs numbers traces and spans from 1, so that the spans of a test are the
// same on every run.
type seqIDs struct {
	mu   sync.Mutex
	next uint64
}

func (g *seqIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	tid[15] = 1
	return tid, g.NewSpanID(ctx, tid)
}

func (g *seqIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.next++
	var sid trace.SpanID
	binary.BigEndian.PutUint64(sid[:], g.next)
	return sid
}

func attempt(t *testing.T, stubs tracetest.SpanStubs, n int64) tracetest.SpanStub {
	t.Helper()
	for _, s := range stubs {
		for _, kv := range s.Attributes {
			if kv.Key == semconv.AttrHedgeAttempt && kv.Value.AsInt64() == n {
				return s
			}
		}
	}
	t.Fatalf("no span of attempt %d", n)
	return tracetest.SpanStub{}
}

func attr(t *testing.T, s tracetest.SpanStub, key string) attribute.Value {
	t.Helper()
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	t.Fatalf("span %q lacks %s", s.Name, key)
	return attribute.Value{}
}

func hasAttr(s tracetest.SpanStub, key string) bool {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return true
		}
	}
	return false
}

// TestTelemetryOfAHedgedCall runs a hedged call and checks its spans, then
// writes them to testdata for the stall processor's tests, which feed them to
// the processor: the loser is flagged, the winner gets its stream figures,
// with no processor configuration.
func TestTelemetryOfAHedgedCall(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(&seqIDs{}))
	defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()

	clock := clockwork.NewFakeClockAt(time.Unix(1_700_000_000, 0))
	a, b := newPipeSource("a"), newPipeSource("b")
	h, err := New([]Source{a, b}, Delay(100*time.Millisecond), withClock(clock), TracerProvider(tp), RecordKeepalives())
	require.NoError(t, err)
	c := consume(t, h, hello)
	recv(t, a.opened)
	blockUntil(t, clock, 1)
	clock.Advance(100 * time.Millisecond)
	pb := recv(t, b.opened)
	clock.Advance(50 * time.Millisecond)
	pb.events <- text("one ")
	c.next(t)
	clock.Advance(10 * time.Millisecond)
	pb.events <- text("two ")
	c.next(t)
	// A stall, then a keepalive and the next chunk: the keepalive is sent
	// once the clock has moved, so that its stamp does not depend on
	// whether the reader takes it before or after the clock moves.
	clock.Advance(3 * time.Second)
	pb.events <- Event{Type: EventKeepalive}
	pb.events <- text("three")
	c.next(t)
	pb.events <- Event{Type: EventDone, Model: "b-2025", Usage: Usage{InputTokens: 7, OutputTokens: 3}, FinishReason: "stop"}
	require.NoError(t, c.end(t))

	stubs := exp.GetSpans()
	require.Len(t, stubs, 3)
	loser, winner := attempt(t, stubs, 0), attempt(t, stubs, 1)
	assert.Equal(t, trace.SpanKindClient, winner.SpanKind)
	assert.Equal(t, "chat b-model", winner.Name)
	assert.Equal(t, attr(t, loser, semconv.AttrHedgeGroupID).AsString(), attr(t, winner, semconv.AttrHedgeGroupID).AsString())
	assert.False(t, hasAttr(loser, semconv.AttrHedgeTrigger), "no trigger on the primary")
	assert.Equal(t, "ttft", attr(t, winner, semconv.AttrHedgeTrigger).AsString())
	assert.Equal(t, "loser", attr(t, loser, semconv.AttrHedgeOutcome).AsString())
	assert.Equal(t, "winner", attr(t, winner, semconv.AttrHedgeOutcome).AsString())
	assert.Equal(t, "b-2025", attr(t, winner, semconv.AttrResponseModel).AsString())
	assert.Equal(t, int64(3), attr(t, winner, semconv.AttrUsageOutputTokens).AsInt64())
	assert.Equal(t, "openai", attr(t, winner, semconv.AttrProviderName).AsString())
	assert.Equal(t, "chat", attr(t, winner, semconv.AttrOperationName).AsString())
	require.Len(t, winner.Events, 4, "a keepalive, then three chunks: a span's chunk events are written when it ends")
	assert.Equal(t, semconv.EventKeepalive, winner.Events[0].Name)
	assert.Equal(t, []attribute.KeyValue{attribute.String(semconv.AttrChunkKind, semconv.ChunkKindText)}, winner.Events[1].Attributes)
	assert.Equal(t, codes.Unset, loser.Status.Code, "losing is not an error")
	assert.Equal(t, 150*time.Millisecond, loser.EndTime.Sub(loser.StartTime), "the loser's span ends when it is dropped, at commit")
	// The call span is the parent of both and carries no chunk and no hedge
	// attribute, so that it is never counted as one more streaming call.
	for _, s := range stubs {
		if s.SpanKind == trace.SpanKindInternal {
			assert.Empty(t, s.Events)
			assert.False(t, hasAttr(s, semconv.AttrHedgeGroupID))
			assert.Equal(t, s.SpanContext.SpanID(), winner.Parent.SpanID())
			assert.Equal(t, s.SpanContext.SpanID(), loser.Parent.SpanID())
		}
	}

	got, err := json.MarshalIndent(spansJSON(stubs), "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	if *update {
		require.NoError(t, os.WriteFile(goldenSpans, got, 0o600))
	}
	want, err := os.ReadFile(goldenSpans)
	require.NoError(t, err, "run go test -run TestTelemetryOfAHedgedCall -update in hedge/ to create it")
	assert.JSONEq(t, string(want), string(got), "the spans changed: check them, then rerun with -update (the stall processor's tests read them)")
}

func TestTelemetryOfAStalledCall(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
	clock := clockwork.NewFakeClock()
	a := newPipeSource("a")
	h, err := New([]Source{a}, Delay(time.Hour), StallTimeout(time.Second), withClock(clock), TracerProvider(tp))
	require.NoError(t, err)
	c := consume(t, h, hello)
	pa := recv(t, a.opened)
	pa.events <- text("x")
	c.next(t)
	blockUntil(t, clock, 1)
	clock.Advance(time.Second)
	var stall *StallError
	require.ErrorAs(t, c.end(t), &stall)

	only := attempt(t, exp.GetSpans(), 0)
	// The stalled stream is what the caller got: it stands for the call, so
	// the stall is counted once, with its error.
	assert.Equal(t, "winner", attr(t, only, semconv.AttrHedgeOutcome).AsString())
	assert.Equal(t, "stall_timeout", attr(t, only, semconv.AttrErrorType).AsString())
	assert.InDelta(t, 1000.0, attr(t, only, semconv.AttrStallTimeoutMs).AsFloat64(), 1e-9, "the cut's mark")
	assert.Equal(t, codes.Error, only.Status.Code)
	assert.Equal(t, "stall_timeout", only.Status.Description)
	assert.Len(t, only.Events, 1)
	for _, s := range exp.GetSpans() {
		assert.Equal(t, codes.Error, s.Status.Code, s.Name)
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

const processorConfig = `
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${OTLP}
processors:
  stall:
    stall_threshold: 2s
    loser_conditions:
      - attributes["test.force_loser"] == true
exporters:
  otlp_http:
    endpoint: ${SINK}
    encoding: json
    compression: none
    retry_on_failure:
      enabled: false
    sending_queue:
      enabled: false
service:
  pipelines:
    traces:
      receivers: [otlp]
      processors: [stall]
      exporters: [otlp_http]
`

// streamingSpan builds an OpenLLMetry-shaped span with chunk events at the
// given millisecond offsets from its start.
func streamingSpan(ss ptrace.ScopeSpans, name, eventName string, start time.Time, offsetsMs ...int64) ptrace.Span {
	sp := ss.Spans().AppendEmpty()
	sp.SetName(name)
	sp.SetKind(ptrace.SpanKindClient)
	sp.SetTraceID(pcommon.TraceID([16]byte{1, byte(len(name)), 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, byte(ss.Spans().Len())}))
	sp.SetSpanID(pcommon.SpanID([8]byte{1, 2, 3, 4, 5, 6, 7, byte(ss.Spans().Len())}))
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	last := int64(0)
	for _, off := range offsetsMs {
		ev := sp.Events().AppendEmpty()
		ev.SetName(eventName)
		ev.SetTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Duration(off) * time.Millisecond)))
		last = max(last, off)
	}
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Duration(last+10) * time.Millisecond)))
	sp.Attributes().PutStr(semconv.AttrOperationName, "chat")
	sp.Attributes().PutStr(semconv.AttrSystem, "openai")
	sp.Attributes().PutStr(semconv.AttrRequestModel, "gpt-4o")
	return sp
}

// TestCollectorEnrichesSpans posts OTLP/JSON spans to the ocb-built
// collector and checks the figures of docs/contract.md section 4 on what comes out.
func TestCollectorEnrichesSpans(t *testing.T) {
	sink := startSink(t)
	otlpPort := freePort(t)
	collector(t, fill(processorConfig, "OTLP", otlpPort, "SINK", sink.URL))

	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(semconv.AttrServiceName, "e2e")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("opentelemetry.instrumentation.openai")
	start := time.Unix(1_790_000_000, 0)
	// docs/contract.md section 4's worked examples, one per OpenLLMetry event name.
	streamingSpan(ss, "spec-example-1", semconv.EventChunk, start, 100, 150, 200, 3200, 3250, 9250, 9300, 9350)
	streamingSpan(ss, "spec-example-2", semconv.EventChunkLegacy, start, 0, 5000, 10000, 10050)
	plain := streamingSpan(ss, "not-streaming", "something.else", start, 5)
	plain.Attributes().PutStr("keep", "me")
	loser := streamingSpan(ss, "hedge-loser", semconv.EventChunk, start, 300, 320)
	loser.Attributes().PutStr(semconv.AttrHedgeOutcome, semconv.HedgeOutcomeLoser)
	forced := streamingSpan(ss, "ottl-loser", semconv.EventChunk, start, 300, 320)
	forced.Attributes().PutBool("test.force_loser", true)

	body, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	status, resp, err := postJSON(ctx, fmt.Sprintf("http://127.0.0.1:%d/v1/traces", otlpPort), body)
	require.NoError(t, err)
	require.Equal(t, 200, status, resp)

	eventually(t, 20*time.Second, "five spans at the sink", func() error {
		for _, n := range []string{"spec-example-1", "spec-example-2", "not-streaming", "hedge-loser", "ottl-loser"} {
			if _, ok := sink.Span(n); !ok {
				return fmt.Errorf("%s: %w", n, errNotYet)
			}
		}
		return nil
	})

	sp, _ := sink.Span("spec-example-1")
	attrs := sp.Attributes().AsRaw()
	assert.EqualValues(t, 8, attrs[semconv.AttrChunkCount])
	assert.Equal(t, 100.0, attrs[semconv.AttrTTFTMs])
	assert.Equal(t, 0.1, attrs[semconv.AttrTimeToFirstChunk])
	assert.Equal(t, 9250.0, attrs[semconv.AttrGenerationMs])
	assert.Equal(t, 2000.0, attrs[semconv.AttrStallThresholdMs])
	assert.Equal(t, 9000.0, attrs[semconv.AttrStallMs])
	assert.EqualValues(t, 2, attrs[semconv.AttrStallCount])
	assert.Equal(t, 6000.0, attrs[semconv.AttrMaxStallMs])
	assert.Equal(t, 250.0, attrs[semconv.AttrActiveGenerationMs])
	assert.NotContains(t, attrs, semconv.AttrBurst, "burst is written only when true")
	var stalls []map[string]any
	for i := 0; i < sp.Events().Len(); i++ {
		ev := sp.Events().At(i)
		if ev.Name() == semconv.EventStall {
			m := ev.Attributes().AsRaw()
			m["at_ms"] = ev.Timestamp().AsTime().Sub(start).Milliseconds()
			stalls = append(stalls, m)
		}
	}
	require.Len(t, stalls, 2)
	assert.Equal(t, map[string]any{"at_ms": int64(200), semconv.AttrStallEventDurationMs: 3000.0, semconv.AttrStallEventAfterChunk: int64(3), semconv.AttrStallEventGaps: int64(1)}, stalls[0])
	assert.Equal(t, map[string]any{"at_ms": int64(3250), semconv.AttrStallEventDurationMs: 6000.0, semconv.AttrStallEventAfterChunk: int64(5), semconv.AttrStallEventGaps: int64(1)}, stalls[1])

	sp, _ = sink.Span("spec-example-2")
	attrs = sp.Attributes().AsRaw()
	assert.EqualValues(t, 1, attrs[semconv.AttrStallCount])
	assert.Equal(t, 10000.0, attrs[semconv.AttrStallMs])
	assert.Equal(t, 50.0, attrs[semconv.AttrActiveGenerationMs])
	assert.NotContains(t, attrs, semconv.AttrHedgeLoser)

	sp, _ = sink.Span("not-streaming")
	assert.Equal(t, map[string]any{
		semconv.AttrOperationName: "chat", semconv.AttrSystem: "openai", semconv.AttrRequestModel: "gpt-4o", "keep": "me",
	}, sp.Attributes().AsRaw(), "a span without chunk events passes unchanged")

	for _, n := range []string{"hedge-loser", "ottl-loser"} {
		sp, _ = sink.Span(n)
		assert.Equal(t, true, sp.Attributes().AsRaw()[semconv.AttrHedgeLoser], n)
		assert.EqualValues(t, 2, sp.Attributes().AsRaw()[semconv.AttrChunkCount], "a loser keeps its own figures")
	}
}

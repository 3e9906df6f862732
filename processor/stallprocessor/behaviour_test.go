// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallprocessor

import (
	"context"
	"sync"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/processor/stallprocessor/internal/metadatatest"
)

const (
	testStart = int64(1_767_225_600_000_000_000)
	ms        = int64(1_000_000)
)

// streamSpan appends a span starting at testStart with one chunk event per
// offset (milliseconds after the start).
func streamSpan(spans ptrace.SpanSlice, offsetsMs ...int64) ptrace.Span {
	span := spans.AppendEmpty()
	span.SetName("chat gpt-4o")
	span.SetStartTimestamp(pcommon.Timestamp(testStart))
	for _, off := range offsetsMs {
		ev := span.Events().AppendEmpty()
		ev.SetName(semconv.EventChunk)
		ev.SetTimestamp(pcommon.Timestamp(testStart + off*ms))
	}
	return span
}

func newTraces() (ptrace.Traces, ptrace.SpanSlice) {
	td := ptrace.NewTraces()
	return td, td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
}

func firstSpan(td ptrace.Traces) ptrace.Span {
	return td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
}

func stallEvents(span ptrace.Span) []ptrace.SpanEvent {
	var out []ptrace.SpanEvent
	for i := 0; i < span.Events().Len(); i++ {
		if ev := span.Events().At(i); ev.Name() == semconv.EventStall {
			out = append(out, ev)
		}
	}
	return out
}

func attr(t *testing.T, m pcommon.Map, key string) pcommon.Value {
	t.Helper()
	v, ok := m.Get(key)
	require.True(t, ok, "missing attribute %s", key)
	return v
}

// The worked examples of docs/contract.md section 4, asserted value by value (the golden
// files hold the same spans; this test does not depend on them).
func TestSpecWorkedExamples(t *testing.T) {
	td, spans := newTraces()
	streamSpan(spans, 100, 150, 200, 3200, 3250, 9250, 9300, 9350)
	out := runProcessor(t, createDefaultConfig().(*Config), td)
	span := firstSpan(out)
	attrs := span.Attributes()
	assert.Equal(t, int64(8), attr(t, attrs, semconv.AttrChunkCount).Int())
	assert.Equal(t, 100.0, attr(t, attrs, semconv.AttrTTFTMs).Double())
	assert.Equal(t, 0.1, attr(t, attrs, semconv.AttrTimeToFirstChunk).Double())
	assert.Equal(t, 9250.0, attr(t, attrs, semconv.AttrGenerationMs).Double())
	assert.Equal(t, 2000.0, attr(t, attrs, semconv.AttrStallThresholdMs).Double())
	assert.Equal(t, int64(2), attr(t, attrs, semconv.AttrStallCount).Int())
	assert.Equal(t, 9000.0, attr(t, attrs, semconv.AttrStallMs).Double())
	assert.Equal(t, 6000.0, attr(t, attrs, semconv.AttrMaxStallMs).Double())
	assert.Equal(t, 250.0, attr(t, attrs, semconv.AttrActiveGenerationMs).Double())
	for _, absent := range []string{semconv.AttrBurst, semconv.AttrActiveTPS, semconv.AttrStallEventsDropped} {
		_, ok := attrs.Get(absent)
		assert.False(t, ok, absent)
	}
	stalls := stallEvents(span)
	require.Len(t, stalls, 2)
	for i, want := range []struct {
		atMs, durationMs float64
		afterChunk       int64
	}{{200, 3000, 3}, {3250, 6000, 5}} {
		assert.Equal(t, testStart+int64(want.atMs)*ms, int64(stalls[i].Timestamp()))
		assert.Equal(t, want.durationMs, attr(t, stalls[i].Attributes(), semconv.AttrStallEventDurationMs).Double())
		assert.Equal(t, want.afterChunk, attr(t, stalls[i].Attributes(), semconv.AttrStallEventAfterChunk).Int())
		assert.Equal(t, int64(1), attr(t, stalls[i].Attributes(), semconv.AttrStallEventGaps).Int())
	}

	td, spans = newTraces()
	streamSpan(spans, 0, 5000, 10000, 10050)
	span = firstSpan(runProcessor(t, createDefaultConfig().(*Config), td))
	attrs = span.Attributes()
	assert.Equal(t, 10000.0, attr(t, attrs, semconv.AttrStallMs).Double())
	assert.Equal(t, int64(1), attr(t, attrs, semconv.AttrStallCount).Int())
	assert.Equal(t, 50.0, attr(t, attrs, semconv.AttrActiveGenerationMs).Double())
	stalls = stallEvents(span)
	require.Len(t, stalls, 1)
	assert.Equal(t, int64(2), attr(t, stalls[0].Attributes(), semconv.AttrStallEventGaps).Int())
}

// A changed threshold in a second tier replaces the first tier's figures.
func TestSecondTierWithOtherThreshold(t *testing.T) {
	td, spans := newTraces()
	streamSpan(spans, 100, 150, 200, 3200, 3250, 9250, 9300, 9350)
	cfg := createDefaultConfig().(*Config)
	cfg.MaxStallEvents = 1
	once := runProcessor(t, cfg, td)
	_, ok := firstSpan(once).Attributes().Get(semconv.AttrStallEventsDropped)
	require.True(t, ok)

	cfg = createDefaultConfig().(*Config)
	cfg.StallThreshold = 5 * 1e9
	span := firstSpan(runProcessor(t, cfg, once))
	attrs := span.Attributes()
	assert.Equal(t, 5000.0, attr(t, attrs, semconv.AttrStallThresholdMs).Double())
	assert.Equal(t, int64(1), attr(t, attrs, semconv.AttrStallCount).Int())
	assert.Equal(t, 6000.0, attr(t, attrs, semconv.AttrStallMs).Double())
	_, ok = attrs.Get(semconv.AttrStallEventsDropped)
	assert.False(t, ok, "a figure the new config does not produce must go")
	require.Len(t, stallEvents(span), 1)
}

// Span status is never rewritten, not even for losers.
func TestStatusUntouched(t *testing.T) {
	td, spans := newTraces()
	span := streamSpan(spans, 100, 4000)
	span.Status().SetCode(ptrace.StatusCodeOk)
	span.Attributes().PutStr(semconv.AttrHedgeOutcome, semconv.HedgeOutcomeLoser)
	out := firstSpan(runProcessor(t, createDefaultConfig().(*Config), td))
	assert.Equal(t, ptrace.StatusCodeOk, out.Status().Code())
	assert.True(t, attr(t, out.Attributes(), semconv.AttrHedgeLoser).Bool())
}

// failingCondition fails at run time on every span: Substring of a short name
// with an out-of-range length.
const failingCondition = `Substring(name, 0, 1000) == "x"`

func TestErrorModes(t *testing.T) {
	for _, tc := range []struct {
		mode     ottl.ErrorMode
		wantErr  bool
		wantLogs int
	}{
		{mode: ottl.IgnoreError, wantLogs: 1},
		{mode: ottl.SilentError},
		{mode: ottl.PropagateError, wantErr: true},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			cfg.ErrorMode = tc.mode
			cfg.LoserConditions = []string{failingCondition, `attributes["llm.hedge.attempt"] == 1`}
			core, logs := observer.New(zapcore.WarnLevel)
			set := newTestSettings(t)
			set.Logger = zap.New(core)
			sink := new(consumertest.TracesSink)
			proc, err := NewFactory().CreateTraces(context.Background(), set, cfg, sink)
			require.NoError(t, err)

			td, spans := newTraces()
			streamSpan(spans, 100, 200).Attributes().PutInt(semconv.AttrHedgeAttempt, 1)
			err = proc.ConsumeTraces(context.Background(), td)
			assert.Equal(t, tc.wantLogs, logs.Len())
			if tc.wantErr {
				assert.ErrorContains(t, err, "invalid range for substring function")
				assert.ErrorContains(t, err, "Substring(name, 0, 1000)")
				return
			}
			require.NoError(t, err)
			require.Len(t, sink.AllTraces(), 1, "the span must reach the next consumer")
			span := firstSpan(sink.AllTraces()[0])
			// The failing condition counts as false; the next one still runs.
			assert.True(t, attr(t, span.Attributes(), semconv.AttrHedgeLoser).Bool())
			assert.Equal(t, int64(2), attr(t, span.Attributes(), semconv.AttrChunkCount).Int())
		})
	}
}

func TestChunkConditionErrorIgnored(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.ChunkEvents.Conditions = []string{`Substring(name, 0, 1000) == "x"`}
	td, spans := newTraces()
	streamSpan(spans, 100, 200)
	out := firstSpan(runProcessor(t, cfg, td))
	// No event passes the (failing) condition: the span has no chunk.
	_, ok := out.Attributes().Get(semconv.AttrChunkCount)
	assert.False(t, ok)
}

func TestTelemetry(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := createDefaultConfig().(*Config)
	cfg.InferHedgeOutcome = true
	sink := new(consumertest.TracesSink)
	proc, err := NewFactory().CreateTraces(context.Background(), metadatatest.NewSettings(tel), cfg, sink)
	require.NoError(t, err)

	td, spans := newTraces()
	streamSpan(spans, 100, 150, 200, 3200, 3250, 9250, 9300, 9350) // two stalls
	primary := streamSpan(spans, 3000, 3100)
	primary.Attributes().PutStr(semconv.AttrHedgeGroupID, "g")
	hedge := streamSpan(spans, 1000, 1100)
	hedge.Attributes().PutStr(semconv.AttrHedgeGroupID, "g")
	explicit := spans.AppendEmpty() // no chunk events: not enriched, still a loser
	explicit.Attributes().PutStr(semconv.AttrHedgeOutcome, semconv.HedgeOutcomeLoser)
	require.NoError(t, proc.ConsumeTraces(context.Background(), td))
	require.NoError(t, proc.Shutdown(context.Background()))

	metadatatest.AssertEqualProcessorStallSpansEnriched(t, tel, []metricdata.DataPoint[int64]{{Value: 3}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorStallStallsFound(t, tel, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorStallLosersFlagged(t, tel, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
}

func TestStartShutdownTwice(t *testing.T) {
	proc, err := NewFactory().CreateTraces(context.Background(), newTestSettings(t), createDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	for range 2 {
		require.NoError(t, proc.Start(context.Background(), componenttest.NewNopHost()))
		require.NoError(t, proc.Shutdown(context.Background()))
	}
}

// Batches may arrive concurrently; the scratch buffers must not be shared.
func TestConcurrentBatches(t *testing.T) {
	sink := new(consumertest.TracesSink)
	proc, err := NewFactory().CreateTraces(context.Background(), newTestSettings(t), createDefaultConfig(), sink)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 50 {
				td, spans := newTraces()
				streamSpan(spans, 100, 150, 200, 3200+int64(g), 3250+int64(g))
				assert.NoError(t, proc.ConsumeTraces(context.Background(), td))
			}
		})
	}
	wg.Wait()
	require.Len(t, sink.AllTraces(), 400)
	for _, td := range sink.AllTraces() {
		span := firstSpan(td)
		stall := span.Events().At(span.Events().Len() - 1)
		want := float64(3000 + (int64(span.Events().At(3).Timestamp())-testStart)/ms - 3200) // 3000 + g
		assert.Equal(t, want, attr(t, stall.Attributes(), semconv.AttrStallEventDurationMs).Double())
	}
}

// loser_conditions run after the figures are written, so they can use them.
func TestLoserConditionOnFigures(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.LoserConditions = []string{`attributes["llm.stream.max_stall_ms"] > 5000.0`}
	td, spans := newTraces()
	streamSpan(spans, 100, 150, 200, 3200, 3250, 9250) // a 6000 ms stall
	streamSpan(spans, 100, 150, 200, 3200)             // a 3000 ms stall
	out := firstScope(runProcessor(t, cfg, td))
	assert.True(t, attr(t, out.At(0).Attributes(), semconv.AttrHedgeLoser).Bool())
	_, flagged := out.At(1).Attributes().Get(semconv.AttrHedgeLoser)
	assert.False(t, flagged)
}

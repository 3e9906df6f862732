// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallprocessor

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/figures/figurestest"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/processor/stallprocessor/internal/metadatatest"
)

// A span with one chunk event and forged stall figures: the chunk is the
// evidence, so the span gets exactly the figures of one chunk, and a second
// pass changes nothing.
func TestForgedFiguresOnOneChunk(t *testing.T) {
	td, spans := newTraces()
	span := streamSpan(spans, 850)
	attrs := span.Attributes()
	attrs.PutInt(semconv.AttrStallCount, 7)
	attrs.PutDouble(semconv.AttrStallMs, 50000)
	attrs.PutDouble(semconv.AttrActiveTPS, 9999)
	attrs.PutInt(semconv.AttrUsageOutputTokens, 40)

	once := runProcessor(t, createDefaultConfig().(*Config), td)
	got := firstSpan(once).Attributes()
	for _, forged := range []string{semconv.AttrStallCount, semconv.AttrStallMs, semconv.AttrActiveTPS} {
		_, ok := got.Get(forged)
		assert.False(t, ok, "%s must be removed", forged)
	}
	assert.Equal(t, int64(1), attr(t, got, semconv.AttrChunkCount).Int())
	assert.Equal(t, 850.0, attr(t, got, semconv.AttrTTFTMs).Double())
	assert.Equal(t, int64(40), attr(t, got, semconv.AttrUsageOutputTokens).Int())

	want := ptrace.NewTraces()
	once.CopyTo(want)
	assertSameBytes(t, want, runProcessor(t, createDefaultConfig().(*Config), once))
}

// A forged figure that the chunk evidence does not produce (reasoning figures
// on a span without reasoning chunks) is removed from a span with chunk
// evidence too, a forged value of one it produces is overwritten, and so is
// a second copy of a figure the processor writes.
func TestUnproducedAndDuplicateFiguresRemoved(t *testing.T) {
	const body = `{"resourceSpans":[{"scopeSpans":[{"spans":[{
		"startTimeUnixNano":"1767225600000000000",
		"attributes":[
		{"key":"llm.stream.chunk_count","value":{"intValue":"40"}},
		{"key":"llm.stream.chunk_count","value":{"intValue":"41"}},
		{"key":"llm.stream.reasoning_chunk_count","value":{"intValue":"3"}},
		{"key":"llm.stream.reasoning_ms","value":{"doubleValue":30}},
		{"key":"llm.stream.time_to_first_answer_ms","value":{"doubleValue":3}},
		{"key":"llm.stream.oversized_frames","value":{"intValue":"2"}}],
		"events":[{"name":"gen_ai.content.completion.chunk","timeUnixNano":"1767225600100000000"},
		          {"name":"gen_ai.content.completion.chunk","timeUnixNano":"1767225600200000000"}]}]}]}]}`
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces([]byte(body))
	require.NoError(t, err)
	once := runProcessor(t, createDefaultConfig().(*Config), td)
	got := firstSpan(once).Attributes()
	counts := 0
	for k, v := range got.All() {
		if k == semconv.AttrChunkCount {
			counts++
			assert.Equal(t, int64(2), v.Int())
		}
	}
	assert.Equal(t, 1, counts, "one chunk_count")
	for _, gone := range []string{semconv.AttrReasoningChunkCount, semconv.AttrReasoningMs} {
		_, ok := got.Get(gone)
		assert.False(t, ok, gone)
	}
	assert.Equal(t, 100.0, attr(t, got, semconv.AttrTimeToFirstAnswerMs).Double(), "derived from the chunks, not the forged 3")
	assert.Equal(t, int64(2), attr(t, got, "llm.stream.oversized_frames").Int(), "not a figure: kept")
	want := ptrace.NewTraces()
	once.CopyTo(want)
	assertSameBytes(t, want, runProcessor(t, createDefaultConfig().(*Config), once))
}

// Spans without chunk events: the consistent figures of a first tier that
// dropped the chunk events pass byte for byte; inconsistent ones are
// removed and counted.
func TestCarriedFigures(t *testing.T) {
	input, err := golden.ReadTraces(filepath.Join("testdata", "forged_figures", "input.yaml"))
	require.NoError(t, err)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	sink := new(consumertest.TracesSink)
	proc, err := NewFactory().CreateTraces(context.Background(), metadatatest.NewSettings(tel), createDefaultConfig(), sink)
	require.NoError(t, err)
	want := ptrace.NewTraces()
	input.CopyTo(want)
	require.NoError(t, proc.ConsumeTraces(context.Background(), input))
	require.NoError(t, proc.Shutdown(context.Background()))

	out := firstScope(sink.AllTraces()[0])
	// The third span carries the consistent set of a first tier.
	assertSameBytes(t, spanOnly(want, 2), spanOnly(sink.AllTraces()[0], 2))
	for _, i := range []int{1, 3} {
		span := out.At(i)
		for k := range span.Attributes().All() {
			assert.False(t, figures.IsAttribute(k), "span %d keeps %s", i, k)
		}
		assert.Empty(t, stallEvents(span), "span %d keeps a stall event", i)
	}
	// The fourth keeps what is not a figure.
	assert.Equal(t, "g1", attr(t, out.At(3).Attributes(), semconv.AttrHedgeGroupID).Str())
	assert.Equal(t, 1, out.At(3).Events().Len(), "the keepalive event stays")

	metadatatest.AssertEqualProcessorStallInconsistentFiguresRemoved(t, tel, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorStallSpansEnriched(t, tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
}

// What a first tier with drop_chunk_events writes is consistent for the next
// tier, whatever the stream: every golden input through such a tier.
func TestDroppedChunkEventsStayConsistent(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.DropChunkEvents = true
	cfg.MaxStallEvents = 1
	for _, tc := range goldenCases {
		input, err := golden.ReadTraces(filepath.Join("testdata", tc.name, "input.yaml"))
		require.NoError(t, err)
		agent := runProcessor(t, cfg, input)
		want := ptrace.NewTraces()
		agent.CopyTo(want)
		gateway := runProcessor(t, createDefaultConfig().(*Config), agent)
		assertSameBytes(t, want, gateway)
	}
}

// hostileRun processes one hostile span, with forged figures and a stale
// stall event on it, and returns the span and the telemetry.
func hostileRun(t *testing.T, cfg *Config, tc figurestest.Span) (ptrace.Span, ptrace.Span, *componenttest.Telemetry) {
	t.Helper()
	td, spans := newTraces()
	span := spans.AppendEmpty()
	tc.CopyTo(span)
	span.Attributes().PutInt(semconv.AttrStallCount, 9)
	span.Attributes().PutStr(semconv.AttrHedgeGroupID, "g1")
	stale := span.Events().AppendEmpty()
	stale.SetName(semconv.EventStall)
	stale.SetTimestamp(figurestest.Start)
	in := ptrace.NewSpan()
	span.CopyTo(in)

	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	sink := new(consumertest.TracesSink)
	proc, err := NewFactory().CreateTraces(context.Background(), metadatatest.NewSettings(tel), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, proc.ConsumeTraces(context.Background(), td))
	require.NoError(t, proc.Shutdown(context.Background()))
	require.Len(t, sink.AllTraces(), 1, "a span is never dropped")
	return in, firstSpan(sink.AllTraces()[0]), tel
}

// The hostile spans of internal/figures/figurestest: the processor writes
// the table's figures, or skips the span (no figure, those it carried
// removed, everything else untouched) and counts it. Both with the default
// selection and with drop_chunk_events, the path OTTL conditions take.
func TestHostileSpans(t *testing.T) {
	dropping := createDefaultConfig().(*Config)
	dropping.DropChunkEvents = true
	for _, cfg := range []*Config{createDefaultConfig().(*Config), dropping} {
		for _, tc := range figurestest.Spans() {
			t.Run(tc.Name, func(t *testing.T) {
				in, out, tel := hostileRun(t, cfg, tc)
				attrs := out.Attributes()
				want := tc.Want
				implausible := int64(0)
				if want.Skip {
					implausible = 1
				}
				metadatatest.AssertEqualProcessorStallSpansImplausible(t, tel, []metricdata.DataPoint[int64]{{Value: implausible}}, metricdatatest.IgnoreTimestamp())
				if want.Skip || want.ChunkCount == 0 {
					for k := range attrs.All() {
						assert.False(t, figures.IsAttribute(k), "%s kept", k)
					}
					assert.Empty(t, stallEvents(out))
					assert.Equal(t, in.Events().Len()-1, out.Events().Len(), "only the stall event is removed")
					assert.Equal(t, "g1", attr(t, attrs, semconv.AttrHedgeGroupID).Str())
					return
				}
				assert.Equal(t, int64(want.ChunkCount), attr(t, attrs, semconv.AttrChunkCount).Int())
				ttft, ok := attrs.Get(semconv.AttrTTFTMs)
				require.Equal(t, want.HasTTFT, ok, semconv.AttrTTFTMs)
				if ok {
					assert.Equal(t, figures.Millis(want.TTFT), ttft.Double())
				}
				if want.ChunkCount >= 2 {
					assert.Equal(t, figures.Millis(want.Generation()), attr(t, attrs, semconv.AttrGenerationMs).Double())
					assert.Equal(t, int64(want.StallCount), attr(t, attrs, semconv.AttrStallCount).Int())
					assert.Equal(t, figures.Millis(want.StallTotal), attr(t, attrs, semconv.AttrStallMs).Double())
				} else {
					_, ok := attrs.Get(semconv.AttrStallCount)
					assert.False(t, ok, "the forged stall count is removed")
				}
				reasoning, ok := attrs.Get(semconv.AttrReasoningChunkCount)
				require.Equal(t, want.ReasoningChunks > 0, ok)
				if ok {
					assert.Equal(t, int64(want.ReasoningChunks), reasoning.Int())
				}
			})
		}
	}
}

// Carried figures of a stream longer than max_duration are removed and
// counted as implausible, not as inconsistent.
func TestCarriedFiguresPastMaxDuration(t *testing.T) {
	carried := func() ptrace.Traces {
		td, spans := newTraces()
		attrs := spans.AppendEmpty().Attributes()
		attrs.PutInt(semconv.AttrChunkCount, 1)
		attrs.PutDouble(semconv.AttrTTFTMs, 3_600_001)
		return td
	}
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	sink := new(consumertest.TracesSink)
	proc, err := NewFactory().CreateTraces(context.Background(), metadatatest.NewSettings(tel), createDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, proc.ConsumeTraces(context.Background(), carried()))
	assert.Zero(t, firstSpan(sink.AllTraces()[0]).Attributes().Len())
	metadatatest.AssertEqualProcessorStallSpansImplausible(t, tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorStallInconsistentFiguresRemoved(t, tel, []metricdata.DataPoint[int64]{{Value: 0}}, metricdatatest.IgnoreTimestamp())

	// A longer max_duration takes them.
	cfg := createDefaultConfig().(*Config)
	cfg.ChunkEvents.MaxDuration = 2 * figurestest.MaxDuration
	out := runProcessor(t, cfg, carried())
	assert.Equal(t, 3_600_001.0, attr(t, firstSpan(out).Attributes(), semconv.AttrTTFTMs).Double())
}

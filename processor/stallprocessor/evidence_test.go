package stallprocessor

import (
	"context"
	"testing"

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

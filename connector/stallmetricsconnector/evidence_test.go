// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallmetricsconnector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/streamstall/streamstall/connector/stallmetricsconnector/internal/metadatatest"
	"github.com/streamstall/streamstall/internal/figures/figurestest"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/processor/stallprocessor"
)

// hostileTraces is one hostile span, as a winner of one provider and model.
func hostileTraces(tc figurestest.Span) ptrace.Traces {
	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	tc.CopyTo(span)
	span.Attributes().PutStr(semconv.AttrProviderName, "openai")
	span.Attributes().PutStr(semconv.AttrRequestModel, "gpt-4o")
	return td
}

// consumeAndFlush records td and returns the export, empty when nothing
// was recorded.
func (o *observed) consumeAndFlush(t *testing.T, td ptrace.Traces) pmetric.Metrics {
	t.Helper()
	require.NoError(t, o.c.ConsumeTraces(context.Background(), td))
	require.NoError(t, o.c.flush(context.Background()))
	if all := o.sink.AllMetrics(); len(all) > 0 {
		return all[len(all)-1]
	}
	return pmetric.NewMetrics()
}

// The hostile spans of internal/figures/figurestest, through the stall
// processor: the connector records the table's figures (TTFT, the gaps, the
// stalls), or nothing for a span the processor skipped.
func TestHostileSpansThroughTheProcessor(t *testing.T) {
	for _, tc := range figurestest.Spans() {
		t.Run(tc.Name, func(t *testing.T) {
			sink := new(consumertest.TracesSink)
			proc, err := stallprocessor.NewFactory().CreateTraces(context.Background(),
				processortest.NewNopSettings(stallprocessor.NewFactory().Type()), stallprocessor.NewFactory().CreateDefaultConfig(), sink)
			require.NoError(t, err)
			require.NoError(t, proc.ConsumeTraces(context.Background(), hostileTraces(tc)))

			o := newObserved(t, defaultConfig())
			md := o.consumeAndFlush(t, sink.AllTraces()[0])
			want := tc.Want
			if want.Skip || want.ChunkCount == 0 {
				assert.Zero(t, md.DataPointCount(), "nothing recorded")
				return
			}
			assert.Equal(t, int64(1), sumValue(t, md, semconv.MetricCalls, nil))
			assertHostileFigures(t, md, want)
		})
	}
}

func assertHostileFigures(t *testing.T, md pmetric.Metrics, want figurestest.Want) {
	t.Helper()
	if want.HasTTFT {
		assert.InDelta(t, time.Duration(want.TTFT).Seconds(), histogramPoint(t, md, semconv.MetricTimeToFirstChunk, nil).Sum(), 1e-9)
	} else {
		forMetric(md, semconv.MetricTimeToFirstChunk, func(pmetric.Metric) { t.Error("a TTFT was recorded") })
	}
	if want.ChunkCount < 2 {
		return
	}
	gaps := histogramPoint(t, md, semconv.MetricTimePerOutputChunk, nil)
	assert.Equal(t, uint64(want.GapCount()), gaps.Count())
	assert.InDelta(t, time.Duration(want.Generation()).Seconds(), gaps.Sum(), 1e-6)
	if want.StallCount == 0 {
		forMetric(md, semconv.MetricStallDuration, func(pmetric.Metric) { t.Error("a stall was recorded") })
		return
	}
	stalls := histogramPoint(t, md, semconv.MetricStallDuration, nil)
	assert.Equal(t, uint64(want.StallCount), stalls.Count())
	assert.InDelta(t, time.Duration(want.StallTotal).Seconds(), stalls.Sum(), 1e-9)
}

// The implausible hostile spans straight to the connector, with the
// consistent figures a first tier that did not judge the times could have
// written: the connector judges the chunk events itself, records nothing
// and counts the span.
func TestHostileSpansWithoutTheProcessor(t *testing.T) {
	for _, tc := range figurestest.Spans() {
		if !tc.Want.Skip {
			continue
		}
		t.Run(tc.Name, func(t *testing.T) {
			o := newObserved(t, defaultConfig())
			td := hostileTraces(tc)
			attrs := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes()
			attrs.PutInt(semconv.AttrChunkCount, 1)
			attrs.PutDouble(semconv.AttrTTFTMs, 100)
			md := o.consumeAndFlush(t, td)
			assert.Zero(t, md.DataPointCount())
			metadatatest.AssertEqualConnectorStallMetricsSpansImplausible(t, o.tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
		})
	}
}

// Carried figures longer than max_duration, and a loser that ran longer,
// reach no histogram; both are counted. The loser's attempt and usage still
// count.
func TestImplausibleDurationsRecordNothing(t *testing.T) {
	o := newObserved(t, defaultConfig())
	carried := carriedWorkedExample()
	carried.attrs[semconv.AttrTTFTMs] = 3_600_000.0 // plus 9250 ms of generation
	loser := call{service: "s", chunksMs: nil, attrs: genAI("openai", "gpt-4o",
		semconv.AttrHedgeAttempt, 1, semconv.AttrHedgeOutcome, semconv.HedgeOutcomeLoser, semconv.AttrUsageOutputTokens, 12)}
	td := traces(carried, loser)
	long := td.ResourceSpans().At(1).ScopeSpans().At(0).Spans().At(0)
	long.SetEndTimestamp(long.StartTimestamp() + 2*3_600_000_000_000)
	md := o.consumeAndFlush(t, td)
	forMetric(md, semconv.MetricCalls, func(pmetric.Metric) { t.Error("a call was recorded") })
	forMetric(md, semconv.MetricHedgeWastedTime, func(pmetric.Metric) { t.Error("a wasted duration was recorded") })
	assert.Equal(t, int64(1), sumValue(t, md, semconv.MetricHedgeAttempts, nil))
	assert.Equal(t, int64(12), sumValue(t, md, semconv.MetricHedgeWastedTokens, nil))
	metadatatest.AssertEqualConnectorStallMetricsSpansImplausible(t, o.tel, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())

	// A longer max_duration takes them.
	cfg := defaultConfig()
	cfg.ChunkEvents.MaxDuration = 3 * time.Hour
	o = newObserved(t, cfg)
	md = o.consumeAndFlush(t, traces(carried))
	assert.Equal(t, int64(1), sumValue(t, md, semconv.MetricCalls, nil))
}

// The connector reads the chunk events its own chunk_events names: with the
// processor's custom names, the gaps are recorded; with the defaults, the
// events are not chunks and the stalls come from the stall events.
func TestChunkEventNamesFollowTheConfig(t *testing.T) {
	renamed := func(td ptrace.Traces) ptrace.Traces {
		for _, ev := range td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Events().All() {
			if ev.Name() == semconv.EventChunk {
				ev.SetName("my.chunk")
			}
		}
		return td
	}
	td := renamed(traces(call{service: "s", attrs: genAI("openai", "gpt-4o"), chunksMs: []int64{100, 150, 200, 3200, 3250, 9250, 9300, 9350}}))
	sink := new(consumertest.TracesSink)
	pcfg := stallprocessor.NewFactory().CreateDefaultConfig().(*stallprocessor.Config)
	pcfg.ChunkEvents.Names = []string{"my.chunk"}
	proc, err := stallprocessor.NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(stallprocessor.NewFactory().Type()), pcfg, sink)
	require.NoError(t, err)
	require.NoError(t, proc.ConsumeTraces(context.Background(), td))

	cfg := defaultConfig()
	cfg.ChunkEvents.Names = []string{"my.chunk"}
	o := newObserved(t, cfg)
	md := o.consumeAndFlush(t, sink.AllTraces()[0])
	assert.Equal(t, uint64(7), histogramPoint(t, md, semconv.MetricTimePerOutputChunk, nil).Count())

	o = newObserved(t, defaultConfig())
	md = o.consumeAndFlush(t, sink.AllTraces()[0])
	forMetric(md, semconv.MetricTimePerOutputChunk, func(pmetric.Metric) { t.Error("gaps from events the connector does not name") })
	assert.Equal(t, uint64(2), histogramPoint(t, md, semconv.MetricStallDuration, nil).Count(), "from the stall events")
}

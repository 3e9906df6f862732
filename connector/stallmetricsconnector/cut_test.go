// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallmetricsconnector

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/processor/stallprocessor"
)

// processedGolden runs a processor golden input through the real stall
// processor: the connector's input.
func processedGolden(t *testing.T, name string) ptrace.Traces {
	t.Helper()
	td, err := golden.ReadTraces(filepath.Join("..", "..", "processor", "stallprocessor", "testdata", name, "input.yaml"))
	require.NoError(t, err)
	pf := stallprocessor.NewFactory()
	sink := new(consumertest.TracesSink)
	proc, err := pf.CreateTraces(context.Background(), processortest.NewNopSettings(pf.Type()), pf.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, proc.ConsumeTraces(context.Background(), td))
	return sink.AllTraces()[0]
}

// A stream a stall cut ended is a stalled call, its cut silence a stall of
// at least that long, whatever the threshold: the guard cut the first one
// at 1 s, under the 2 s threshold.
func TestStallCutIsAStalledCall(t *testing.T) {
	for _, sealed := range []bool{true, false} {
		td := processedGolden(t, "stall_cut")
		if !sealed {
			unseal(td)
		}
		o := newObserved(t, defaultConfig())
		md := o.consumeAndFlush(t, td)
		dims := map[string]any{semconv.AttrServiceName: "gateway", semconv.AttrProviderName: "openai", semconv.AttrRequestModel: "gpt-4o"}
		assert.Equal(t, int64(3), sumValue(t, md, semconv.MetricCalls, map[string]any{semconv.AttrStalled: true}), "sealed %v", sealed)
		assert.Equal(t, int64(1), sumValue(t, md, semconv.MetricCalls, map[string]any{semconv.AttrStalled: false}), "sealed %v", sealed)
		stall := histogramPoint(t, md, semconv.MetricStallDuration, dims)
		assert.Equal(t, uint64(3), stall.Count())
		assert.InDelta(t, 1.002+32.5+1.0, stall.Sum(), 1e-9)
		assert.InDelta(t, 1.0, stall.Min(), 1e-12)
		// The cut silence is no gap between chunks.
		gaps := histogramPoint(t, md, semconv.MetricTimePerOutputChunk, dims)
		assert.Equal(t, uint64(4+2+4), gaps.Count())
		gen := histogramPoint(t, md, semconv.MetricGenerationDuration, dims)
		assert.InDelta(t, 1.082+32.52+1.0+0.08, gen.Sum(), 1e-9)
	}
}

// OpenLLMetry's frames: no TTFT is recorded, the TTFT wait is no stall.
func TestOpenLLMetryFramesKeepTheUnknownTTFTOut(t *testing.T) {
	o := newObserved(t, defaultConfig())
	md := o.consumeAndFlush(t, processedGolden(t, "openllmetry_frames"))
	forMetric(md, semconv.MetricTimeToFirstChunk, func(pmetric.Metric) { t.Error("a TTFT recorded from frame evidence") })
	forMetric(md, semconv.MetricTimeToFirstAnswer, func(pmetric.Metric) { t.Error("a TTFA recorded from frame evidence") })
	stall := histogramPoint(t, md, semconv.MetricStallDuration, map[string]any{semconv.AttrProviderName: "openai", semconv.AttrRequestModel: "gpt-4o-mini"})
	assert.Equal(t, uint64(2), stall.Count(), "one 3 s stall per span, the TTFT wait none")
	assert.InDelta(t, 6, stall.Sum(), 1e-9)
	assert.Equal(t, int64(2), sumValue(t, md, semconv.MetricCalls, map[string]any{semconv.AttrStalled: true}))
}

// The Vercel Responses provider's markers give no figure: nothing of that
// span is recorded, while the Chat provider's TTFT is, against fakellm's
// schedule (1500 ms) within the 8 ms the client's clock adds (its request's
// setup, on the SDK's own span). The spans are the SDK's own, captured.
func TestVercelResponsesMarkersRecordNothing(t *testing.T) {
	o := newObserved(t, defaultConfig())
	md := o.consumeAndFlush(t, processedGolden(t, "vercel_responses"))
	ttft := histogramPoint(t, md, semconv.MetricTimeToFirstChunk, map[string]any{semconv.AttrProviderName: "openai.chat"})
	assert.Equal(t, uint64(1), ttft.Count())
	assert.InDelta(t, 1.5, ttft.Sum(), 0.010)
	forMetric(md, semconv.MetricTimeToFirstChunk, func(m pmetric.Metric) {
		assert.Equal(t, 1, m.ExponentialHistogram().DataPoints().Len(), "only the Chat provider's span has a TTFT")
	})
	forMetric(md, semconv.MetricCalls, func(pmetric.Metric) { t.Error("a marker span counted as a call") })
}

// unseal removes the processor's seal from every span: a span from
// elsewhere, whose chunk events the connector reads in full.
func unseal(td ptrace.Traces) {
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				span.Attributes().Remove(semconv.AttrFiguresSeal)
			}
		}
	}
}

// The two readings of a span the processor sealed give the same metrics:
// the chunk times of a sealed span, and the whole span (the seal removed: a
// span from elsewhere). A chunk moved after the processor breaks the seal:
// the span is read in full, the moved chunk counted.
func TestSealedSpansRecordAsSpansFromElsewhere(t *testing.T) {
	calls := []call{workedExample, workedExample, {service: "chat-api", attrs: genAI("openai", "gpt-4o"), chunksMs: []int64{100, 100, 120, 2500, 2520}}}
	for i := range calls {
		calls[i].startMs = int64(i) * 10 // three spans, three seals
	}
	run := func(sealed, moveLastChunk bool) pmetric.Metrics {
		p := newPipeline(t, defaultConfig(), nil)
		sink := new(consumertest.TracesSink)
		pf := stallprocessor.NewFactory()
		proc, err := pf.CreateTraces(context.Background(), processortest.NewNopSettings(pf.Type()), pf.CreateDefaultConfig(), sink)
		require.NoError(t, err)
		require.NoError(t, proc.ConsumeTraces(context.Background(), traces(calls...)))
		td := sink.AllTraces()[0]
		if !sealed {
			unseal(td)
		}
		if moveLastChunk {
			for _, rs := range td.ResourceSpans().All() {
				events := rs.ScopeSpans().At(0).Spans().At(0).Events()
				for i := events.Len() - 1; i >= 0; i-- {
					if ev := events.At(i); ev.Name() == semconv.EventChunk {
						ev.SetTimestamp(ev.Timestamp() + pcommon.Timestamp(7*time.Millisecond))
						break
					}
				}
			}
		}
		require.NoError(t, p.connector.ConsumeTraces(context.Background(), td))
		p.flush(time.Second)
		require.Len(t, p.sink.AllMetrics(), 1)
		return p.sink.AllMetrics()[0]
	}
	same := func(a, b pmetric.Metrics) error {
		return pmetrictest.CompareMetrics(a, b, pmetrictest.IgnoreMetricsOrder(), pmetrictest.IgnoreMetricDataPointsOrder())
	}
	full := run(false, false)
	require.NoError(t, same(full, run(true, false)))
	moved := run(false, true)
	require.Error(t, same(full, moved), "the moved chunk counts")
	require.NoError(t, same(moved, run(true, true)))
}

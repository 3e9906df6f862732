// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallmetricsconnector

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/streamstall/streamstall/connector/stallmetricsconnector/internal/metadatatest"
	"github.com/streamstall/streamstall/internal/dimension"
	"github.com/streamstall/streamstall/internal/semconv"
)

// observed is a connector with its own telemetry and an observed log, fed
// directly (as if no stall processor ran before it).
type observed struct {
	c    *stallMetrics
	sink *consumertest.MetricsSink
	tel  *componenttest.Telemetry
	logs *observer.ObservedLogs
}

func newObserved(t *testing.T, cfg *Config) *observed {
	t.Helper()
	o := &observed{sink: new(consumertest.MetricsSink), tel: componenttest.NewTelemetry()}
	t.Cleanup(func() { require.NoError(t, o.tel.Shutdown(context.Background())) })
	set := metadatatest.NewSettings(o.tel)
	core, logs := observer.New(zapcore.WarnLevel)
	set.Logger, o.logs = zap.New(core), logs
	c, err := newStallMetrics(set, cfg, o.sink, clockwork.NewFakeClockAt(epoch))
	require.NoError(t, err)
	o.c = c
	return o
}

func (o *observed) export(t *testing.T, td ptrace.Traces) pmetric.Metrics {
	t.Helper()
	require.NoError(t, o.c.ConsumeTraces(context.Background(), td))
	require.NoError(t, o.c.flush(context.Background()))
	all := o.sink.AllMetrics()
	require.NotEmpty(t, all)
	return all[len(all)-1]
}

// carriedWorkedExample is what a stall processor with drop_chunk_events
// writes for the worked example: consistent figures, no chunk event.
func carriedWorkedExample() call {
	return call{service: "chat-api", attrs: genAI("openai", "gpt-4o",
		semconv.AttrChunkCount, 8, semconv.AttrTTFTMs, 100.0, semconv.AttrGenerationMs, 9250.0,
		semconv.AttrStallThresholdMs, 2000.0, semconv.AttrStallMs, 9000.0, semconv.AttrStallCount, 2,
		semconv.AttrMaxStallMs, 6000.0, semconv.AttrActiveGenerationMs, 250.0)}
}

// Spans that did not pass the stall processor, with figures no processor
// writes: each records nothing but its hedge attempt, and is counted.
func TestInconsistentSpansRecordNothing(t *testing.T) {
	o := newObserved(t, defaultConfig())
	md := o.export(t, traces(
		call{service: "s", attrs: map[string]any{semconv.AttrChunkCount: "many"}},
		call{service: "s", attrs: map[string]any{
			semconv.AttrChunkCount: 2, semconv.AttrTTFTMs: -5.0, semconv.AttrGenerationMs: "x",
			semconv.AttrActiveGenerationMs: 10.0, semconv.AttrStallCount: 1, semconv.AttrStallMs: 2500.0,
		}},
		call{service: "s", attrs: map[string]any{semconv.AttrChunkCount: 1, semconv.AttrTTFTMs: math.NaN()}},
		// An ingest record with no chunk times and stall figures.
		call{service: "s", attrs: map[string]any{semconv.AttrStallCount: 3, semconv.AttrStallMs: 90000.0}},
		// One chunk and forged stall figures, on a hedge attempt.
		call{service: "s", attrs: map[string]any{
			semconv.AttrChunkCount: 1, semconv.AttrStallCount: 7,
			semconv.AttrStallMs: 50000.0, semconv.AttrActiveTPS: 9999.0, semconv.AttrHedgeAttempt: 1,
		}},
		carriedWorkedExample(),
	))
	assert.Equal(t, int64(1), sumValue(t, md, semconv.MetricCalls, nil), "only the consistent span is a call")
	assert.Equal(t, int64(1), sumValue(t, md, semconv.MetricCalls, map[string]any{semconv.AttrStalled: true}))
	assert.Equal(t, int64(1), sumValue(t, md, semconv.MetricHedgeAttempts, nil), "the attempt is counted all the same")
	assert.InDelta(t, 0.1, histogramPoint(t, md, semconv.MetricTimeToFirstChunk, nil).Sum(), 1e-12)
	assert.InDelta(t, 9.25, histogramPoint(t, md, semconv.MetricGenerationDuration, nil).Sum(), 1e-12)
	stall := histogramPoint(t, md, semconv.MetricStallDuration, nil)
	assert.Equal(t, uint64(2), stall.Count(), "no stall event: both stalls at the mean")
	assert.InDelta(t, 9, stall.Sum(), 1e-12)
	metadatatest.AssertEqualConnectorStallMetricsSpansInconsistent(t, o.tel, []metricdata.DataPoint[int64]{{Value: 5}}, metricdatatest.IgnoreTimestamp())
}

// Stall events cannot add stalls to a consistent figure set: more events
// than stalls, or longer ones, make the span inconsistent.
func TestForgedStallEventsRecordNothing(t *testing.T) {
	o := newObserved(t, defaultConfig())
	td := traces(carriedWorkedExample())
	span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	for range 1000 {
		ev := span.Events().AppendEmpty()
		ev.SetName(semconv.EventStall)
		ev.Attributes().PutDouble(semconv.AttrStallEventDurationMs, 1e9)
	}
	require.NoError(t, o.c.ConsumeTraces(context.Background(), td))
	require.NoError(t, o.c.flush(context.Background()))
	assert.Empty(t, o.sink.AllMetrics())
	metadatatest.AssertEqualConnectorStallMetricsSpansInconsistent(t, o.tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
}

// Through the stall processor: forged figures on a span without chunk
// events are removed before the connector; a span with one chunk keeps
// only its chunk count and TTFT. Neither is a stalled call.
func TestForgedFiguresThroughTheProcessor(t *testing.T) {
	p := newPipeline(t, defaultConfig(), nil)
	p.start()
	p.consume(
		call{service: "s", attrs: genAI("openai", "gpt-4o", semconv.AttrStallCount, 3, semconv.AttrStallMs, 90000.0)},
		call{service: "s", attrs: genAI("openai", "gpt-4o", semconv.AttrChunkCount, 1, semconv.AttrStallCount, 3, semconv.AttrStallMs, 90000.0)},
		call{
			service: "s", attrs: genAI("openai", "gpt-4o", semconv.AttrStallCount, 7, semconv.AttrStallMs, 50000.0, semconv.AttrActiveTPS, 9999.0),
			chunksMs: []int64{850},
		},
	)
	p.flush(time.Second)
	md := onlyExport(t, p)
	assert.Equal(t, int64(1), sumValue(t, md, semconv.MetricCalls, nil), "the span with a chunk")
	assert.Equal(t, int64(0), sumValue(t, md, semconv.MetricCalls, map[string]any{semconv.AttrStalled: true}))
	forMetric(md, semconv.MetricStallDuration, func(pmetric.Metric) { t.Error("no stall was measured") })
}

// Past max_series: one warning for the connector's life, and every lookup
// that went to the overflow point counted.
func TestOverflowLoggedOnceAndCounted(t *testing.T) {
	cfg := defaultConfig()
	cfg.MaxSeries = 2
	o := newObserved(t, cfg)
	require.NoError(t, o.c.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, o.c.Shutdown(context.Background())) })
	batch := func(models ...string) {
		var calls []call
		for _, m := range models {
			calls = append(calls, call{service: "s", attrs: genAI("openai", m), chunksMs: []int64{100, 200}})
		}
		require.NoError(t, o.c.ConsumeTraces(context.Background(), processed(t, calls...)))
	}
	batch("m1", "m2", "m1")
	assert.Zero(t, o.logs.Len(), "within the limit")
	batch("m3", "m4", "m1")
	batch("m5")
	require.Equal(t, 1, o.logs.Len(), "logged once")
	entry := o.logs.All()[0]
	assert.Equal(t, zapcore.WarnLevel, entry.Level)
	assert.Contains(t, entry.Message, "max_series reached")
	assert.Equal(t, int64(2), entry.ContextMap()["max_series"])
	// Each two-chunk call looks up six metrics (TTFT, TTFA, gaps, generation,
	// active generation, calls): m3, m4 and m5 overflowed in all six.
	metadatatest.AssertEqualConnectorStallMetricsPointsOverflowed(t, o.tel, []metricdata.DataPoint[int64]{{Value: 18}}, metricdatatest.IgnoreTimestamp())
}

func TestDimensionValueLength(t *testing.T) {
	cfg := defaultConfig()
	cfg.MaxDimensionValueLength = 8
	cfg.Dimensions = []dimension.Dimension{{Name: "tags"}}
	o := newObserved(t, cfg)
	td := processed(t,
		call{service: "chat-api-frontend", attrs: genAI("openai", "gpt-4o-2024-08-06"), chunksMs: []int64{100}},
		call{service: "s", attrs: genAI("openai", "modèles-très-longs"), chunksMs: []int64{100}},
		call{service: "s", attrs: genAI("openai", strings.Repeat("m", 4<<20),
			semconv.AttrHedgeAttempt, 1, semconv.AttrHedgeTrigger, strings.Repeat("t", 1<<20)), chunksMs: []int64{100}},
	)
	tags := td.ResourceSpans().At(2).ScopeSpans().At(0).Spans().At(0).Attributes().PutEmptySlice("tags")
	tags.AppendEmpty().SetStr("a-long-tag")
	md := o.export(t, td)

	histogramPoint(t, md, semconv.MetricTimeToFirstChunk, map[string]any{semconv.AttrServiceName: "chat-api", semconv.AttrRequestModel: "gpt-4o-2"})
	// è is two bytes: "modèles-" would be 9.
	histogramPoint(t, md, semconv.MetricTimeToFirstChunk, map[string]any{semconv.AttrRequestModel: "modèles"})
	histogramPoint(t, md, semconv.MetricTimeToFirstChunk, map[string]any{semconv.AttrRequestModel: "mmmmmmmm", "tags": `["a-long`})
	attempt := map[string]any{semconv.AttrHedgeTrigger: "tttttttt", semconv.AttrRequestModel: "mmmmmmmm"}
	assert.Equal(t, int64(1), sumValue(t, md, semconv.MetricHedgeAttempts, attempt))
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				eachPointAttributes(m, func(attrs pcommon.Map) {
					for k, v := range attrs.All() {
						assert.LessOrEqual(t, len(v.AsString()), 8, "%s of %s", k, m.Name())
					}
				})
			}
		}
	}
}

func eachPointAttributes(m pmetric.Metric, f func(pcommon.Map)) {
	switch m.Type() {
	case pmetric.MetricTypeExponentialHistogram:
		for _, dp := range m.ExponentialHistogram().DataPoints().All() {
			f(dp.Attributes())
		}
	case pmetric.MetricTypeSum:
		for _, dp := range m.Sum().DataPoints().All() {
			f(dp.Attributes())
		}
	default:
	}
}

// Usage is client data: only a whole, non-negative number of tokens counts
// as usage; anything else falls back to the chunk count. The counter
// saturates rather than wrap.
func TestWastedTokensFromHostileUsage(t *testing.T) {
	for _, tt := range []struct {
		usage      any
		wantTokens int64
		wantSource string
	}{
		{usage: int64(12), wantTokens: 12, wantSource: semconv.HedgeWastedSourceUsage},
		{usage: "12", wantTokens: 12, wantSource: semconv.HedgeWastedSourceUsage},
		{usage: 12.0, wantTokens: 12, wantSource: semconv.HedgeWastedSourceUsage},
		{usage: int64(-4), wantTokens: 3, wantSource: semconv.HedgeWastedSourceChunks},
		{usage: 12.5, wantTokens: 3, wantSource: semconv.HedgeWastedSourceChunks},
		{usage: math.NaN(), wantTokens: 3, wantSource: semconv.HedgeWastedSourceChunks},
		{usage: 1e300, wantTokens: 3, wantSource: semconv.HedgeWastedSourceChunks},
		{usage: "many", wantTokens: 3, wantSource: semconv.HedgeWastedSourceChunks},
		{usage: true, wantTokens: 3, wantSource: semconv.HedgeWastedSourceChunks},
	} {
		loser := hedgeLoser
		loser.attrs = genAI("openai", "gpt-4o", semconv.AttrHedgeOutcome, "loser", semconv.AttrUsageOutputTokens, tt.usage)
		p := newPipeline(t, defaultConfig(), nil)
		p.start()
		p.consume(loser)
		p.flush(time.Second)
		md := onlyExport(t, p)
		assert.Equal(t, tt.wantTokens, sumValue(t, md, semconv.MetricHedgeWastedTokens, map[string]any{semconv.AttrHedgeWastedSource: tt.wantSource}), "%v", tt.usage)
	}

	assert.Equal(t, int64(math.MaxInt64), addSaturating(math.MaxInt64-1, 5))
	assert.Equal(t, int64(7), addSaturating(2, 5))
	p := newPipeline(t, defaultConfig(), nil)
	p.start()
	huge := hedgeLoser
	huge.attrs = genAI("openai", "gpt-4o", semconv.AttrHedgeOutcome, "loser", semconv.AttrUsageOutputTokens, int64(math.MaxInt64-10))
	p.consume(huge, huge)
	p.flush(time.Second)
	assert.Equal(t, int64(math.MaxInt64), sumValue(t, onlyExport(t, p), semconv.MetricHedgeWastedTokens, nil))
}

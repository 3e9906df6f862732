// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallmetricsconnector

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/streamstall/streamstall/internal/dimension"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/processor/stallprocessor"
)

// docs/contract.md section 4's worked examples and their neighbours.
var (
	// Stalls of 3 s and 6 s; gaps 50 50 3000 50 6000 50 50 ms.
	workedExample = call{
		service: "chat-api", attrs: genAI("openai", "gpt-4o"),
		chunksMs: []int64{100, 150, 200, 3200, 3250, 9250, 9300, 9350},
	}
	// One stall of two gaps, 10 s.
	trickle = call{
		service: "chat-api", attrs: genAI("openai", "gpt-4o"),
		chunksMs: []int64{0, 5000, 10000, 10050},
	}
	// One chunk: TTFT only.
	oneChunk = call{service: "chat-api", attrs: genAI("openai", "gpt-4o-mini"), chunksMs: []int64{800}}
	// Provider and model through their fallbacks, no stall.
	fallbacks = call{service: "batch", attrs: map[string]any{
		semconv.AttrSystem: "anthropic", semconv.AttrResponseModel: "claude-sonnet-4-5", semconv.AttrOperationName: "chat",
	}, chunksMs: []int64{1600, 1700, 1800}}
	// Not a streaming call: no chunk, no metric.
	nonStreaming = call{service: "chat-api", attrs: genAI("openai", "gpt-4o")}
	// A hedged call: the primary won, the stall-triggered attempt lost.
	primaryWinner = call{
		service: "chat-api", attrs: genAI("openai", "gpt-4o",
			semconv.AttrHedgeGroupID, "g1", semconv.AttrHedgeAttempt, 0, semconv.AttrHedgeOutcome, "winner"),
		chunksMs: []int64{400, 450, 500},
	}
	hedgeLoser = call{
		service: "chat-api", attrs: genAI("azure.ai.openai", "gpt-4o",
			semconv.AttrHedgeGroupID, "g1", semconv.AttrHedgeAttempt, 1, semconv.AttrHedgeTrigger, "ttft", semconv.AttrHedgeOutcome, "loser"),
		startMs: 300, chunksMs: []int64{700, 5000, 5100},
	}
	// An attempt that failed before any chunk, flagged loser by a condition.
	failedAttempt = call{service: "chat-api", attrs: genAI("openai", "gpt-4o",
		semconv.AttrHedgeGroupID, "g2", semconv.AttrHedgeAttempt, 2, semconv.AttrHedgeTrigger, "error", semconv.AttrHedgeLoser, true)}
	// A loser that reported its usage: 57 output tokens in 251 ms.
	usageLoser = call{service: "chat-api", attrs: genAI("openai", "gpt-4o",
		semconv.AttrHedgeGroupID, "g3", semconv.AttrHedgeAttempt, 1, semconv.AttrHedgeTrigger, "stall", semconv.AttrHedgeOutcome, "loser",
		semconv.AttrUsageOutputTokens, 57), chunksMs: []int64{200, 250}}
	// A reasoning model: three thinking chunks, then the answer 2 s later.
	thinker = call{
		service: "chat-api", attrs: genAI("anthropic", "claude-sonnet-4-5"),
		chunksMs: []int64{300, 350, 400, 2400, 2450}, reasoning: 3,
	}
)

func allCalls() []call {
	return []call{workedExample, trickle, oneChunk, fallbacks, nonStreaming, primaryWinner, hedgeLoser, failedAttempt, usageLoser, thinker}
}

// histogramPoint finds the only data point of a histogram metric whose
// attributes include want.
func histogramPoint(t *testing.T, md pmetric.Metrics, name string, want map[string]any) pmetric.ExponentialHistogramDataPoint {
	t.Helper()
	var found []pmetric.ExponentialHistogramDataPoint
	forMetric(md, name, func(m pmetric.Metric) {
		for _, dp := range m.ExponentialHistogram().DataPoints().All() {
			if hasAttributes(dp.Attributes(), want) {
				found = append(found, dp)
			}
		}
	})
	require.Len(t, found, 1, "%s %v", name, want)
	return found[0]
}

func sumValue(t *testing.T, md pmetric.Metrics, name string, want map[string]any) int64 {
	t.Helper()
	var total int64
	forMetric(md, name, func(m pmetric.Metric) {
		for _, dp := range m.Sum().DataPoints().All() {
			if hasAttributes(dp.Attributes(), want) {
				total += dp.IntValue()
			}
		}
	})
	return total
}

func forMetric(md pmetric.Metrics, name string, f func(pmetric.Metric)) {
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				if m.Name() == name {
					f(m)
				}
			}
		}
	}
}

func hasAttributes(m pcommon.Map, want map[string]any) bool {
	for k, v := range want {
		got, ok := m.Get(k)
		if !ok || got.AsRaw() != v {
			return false
		}
	}
	return true
}

func onlyExport(t *testing.T, p *testPipeline) pmetric.Metrics {
	t.Helper()
	all := p.sink.AllMetrics()
	require.Len(t, all, 1)
	return all[0]
}

func TestAllMetrics(t *testing.T) {
	p := newPipeline(t, defaultConfig(), nil)
	p.start()
	p.consume(allCalls()...)
	p.flush(15 * time.Second)
	md := onlyExport(t, p)
	compareGolden(t, "all_metrics", md)

	gpt4o := map[string]any{semconv.AttrServiceName: "chat-api", semconv.AttrProviderName: "openai", semconv.AttrRequestModel: "gpt-4o", semconv.AttrOperationName: "chat"}
	ttft := histogramPoint(t, md, semconv.MetricTimeToFirstChunk, gpt4o)
	assert.Equal(t, uint64(3), ttft.Count()) // worked example, trickle, primary winner
	assert.InDelta(t, 0.1+0+0.4, ttft.Sum(), 1e-9)
	assert.Equal(t, uint64(1), ttft.ZeroCount(), "the trickle's first chunk came at the span start")

	gen := histogramPoint(t, md, semconv.MetricGenerationDuration, gpt4o)
	assert.Equal(t, uint64(3), gen.Count())
	assert.InDelta(t, 9.25+10.05+0.1, gen.Sum(), 1e-9)
	active := histogramPoint(t, md, semconv.MetricActiveGenDuration, gpt4o)
	assert.InDelta(t, 0.25+0.05+0.1, active.Sum(), 1e-9)
	assert.InDelta(t, 0.05, active.Min(), 1e-12)

	stall := histogramPoint(t, md, semconv.MetricStallDuration, gpt4o)
	assert.Equal(t, uint64(3), stall.Count()) // 3 s and 6 s, then one 10 s stall of two gaps
	assert.InDelta(t, 19, stall.Sum(), 1e-9)
	assert.InDelta(t, 3, stall.Min(), 1e-12)
	assert.InDelta(t, 10, stall.Max(), 1e-12)

	gaps := histogramPoint(t, md, semconv.MetricTimePerOutputChunk, gpt4o)
	assert.Equal(t, uint64(7+3+2), gaps.Count())
	assert.InDelta(t, 9.25+10.05+0.1, gaps.Sum(), 1e-9)

	assert.Equal(t, int64(2), sumValue(t, md, semconv.MetricCalls, map[string]any{semconv.AttrStalled: true}))
	assert.Equal(t, int64(4), sumValue(t, md, semconv.MetricCalls, map[string]any{semconv.AttrStalled: false}))
	assert.Equal(t, int64(4), sumValue(t, md, semconv.MetricHedgeAttempts, nil))
	assert.Equal(t, int64(3), sumValue(t, md, semconv.MetricHedgeAttempts, map[string]any{semconv.AttrHedgeOutcome: "loser"}))

	// Time to first answer: every call with an answer chunk; the thinker's
	// answer came 2.4 s in, its first (reasoning) chunk 0.3 s in.
	ttfa := histogramPoint(t, md, semconv.MetricTimeToFirstAnswer, gpt4o)
	assert.Equal(t, uint64(3), ttfa.Count())
	assert.InDelta(t, 0.1+0+0.4, ttfa.Sum(), 1e-9, "without reasoning, TTFA is TTFT")
	claude := map[string]any{semconv.AttrServiceName: "chat-api", semconv.AttrProviderName: "anthropic", semconv.AttrRequestModel: "claude-sonnet-4-5"}
	assert.InDelta(t, 2.4, histogramPoint(t, md, semconv.MetricTimeToFirstAnswer, claude).Sum(), 1e-9)
	assert.InDelta(t, 0.3, histogramPoint(t, md, semconv.MetricTimeToFirstChunk, claude).Sum(), 1e-9)

	// The cost of hedging: the losers' tokens, from usage or chunk count, and durations.
	assert.Equal(t, int64(57), sumValue(t, md, semconv.MetricHedgeWastedTokens, map[string]any{
		semconv.AttrProviderName: "openai", semconv.AttrHedgeWastedSource: semconv.HedgeWastedSourceUsage,
	}))
	assert.Equal(t, int64(3), sumValue(t, md, semconv.MetricHedgeWastedTokens, map[string]any{
		semconv.AttrProviderName: "azure.ai.openai", semconv.AttrHedgeWastedSource: semconv.HedgeWastedSourceChunks,
	}))
	assert.Equal(t, int64(60), sumValue(t, md, semconv.MetricHedgeWastedTokens, nil), "the failed attempt had neither usage nor chunks")
	wasted := histogramPoint(t, md, semconv.MetricHedgeWastedTime, gpt4o)
	assert.Equal(t, uint64(2), wasted.Count())
	assert.InDelta(t, 0.001+0.251, wasted.Sum(), 1e-9)
	assert.InDelta(t, 5.101, histogramPoint(t, md, semconv.MetricHedgeWastedTime, map[string]any{semconv.AttrProviderName: "azure.ai.openai"}).Sum(), 1e-9)

	// Fallbacks: provider from gen_ai.system, model from gen_ai.response.model.
	histogramPoint(t, md, semconv.MetricTimeToFirstChunk, map[string]any{
		semconv.AttrServiceName: "batch", semconv.AttrProviderName: "anthropic", semconv.AttrRequestModel: "claude-sonnet-4-5",
	})
	// The loser reached no winner metric.
	forMetric(md, semconv.MetricCalls, func(m pmetric.Metric) {
		for _, dp := range m.Sum().DataPoints().All() {
			v, _ := dp.Attributes().Get(semconv.AttrProviderName)
			assert.NotEqual(t, "azure.ai.openai", v.AsString())
		}
	})
}

func TestLosersSeparate(t *testing.T) {
	cfg := defaultConfig()
	cfg.Losers = LosersSeparate
	p := newPipeline(t, cfg, nil)
	p.start()
	p.consume(primaryWinner, hedgeLoser, failedAttempt)
	p.flush(15 * time.Second)
	md := onlyExport(t, p)
	compareGolden(t, "losers_separate", md)

	loser := map[string]any{semconv.AttrHedgeOutcome: "loser"}
	ttft := histogramPoint(t, md, semconv.MetricTimeToFirstChunk, loser)
	assert.InDelta(t, 0.7, ttft.Sum(), 1e-9) // first chunk 700 ms after the attempt started
	stall := histogramPoint(t, md, semconv.MetricStallDuration, loser)
	assert.InDelta(t, 4.3, stall.Sum(), 1e-9)
	// Winners carry no outcome dimension, exactly as with losers: exclude.
	forMetric(md, semconv.MetricTimeToFirstChunk, func(m pmetric.Metric) {
		assert.Equal(t, 2, m.ExponentialHistogram().DataPoints().Len())
	})
	assert.Equal(t, int64(1), sumValue(t, md, semconv.MetricCalls, map[string]any{semconv.AttrHedgeOutcome: "loser", semconv.AttrStalled: true}))
}

func TestLosersExcludedByFlagAlone(t *testing.T) {
	// llm.hedge.loser set by a loser condition, the outcome still "winner".
	flagged := primaryWinner
	flagged.attrs = genAI("openai", "gpt-4o", semconv.AttrHedgeAttempt, 1, semconv.AttrHedgeTrigger, "stall",
		semconv.AttrHedgeOutcome, "winner", semconv.AttrHedgeLoser, true)
	p := newPipeline(t, defaultConfig(), nil)
	p.start()
	p.consume(flagged)
	p.flush(time.Second)
	md := onlyExport(t, p)
	require.Equal(t, 3, md.MetricCount(), "only llm.hedge.attempts and the wasted metrics")
	assert.Equal(t, int64(1), sumValue(t, md, semconv.MetricHedgeAttempts,
		map[string]any{semconv.AttrHedgeTrigger: "stall", semconv.AttrHedgeOutcome: "loser"}))
	assert.Equal(t, int64(3), sumValue(t, md, semconv.MetricHedgeWastedTokens,
		map[string]any{semconv.AttrHedgeWastedSource: semconv.HedgeWastedSourceChunks}))
	assert.InDelta(t, 0.501, histogramPoint(t, md, semconv.MetricHedgeWastedTime, nil).Sum(), 1e-9)
}

func TestOverflow(t *testing.T) {
	cfg := defaultConfig()
	cfg.MaxSeries = 2
	p := newPipeline(t, cfg, nil)
	p.start()
	for _, model := range []string{"m1", "m2", "m3", "m4", "m1"} {
		p.consume(call{service: "chat-api", attrs: genAI("openai", model), chunksMs: []int64{100, 200}})
	}
	p.flush(15 * time.Second)
	md := onlyExport(t, p)
	compareGolden(t, "overflow", md)

	overflow := histogramPoint(t, md, semconv.MetricTimeToFirstChunk, map[string]any{semconv.AttrMetricOverflow: true})
	assert.Equal(t, uint64(2), overflow.Count(), "m3 and m4")
	assert.Equal(t, 1, overflow.Attributes().Len())
	assert.Equal(t, uint64(2), histogramPoint(t, md, semconv.MetricTimeToFirstChunk, map[string]any{semconv.AttrRequestModel: "m1"}).Count())
}

func TestCumulative(t *testing.T) {
	p := newPipeline(t, defaultConfig(), nil)
	p.start()
	p.consume(workedExample)
	p.flush(15 * time.Second)
	p.consume(trickle, hedgeLoser)
	p.flush(15 * time.Second)
	p.flush(15 * time.Second) // nothing new: the same totals, a later timestamp
	all := p.sink.AllMetrics()
	require.Len(t, all, 3)
	compareGolden(t, "cumulative_1", all[0])
	compareGolden(t, "cumulative_2", all[1])
	for _, md := range all {
		forMetric(md, semconv.MetricCalls, func(m pmetric.Metric) {
			assert.Equal(t, pmetric.AggregationTemporalityCumulative, m.Sum().AggregationTemporality())
			for _, dp := range m.Sum().DataPoints().All() {
				assert.Equal(t, epoch, dp.StartTimestamp().AsTime().UTC(), "cumulative points start at the connector start")
			}
		})
	}
	third := histogramPoint(t, all[2], semconv.MetricStallDuration, nil)
	assert.Equal(t, uint64(3), third.Count())
	assert.Equal(t, epoch.Add(45*time.Second), third.Timestamp().AsTime().UTC())
}

func TestDelta(t *testing.T) {
	cfg := defaultConfig()
	cfg.Temporality = TemporalityDelta
	p := newPipeline(t, cfg, nil)
	p.start()
	p.consume(workedExample, primaryWinner)
	p.flush(15 * time.Second)
	p.consume(trickle)
	p.flush(15 * time.Second)
	p.flush(15 * time.Second) // empty interval: nothing exported
	all := p.sink.AllMetrics()
	require.Len(t, all, 2)
	compareGolden(t, "delta_1", all[0])
	compareGolden(t, "delta_2", all[1])

	second := histogramPoint(t, all[1], semconv.MetricStallDuration, nil)
	assert.Equal(t, uint64(1), second.Count(), "only the trickle's stall")
	assert.Equal(t, epoch.Add(15*time.Second), second.StartTimestamp().AsTime().UTC(), "a delta point starts at the previous flush")
	assert.Equal(t, epoch.Add(30*time.Second), second.Timestamp().AsTime().UTC())
}

// TestDeltaIdleSeries: a series idle for an interval starts its next point
// at its previous export, so that consumers that sum deltas into totals
// (the prometheus exporter) see one uninterrupted run, and a value-less
// point is not exported.
func TestDeltaIdleSeries(t *testing.T) {
	cfg := defaultConfig()
	cfg.Temporality = TemporalityDelta
	p := newPipeline(t, cfg, nil)
	p.start()
	p.consume(workedExample) // gpt-4o
	p.flush(15 * time.Second)
	p.consume(oneChunk) // gpt-4o-mini only
	p.flush(15 * time.Second)
	p.consume(trickle) // gpt-4o again
	p.flush(15 * time.Second)
	all := p.sink.AllMetrics()
	require.Len(t, all, 3)

	second := all[1]
	forMetric(second, semconv.MetricTimeToFirstChunk, func(m pmetric.Metric) {
		require.Equal(t, 1, m.ExponentialHistogram().DataPoints().Len(), "gpt-4o had no value")
	})
	forMetric(second, semconv.MetricStallDuration, func(pmetric.Metric) { t.Error("no stall in the second interval") })

	gpt4o := map[string]any{semconv.AttrRequestModel: "gpt-4o"}
	third := histogramPoint(t, all[2], semconv.MetricTimeToFirstChunk, gpt4o)
	assert.Equal(t, uint64(1), third.Count())
	assert.Equal(t, epoch.Add(15*time.Second), third.StartTimestamp().AsTime().UTC(), "starts at its own previous export")
	assert.Equal(t, epoch.Add(45*time.Second), third.Timestamp().AsTime().UTC())
	calls := all[2]
	forMetric(calls, semconv.MetricCalls, func(m pmetric.Metric) {
		for _, dp := range m.Sum().DataPoints().All() {
			assert.Equal(t, int64(1), dp.IntValue())
			assert.Equal(t, epoch.Add(15*time.Second), dp.StartTimestamp().AsTime().UTC())
		}
	})
	// A point new in an interval starts at the previous flush.
	mini := histogramPoint(t, second, semconv.MetricTimeToFirstChunk, map[string]any{semconv.AttrRequestModel: "gpt-4o-mini"})
	assert.Equal(t, epoch.Add(15*time.Second), mini.StartTimestamp().AsTime().UTC())
	// Values were emptied after each flush: only the trickle's three gaps.
	gaps := histogramPoint(t, all[2], semconv.MetricTimePerOutputChunk, gpt4o)
	assert.Equal(t, uint64(3), gaps.Count())
}

func TestEmptyFlushExportsNothing(t *testing.T) {
	for _, temporality := range []string{TemporalityCumulative, TemporalityDelta} {
		t.Run(temporality, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.Temporality = temporality
			p := newPipeline(t, cfg, nil)
			p.start()
			p.flush(15 * time.Second)
			// Spans without streaming figures or hedge attributes record nothing.
			p.consume(nonStreaming)
			p.flush(15 * time.Second)
			assert.Empty(t, p.sink.AllMetrics())
			require.NoError(t, p.connector.Shutdown(context.Background()))
			assert.Empty(t, p.sink.AllMetrics(), "the final flush of Shutdown has nothing either")
		})
	}
}

func TestRestart(t *testing.T) {
	p := newPipeline(t, defaultConfig(), nil)
	p.start()
	p.consume(workedExample)
	p.clock.Advance(5 * time.Second)
	require.NoError(t, p.connector.Shutdown(context.Background()))
	require.Len(t, p.sink.AllMetrics(), 1, "Shutdown flushes once")
	compareGolden(t, "restart_first", p.sink.AllMetrics()[0])

	p.clock.Advance(time.Minute)
	p.start()
	p.consume(oneChunk)
	p.clock.Advance(5 * time.Second)
	require.NoError(t, p.connector.Shutdown(context.Background()))
	require.NoError(t, p.connector.Shutdown(context.Background()), "a second Shutdown is a no-op")
	all := p.sink.AllMetrics()
	require.Len(t, all, 2)
	compareGolden(t, "restart_second", all[1])
	ttft := histogramPoint(t, all[1], semconv.MetricTimeToFirstChunk, nil)
	assert.Equal(t, uint64(1), ttft.Count(), "the first run's values were exported and are not carried over")
	assert.Equal(t, epoch.Add(65*time.Second), ttft.StartTimestamp().AsTime().UTC(), "a restart starts a new cumulative series")
}

// TestDroppedChunkEvents: with drop_chunk_events and one stall event kept,
// per-gap values are skipped and the stalls come from the stall event plus
// the mean of the dropped ones, keeping count and sum exact.
func TestDroppedChunkEvents(t *testing.T) {
	p := newPipeline(t, defaultConfig(), func(cfg *stallprocessor.Config) {
		cfg.DropChunkEvents = true
		cfg.MaxStallEvents = 1
	})
	p.start()
	threeStalls := call{
		service: "chat-api", attrs: genAI("openai", "gpt-4o"),
		chunksMs: []int64{100, 3100, 3200, 8200, 8300, 15300},
	}
	p.consume(threeStalls)
	p.flush(15 * time.Second)
	md := onlyExport(t, p)
	compareGolden(t, "dropped_chunk_events", md)

	forMetric(md, semconv.MetricTimePerOutputChunk, func(pmetric.Metric) { t.Error("no gap values without chunk events") })
	stall := histogramPoint(t, md, semconv.MetricStallDuration, nil)
	assert.Equal(t, uint64(3), stall.Count())
	assert.InDelta(t, 15, stall.Sum(), 1e-9)
	assert.InDelta(t, 3, stall.Min(), 1e-12, "the stall event kept")
	assert.InDelta(t, 6, stall.Max(), 1e-12, "the mean of the 5 s and 7 s stalls dropped")
	assert.Equal(t, int64(1), sumValue(t, md, semconv.MetricCalls, map[string]any{semconv.AttrStalled: true}))
}

func TestExtraDimensions(t *testing.T) {
	cfg := defaultConfig()
	unknown := "unknown"
	cfg.Dimensions = []dimension.Dimension{{Name: "server.address"}, {Name: "deployment.environment.name", Default: &unknown}, {Name: "team"}}
	p := newPipeline(t, cfg, nil)
	p.start()
	withAddress := oneChunk
	withAddress.attrs = genAI("openai", "gpt-4o", "server.address", "api.openai.com")
	p.consume(withAddress, oneChunk)
	td := traces(oneChunk)
	td.ResourceSpans().At(0).Resource().Attributes().PutStr("team", "search")
	require.NoError(t, p.processor.ConsumeTraces(context.Background(), td))
	p.flush(time.Second)
	md := onlyExport(t, p)
	histogramPoint(t, md, semconv.MetricTimeToFirstChunk, map[string]any{"server.address": "api.openai.com", "deployment.environment.name": "unknown"})
	histogramPoint(t, md, semconv.MetricTimeToFirstChunk, map[string]any{"team": "search"})
	forMetric(md, semconv.MetricTimeToFirstChunk, func(m pmetric.Metric) {
		assert.Equal(t, 3, m.ExponentialHistogram().DataPoints().Len())
		_, ok := m.ExponentialHistogram().DataPoints().At(0).Attributes().Get("team")
		assert.False(t, ok, "an absent dimension without default is left off")
	})
}

func TestFlushLoopRunsOnTheClock(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Temporality = TemporalityDelta
	p := newPipeline(t, cfg, nil)
	exported := make(chan pmetric.Metrics, 4)
	p.connector.next = notifying{sink: p.sink, exported: exported}
	p.start()
	p.consume(workedExample)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.clock.BlockUntilContext(ctx, 1), "the ticker is waiting")
	p.clock.Advance(cfg.FlushInterval)
	select {
	case md := <-exported:
		assert.Equal(t, uint64(1), histogramPoint(t, md, semconv.MetricTimeToFirstChunk, nil).Count())
	case <-ctx.Done():
		t.Fatal("no export after a flush interval")
	}
	require.NoError(t, p.connector.Shutdown(context.Background()))
	assert.Len(t, p.sink.AllMetrics(), 1, "delta: the final flush had nothing left to export")
}

func TestConcurrentConsumeAndFlush(t *testing.T) {
	cfg := defaultConfig()
	cfg.Temporality = TemporalityDelta
	p := newPipeline(t, cfg, nil)
	p.start()
	const writers, batches = 4, 50
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range batches {
				assert.NoError(t, p.processor.ConsumeTraces(context.Background(), traces(workedExample, hedgeLoser)))
			}
		})
	}
	for range 20 {
		p.clock.Advance(cfg.FlushInterval)
		assert.NoError(t, p.connector.flush(context.Background()))
	}
	wg.Wait()
	require.NoError(t, p.connector.Shutdown(context.Background()))
	var calls, attempts int64
	for _, md := range p.sink.AllMetrics() {
		calls += sumValue(t, md, semconv.MetricCalls, nil)
		attempts += sumValue(t, md, semconv.MetricHedgeAttempts, nil)
	}
	assert.Equal(t, int64(writers*batches), calls, "every call counted once across delta exports")
	assert.Equal(t, int64(writers*batches), attempts)
}

func TestShutdownWithoutStart(t *testing.T) {
	p := newPipeline(t, defaultConfig(), nil)
	require.NoError(t, p.connector.Shutdown(context.Background()))
	require.NoError(t, p.connector.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, p.connector.Shutdown(context.Background()))
}

func TestExportErrorIsReturnedByShutdown(t *testing.T) {
	p := newPipeline(t, defaultConfig(), nil)
	refused := errors.New("pipeline full")
	p.connector.next = consumertest.NewErr(refused)
	p.start()
	p.consume(workedExample)
	err := p.connector.Shutdown(context.Background())
	require.ErrorIs(t, err, refused)
	assert.ErrorContains(t, err, "export stall metrics")
}

// metric_names: the two GenAI histograms under the v1.41 names, the names of
// the conventions' main branch, or both with identical data points.
func TestMetricNames(t *testing.T) {
	stable := []string{semconv.MetricTimeToFirstChunk, semconv.MetricTimePerOutputChunk}
	latest := []string{semconv.MetricTimeToFirstChunkLatest, semconv.MetricTimePerOutputChunkLatest}
	export := func(names string) pmetric.Metrics {
		cfg := defaultConfig()
		cfg.MetricNames = names
		p := newPipeline(t, cfg, nil)
		p.start()
		p.consume(workedExample, trickle, thinker)
		p.flush(time.Second)
		return onlyExport(t, p)
	}
	has := func(md pmetric.Metrics, name string) bool {
		found := false
		forMetric(md, name, func(pmetric.Metric) { found = true })
		return found
	}
	for _, tt := range []struct {
		names         string
		want, notWant []string
	}{
		{names: MetricNamesStable, want: stable, notWant: latest},
		{names: MetricNamesLatest, want: latest, notWant: stable},
		{names: MetricNamesBoth, want: append(append([]string(nil), stable...), latest...)},
	} {
		t.Run(tt.names, func(t *testing.T) {
			md := export(tt.names)
			for _, n := range tt.want {
				assert.True(t, has(md, n), n)
			}
			for _, n := range tt.notWant {
				assert.False(t, has(md, n), n)
			}
			assert.True(t, has(md, semconv.MetricTimeToFirstAnswer), "not a GenAI name: the same in every mode")
		})
	}

	// Every value under both names, the same as under either alone.
	both, alone := export(MetricNamesBoth), export(MetricNamesStable)
	for i, name := range stable {
		var want, gotStable, gotLatest pmetric.Metric
		forMetric(alone, name, func(m pmetric.Metric) { want = m })
		forMetric(both, name, func(m pmetric.Metric) { gotStable = m })
		forMetric(both, latest[i], func(m pmetric.Metric) { gotLatest = m })
		require.Equal(t, 2, want.ExponentialHistogram().DataPoints().Len(), name)
		assert.Equal(t, want.ExponentialHistogram(), gotStable.ExponentialHistogram(), name)
		assert.Equal(t, want.ExponentialHistogram(), gotLatest.ExponentialHistogram(), latest[i])
		assert.Equal(t, want.Unit(), gotLatest.Unit())
		assert.Equal(t, want.Description(), gotLatest.Description())
	}
}

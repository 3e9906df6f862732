// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallmetricsconnector

import (
	"context"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
)

// FuzzConsumeTraces feeds spans whose figures and events are arbitrary, as a
// foreign or broken producer could send them: the connector must never
// panic, count every streaming winner with trusted figures (consistent, and
// plausible with its chunk events) once, record nothing but the hedge
// attempt (and a loser's waste) for any other span, count a loser's chunks
// as wasted tokens only from trusted figures, and export data points whose
// buckets add up to their count.
func FuzzConsumeTraces(f *testing.F) {
	f.Add(int64(8), 100.0, 9250.0, 250.0, 2000.0, int64(2), 9000.0, false, []byte{1, 0, 0, 0, 0, 0, 0, 100}, 6000.0)
	f.Add(int64(1), -1.0, math.NaN(), math.Inf(1), -3.0, int64(-1), 1e308, true, []byte{}, 0.0)
	f.Add(int64(0), 0.0, 0.0, 0.0, 0.0, int64(0), 0.0, false, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1}, 0.0)
	// A stall count no processor writes, with no event to bound it.
	f.Add(int64(1<<40), 1.0, 1.0, 1.0, 2000.0, int64(1<<40), 1e12, false, []byte{}, 1.0)
	// Forged stall figures on one chunk (no interval figure can exist).
	f.Add(int64(1), 100.0, 50000.0, 0.0, 2000.0, int64(7), 50000.0, false, []byte{}, 50000.0)
	// Consistent figures with stall events: two of 3 s and 6 s.
	f.Add(int64(8), 100.0, 9250.0, 250.0, 2000.0, int64(2), 9000.0, false,
		binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, math.Float64bits(3000)|1), math.Float64bits(6000)|1), 6000.0)
	// A consistent loser, its duration 7,000 ns.
	f.Add(int64(8000), 100.0, 9250.0, 250.0, 2000.0, int64(2), 9000.0, true, []byte{}, 6000.0)

	f.Fuzz(func(t *testing.T, chunkCount int64, ttftMs, generationMs, activeMs, thresholdMs float64, stallCount int64, stallMs float64, loser bool, events []byte, maxStallMs float64) {
		sink := new(consumertest.MetricsSink)
		c, err := newStallMetrics(connectorSettings(), defaultConfig(), sink, clockwork.NewFakeClock())
		if err != nil {
			t.Fatal(err)
		}
		td := ptrace.NewTraces()
		span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		span.SetStartTimestamp(1_000)
		// Any end, before the start included.
		span.SetEndTimestamp(pcommon.Timestamp(uint64(chunkCount)))
		attrs := span.Attributes()
		attrs.PutInt(semconv.AttrChunkCount, chunkCount)
		attrs.PutDouble(semconv.AttrTTFTMs, ttftMs)
		attrs.PutDouble(semconv.AttrGenerationMs, generationMs)
		attrs.PutDouble(semconv.AttrActiveGenerationMs, activeMs)
		attrs.PutDouble(semconv.AttrStallThresholdMs, thresholdMs)
		attrs.PutInt(semconv.AttrStallCount, stallCount)
		attrs.PutDouble(semconv.AttrStallMs, stallMs)
		attrs.PutDouble(semconv.AttrMaxStallMs, maxStallMs)
		attrs.PutInt(semconv.AttrHedgeAttempt, 1)
		attrs.PutBool(semconv.AttrHedgeLoser, loser)
		// Each 8 bytes: one event; the low bit picks a chunk or a stall event.
		for len(events) >= 8 {
			v := binary.BigEndian.Uint64(events)
			events = events[8:]
			ev := span.Events().AppendEmpty()
			if v&1 == 0 {
				ev.SetName(semconv.EventChunk)
				ev.SetTimestamp(pcommon.Timestamp(v))
			} else {
				ev.SetName(semconv.EventStall)
				ev.Attributes().PutDouble(semconv.AttrStallEventDurationMs, math.Float64frombits(v))
			}
		}
		fig := figures.ReadAttributes(attrs)
		fig.ReadStallEvents(span.Events())
		reader := figures.NewChunkReader(figures.DefaultChunkEventsConfig())
		trusted := reader.CheckFigures(&fig) == nil && reader.Read(span, new(figures.Chunks)) == nil
		if err := c.ConsumeTraces(context.Background(), td); err != nil {
			t.Fatal(err)
		}
		if err := c.flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		var calls, attempts, wastedTokens int64
		var wastedDurations uint64
		for _, md := range sink.AllMetrics() {
			forMetric(md, semconv.MetricCalls, func(m pmetric.Metric) {
				calls += m.Sum().DataPoints().At(0).IntValue()
			})
			forMetric(md, semconv.MetricHedgeAttempts, func(m pmetric.Metric) {
				attempts += m.Sum().DataPoints().At(0).IntValue()
			})
			forMetric(md, semconv.MetricHedgeWastedTokens, func(m pmetric.Metric) {
				wastedTokens += m.Sum().DataPoints().At(0).IntValue()
			})
			forMetric(md, semconv.MetricHedgeWastedTime, func(m pmetric.Metric) {
				wastedDurations += m.ExponentialHistogram().DataPoints().At(0).Count()
			})
			for _, rm := range md.ResourceMetrics().All() {
				for _, sm := range rm.ScopeMetrics().All() {
					for _, m := range sm.Metrics().All() {
						if m.Type() != pmetric.MetricTypeExponentialHistogram {
							continue
						}
						if !trusted && m.Name() != semconv.MetricHedgeWastedTime {
							t.Fatalf("%s recorded from untrusted figures", m.Name())
						}
						for _, dp := range m.ExponentialHistogram().DataPoints().All() {
							total := dp.ZeroCount()
							for _, n := range dp.Positive().BucketCounts().AsRaw() {
								total += n
							}
							if total != dp.Count() || dp.Count() == 0 || dp.Min() < 0 || dp.Max() < dp.Min() {
								t.Fatalf("%s: count %d, buckets and zeros %d, min %v, max %v", m.Name(), dp.Count(), total, dp.Min(), dp.Max())
							}
						}
					}
				}
			}
		}
		wantCalls := int64(0)
		if chunkCount >= 1 && !loser && trusted {
			wantCalls = 1
		}
		if calls != wantCalls || attempts != 1 {
			t.Fatalf("calls %d (want %d), attempts %d (want 1)", calls, wantCalls, attempts)
		}
		// No usage on the span: a loser's tokens are its chunk count, when
		// its figures can be trusted.
		wantTokens := int64(0)
		if loser && trusted {
			wantTokens = chunkCount
		}
		wantDurations := uint64(0)
		if end := uint64(chunkCount); loser && end >= 1_000 && end-1_000 <= uint64(time.Hour) {
			wantDurations = 1
		}
		if wastedTokens != wantTokens || wastedDurations != wantDurations {
			t.Fatalf("wasted tokens %d (want %d), wasted durations %d (want %d)", wastedTokens, wantTokens, wastedDurations, wantDurations)
		}
	})
}

package stallmetricsconnector // import "github.com/streamstall/streamstall/connector/stallmetricsconnector"

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/streamstall/streamstall/connector/stallmetricsconnector/internal/aggregate"
	"github.com/streamstall/streamstall/connector/stallmetricsconnector/internal/expohisto"
	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
)

// Shared read-only attribute values, so that recording allocates nothing.
var (
	loserValue      = pcommon.NewValueStr(semconv.HedgeOutcomeLoser)
	stalledValue    = pcommon.NewValueBool(true)
	notStalledValue = pcommon.NewValueBool(false)
)

// recordSpan records one span. Callers hold mu.
//
// A span carrying llm.hedge.attempt is a hedge attempt and counts in
// llm.hedge.attempts, loser or not. A span carrying llm.stream.chunk_count
// (written by the stall processor) is a streaming call: its per-call figures
// come from the processor's attributes; its per-gap and per-stall figures
// from its chunk events through figures.Derive when the events are still on
// the span, else from the processor's llm.stream.stall events (see
// recordGapsAndStalls). Losers stop before the streaming metrics unless losers is
// "separate".
func (c *stallMetrics) recordSpan(res pcommon.Map, span ptrace.Span) {
	attrs := span.Attributes()
	c.readDimensions(res, attrs)
	loser := isLoser(attrs)
	if _, ok := attrs.Get(semconv.AttrHedgeAttempt); ok {
		c.recordAttempt(attrs, loser)
	}

	chunkCount, ok := number(attrs, semconv.AttrChunkCount)
	if !ok || chunkCount < 1 {
		return
	}
	if loser && c.config.Losers == LosersExclude {
		return
	}
	// The outcome slot: absent for winners, "loser" for separated losers.
	c.attrs = append(c.attrs, aggregate.Attribute{Name: semconv.AttrHedgeOutcome, Value: loserValue, Present: loser})
	dims := c.attrs

	if ttft, ok := number(attrs, semconv.AttrTTFTMs); ok {
		c.record(c.metrics.ttft, dims, ttft/1e3, semconv.AttrTTFTMs, span)
	}
	stalled := false
	if chunkCount >= 2 {
		if v, ok := number(attrs, semconv.AttrGenerationMs); ok {
			c.record(c.metrics.generation, dims, v/1e3, semconv.AttrGenerationMs, span)
		}
		if v, ok := number(attrs, semconv.AttrActiveGenerationMs); ok {
			c.record(c.metrics.active, dims, v/1e3, semconv.AttrActiveGenerationMs, span)
		}
		stalled = c.recordGapsAndStalls(span, int(chunkCount), dims) > 0
	}
	if n, ok := number(attrs, semconv.AttrStallCount); ok && n > 0 {
		stalled = true
	}
	stalledAttr := aggregate.Attribute{Name: semconv.AttrStalled, Value: notStalledValue, Present: true}
	if stalled {
		stalledAttr.Value = stalledValue
	}
	c.attrs = append(c.attrs, stalledAttr)
	*c.metrics.calls.Point(c.attrs).Value++
}

// readDimensions sets c.attrs to the dimensions of the span: the defaults,
// with the fallbacks of docs/contract.md section 3, then the configured ones.
func (c *stallMetrics) readDimensions(res, attrs pcommon.Map) {
	c.attrs = append(c.attrs[:0],
		firstOf(semconv.AttrServiceName, res, semconv.AttrServiceName),
		firstOf(semconv.AttrProviderName, attrs, semconv.AttrProviderName, semconv.AttrSystem),
		// The dimension says "request model", so the requested model comes
		// first; the response model stands in only when no request model was
		// recorded (proxies that only see the response).
		firstOf(semconv.AttrRequestModel, attrs, semconv.AttrRequestModel, semconv.AttrResponseModel),
		firstOf(semconv.AttrOperationName, attrs, semconv.AttrOperationName),
	)
	for _, d := range c.extra {
		a := aggregate.Attribute{Name: d.name}
		if v, ok := attrs.Get(d.name); ok {
			a.Value, a.Present = v, true
		} else if v, ok := res.Get(d.name); ok {
			a.Value, a.Present = v, true
		} else if d.hasValue {
			a.Value, a.Present = d.fallback, true
		}
		c.attrs = append(c.attrs, a)
	}
}

// recordAttempt counts a hedge attempt under its trigger (absent on the
// primary) and outcome (loser when flagged, else as written, else absent).
func (c *stallMetrics) recordAttempt(attrs pcommon.Map, loser bool) {
	trigger := aggregate.Attribute{Name: semconv.AttrHedgeTrigger}
	if v, ok := attrs.Get(semconv.AttrHedgeTrigger); ok {
		trigger.Value, trigger.Present = v, true
	}
	outcome := aggregate.Attribute{Name: semconv.AttrHedgeOutcome}
	if loser {
		outcome.Value, outcome.Present = loserValue, true
	} else if v, ok := attrs.Get(semconv.AttrHedgeOutcome); ok {
		outcome.Value, outcome.Present = v, true
	}
	dims := append(c.attrs, trigger, outcome)
	*c.metrics.attempts.Point(dims).Value++
}

// recordGapsAndStalls records the gaps between chunks and the stalls, and
// returns the number of stalls recorded. The chunk events are used only when
// they are all there (as many as llm.stream.chunk_count): a span whose chunk
// events were dropped, or named otherwise than the defaults, gets no gap
// values, and its stalls come from the stall events.
func (c *stallMetrics) recordGapsAndStalls(span ptrace.Span, chunkCount int, dims []aggregate.Attribute) int {
	c.chunkTimes = c.chunkTimes[:0]
	for _, ev := range span.Events().All() {
		// A timestamp past 2262 (above MaxInt64) is not a time: leaving it
		// out makes the count differ, so the events are not used.
		if ts := ev.Timestamp(); c.chunkNames[ev.Name()] && ts <= math.MaxInt64 {
			c.chunkTimes = append(c.chunkTimes, int64(ts))
		}
	}
	times := figures.PrepareChunkTimes(c.chunkTimes)
	if len(times) != chunkCount {
		return c.recordStallEvents(span, chunkCount, dims)
	}
	// Gaps and derived stalls are valid durations by construction (sorted
	// nanoseconds): each metric's point is looked up once per span.
	gaps := c.metrics.perChunk.Point(dims).Value
	for i := 1; i < len(times); i++ {
		_ = gaps.Record(float64(times[i]-times[i-1]) / 1e9)
	}
	thresholdMs, ok := number(span.Attributes(), semconv.AttrStallThresholdMs)
	if !ok || thresholdMs < 0 {
		return c.recordStallEvents(span, chunkCount, dims)
	}
	f := figures.Derive(int64(span.StartTimestamp()), times, int64(math.Round(thresholdMs*1e6)), c.stalls)
	c.stalls = f.Stalls
	if len(f.Stalls) > 0 {
		stalls := c.metrics.stall.Point(dims).Value
		for _, s := range f.Stalls {
			_ = stalls.Record(float64(s.Duration) / 1e9)
		}
	}
	return len(f.Stalls)
}

// recordStallEvents records the stalls from the processor's llm.stream.stall
// events. The processor writes at most max_stall_events of them; the stalls
// beyond (llm.stream.stall_count minus the events) are recorded at their mean
// duration, (llm.stream.stall_ms minus the events' durations) / their number,
// so that the histogram's count and sum stay exact. A stall count above the
// number of gaps (chunk_count - 1) is not a processor's and is not trusted.
func (c *stallMetrics) recordStallEvents(span ptrace.Span, chunkCount int, dims []aggregate.Attribute) int {
	recorded, sumMs := 0, 0.0
	for _, ev := range span.Events().All() {
		if ev.Name() != semconv.EventStall {
			continue
		}
		if ms, ok := number(ev.Attributes(), semconv.AttrStallEventDurationMs); ok && expohisto.Valid(ms/1e3) {
			c.record(c.metrics.stall, dims, ms/1e3, semconv.AttrStallEventDurationMs, span)
			recorded++
			sumMs += ms
		}
	}
	attrs := span.Attributes()
	count, okCount := number(attrs, semconv.AttrStallCount)
	totalMs, okTotal := number(attrs, semconv.AttrStallMs)
	if !okCount || !okTotal || count > float64(chunkCount-1) || count <= float64(recorded) || totalMs <= sumMs {
		return recorded
	}
	missing := int(count) - recorded
	mean := (totalMs - sumMs) / float64(missing) / 1e3
	if !expohisto.Valid(mean) {
		return recorded
	}
	_ = c.metrics.stall.Point(dims).Value.RecordN(mean, uint64(missing))
	return recorded + missing
}

// record adds one value in seconds; a value no duration can have (negative,
// NaN, huge) is skipped, before it can open a data point, with a debug log
// naming its source.
func (c *stallMetrics) record(series *aggregate.Series[*expohisto.Histogram], dims []aggregate.Attribute, seconds float64, source string, span ptrace.Span) {
	if !expohisto.Valid(seconds) {
		c.logger.Debug("Skipping a figure no duration can have",
			zap.String("source", source), zap.Float64("seconds", seconds), zap.String("span", span.Name()), zap.Stringer("trace_id", span.TraceID()))
		return
	}
	// Cannot fail: the value is valid.
	_ = series.Point(dims).Value.Record(seconds)
}

// firstOf returns the first of the names that m holds, not as an empty
// string, under the dimension name.
func firstOf(dimension string, m pcommon.Map, names ...string) aggregate.Attribute {
	for _, name := range names {
		if v, ok := m.Get(name); ok && (v.Type() != pcommon.ValueTypeStr || v.Str() != "") {
			return aggregate.Attribute{Name: dimension, Value: v, Present: true}
		}
	}
	return aggregate.Attribute{Name: dimension}
}

// isLoser is the processor's flag, or the hedging client's own outcome.
func isLoser(attrs pcommon.Map) bool {
	if v, ok := attrs.Get(semconv.AttrHedgeLoser); ok && v.Type() == pcommon.ValueTypeBool && v.Bool() {
		return true
	}
	v, ok := attrs.Get(semconv.AttrHedgeOutcome)
	return ok && v.Type() == pcommon.ValueTypeStr && v.Str() == semconv.HedgeOutcomeLoser
}

// number reads an int or double attribute as a finite float64.
func number(m pcommon.Map, name string) (float64, bool) {
	v, ok := m.Get(name)
	if !ok {
		return 0, false
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return float64(v.Int()), true
	case pcommon.ValueTypeDouble:
		f := v.Double()
		return f, !math.IsNaN(f) && !math.IsInf(f, 0)
	default:
		return 0, false
	}
}

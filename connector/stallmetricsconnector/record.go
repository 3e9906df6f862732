// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallmetricsconnector // import "github.com/streamstall/streamstall/connector/stallmetricsconnector"

import (
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/streamstall/streamstall/connector/stallmetricsconnector/internal/aggregate"
	"github.com/streamstall/streamstall/internal/exphist"
	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/truncate"
)

// Shared read-only attribute values, so that recording allocates nothing.
var (
	loserValue        = pcommon.NewValueStr(semconv.HedgeOutcomeLoser)
	stalledValue      = pcommon.NewValueBool(true)
	notStalledValue   = pcommon.NewValueBool(false)
	wastedUsageValue  = pcommon.NewValueStr(semconv.HedgeWastedSourceUsage)
	wastedChunksValue = pcommon.NewValueStr(semconv.HedgeWastedSourceChunks)
)

// recordSpan records one span. Callers hold mu.
//
// A span carrying llm.hedge.attempt is a hedge attempt and counts in
// llm.hedge.attempts, loser or not. A span carrying figure attributes
// (written by the stall processor) is a streaming call when they are
// consistent (figures.Check), their stream is not longer than
// chunk_events::max_duration, and its chunk events, if it still has any,
// are plausible (figures.ChunkReader); any other span with figures records
// no streaming metric, not even llm.stream.calls, and is counted. A
// streaming call's per-call figures come from the processor's attributes;
// its per-gap and per-stall figures from its chunk events when they are
// still on the span, else from the processor's llm.stream.stall events (see
// recordGapsAndStalls). A loser's waste (its output tokens and span
// duration) is recorded in both losers modes; losers stop before the
// streaming metrics unless losers is "separate".
func (c *stallMetrics) recordSpan(res pcommon.Map, span ptrace.Span) {
	attrs := span.Attributes()
	c.readDimensions(res, attrs)
	loser := figures.IsHedgeLoser(attrs)
	if _, ok := attrs.Get(semconv.AttrHedgeAttempt); ok {
		c.recordAttempt(attrs, loser)
	}

	fig := figures.ReadAttributes(attrs)
	trusted := fig.Any() && c.judge(span, &fig)
	if loser {
		c.recordWaste(span, &fig, trusted)
	}
	if !trusted || loser && c.config.Losers == LosersExclude {
		return
	}
	// The outcome slot: absent for winners, "loser" for separated losers.
	c.attrs = append(c.attrs, aggregate.Attribute{Name: semconv.AttrHedgeOutcome, Value: loserValue, Present: loser})
	dims := c.attrs
	// Every histogram of the call has these dimensions: encoded once.
	c.dimsKey = aggregate.AppendKey(c.dimsKey[:0], dims)
	key := c.dimsKey

	if fig.Has(figures.IdxTTFTMs) {
		c.record(c.metrics.ttft, dims, key, fig.Float(figures.IdxTTFTMs)/1e3, semconv.AttrTTFTMs, span)
	}
	if fig.Has(figures.IdxTimeToFirstAnswerMs) {
		c.record(c.metrics.ttfa, dims, key, fig.Float(figures.IdxTimeToFirstAnswerMs)/1e3, semconv.AttrTimeToFirstAnswerMs, span)
	}
	if e := fig.Evidence(); e == semconv.EvidenceMarkers || e == semconv.EvidenceFrameMarkers {
		// A marker set (docs/contract.md section 4) measured no gap and no
		// stall: its TTFT, when known, is all it gives. It is no
		// llm.stream.calls call, whose stalled dimension it cannot fill
		// without a guess.
		return
	}
	stalled := false
	// A consistent set has the interval figures exactly when chunk_count >= 2
	// or a stall cut ended the stream.
	if fig.Has(figures.IdxGenerationMs) {
		c.record(c.metrics.generation, dims, key, fig.Float(figures.IdxGenerationMs)/1e3, semconv.AttrGenerationMs, span)
		c.record(c.metrics.active, dims, key, fig.Float(figures.IdxActiveGenerationMs)/1e3, semconv.AttrActiveGenerationMs, span)
		stalled = c.recordGapsAndStalls(span, &fig, dims, key) > 0 || fig.Int(figures.IdxStallCount) > 0
	}
	stalledAttr := aggregate.Attribute{Name: semconv.AttrStalled, Value: notStalledValue, Present: true}
	if stalled {
		stalledAttr.Value = stalledValue
	}
	c.attrs = append(c.attrs, stalledAttr)
	*c.metrics.calls.Point(c.attrs).Value++
}

// judge reports whether the figures of a span can be recorded, reading its
// chunk evidence into c.evidence on the way; a refused span is counted and
// logged at debug level.
//
// A span that the stall processor of this collector sealed (figures.Sealer)
// is not read again: its evidence, as the processor judged it, is taken
// from the hand-off (figures.Handoff), or, when the hand-off has none that
// matches the span, read the cheap way: the times of its chunk events
// alone, which the seal then verifies. Check runs on the figures as on any
// span. A span without a seal that verifies (from elsewhere, or changed
// since) has its stall events and chunk events read and judged in full.
func (c *stallMetrics) judge(span ptrace.Span, fig *figures.Reported) bool {
	if fig.Sealed() && (c.handoff.Take(span, fig, c.chunks, &c.evidence) || c.chunks.ReadSealed(span, &c.evidence, fig, c.sealer)) {
		if err := c.chunks.CheckFigures(fig); err == nil {
			return true
		}
	}
	fig.ReadStallEvents(span.Events())
	err := c.chunks.CheckFigures(fig)
	if err == nil {
		err = c.chunks.Read(span, &c.evidence)
	}
	if err == nil {
		return true
	}
	reason := c.refused.Count(err)
	if c.logger.Core().Enabled(zap.DebugLevel) {
		c.logger.Debug("Skipping a span with "+reason, zap.Error(err), zap.String("span", span.Name()), zap.Stringer("trace_id", span.TraceID()))
	}
	return false
}

// readDimensions sets c.attrs to the dimensions of the span: the defaults,
// with the fallbacks of docs/contract.md section 3, then the configured ones.
func (c *stallMetrics) readDimensions(res, attrs pcommon.Map) {
	c.attrs = append(c.attrs[:0],
		c.capped(firstOf(semconv.AttrServiceName, res, semconv.AttrServiceName)),
		c.capped(firstOf(semconv.AttrProviderName, attrs, semconv.AttrProviderName, semconv.AttrSystem)),
		// The dimension says "request model", so the requested model comes
		// first; the response model stands in only when no request model was
		// recorded (proxies that only see the response).
		c.capped(firstOf(semconv.AttrRequestModel, attrs, semconv.AttrRequestModel, semconv.AttrResponseModel)),
		c.capped(firstOf(semconv.AttrOperationName, attrs, semconv.AttrOperationName)),
	)
	for _, d := range c.extra {
		a := aggregate.Attribute{Name: d.name}
		if v, ok := attrs.Get(d.name); ok {
			a = c.capped(aggregate.Attribute{Name: d.name, Value: v, Present: true})
		} else if v, ok := res.Get(d.name); ok {
			a = c.capped(aggregate.Attribute{Name: d.name, Value: v, Present: true})
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
		trigger = c.capped(aggregate.Attribute{Name: semconv.AttrHedgeTrigger, Value: v, Present: true})
	}
	outcome := aggregate.Attribute{Name: semconv.AttrHedgeOutcome}
	if loser {
		outcome.Value, outcome.Present = loserValue, true
	} else if v, ok := attrs.Get(semconv.AttrHedgeOutcome); ok {
		outcome = c.capped(aggregate.Attribute{Name: semconv.AttrHedgeOutcome, Value: v, Present: true})
	}
	dims := append(c.attrs, trigger, outcome) //nolint:gocritic // c.attrs is the span's scratch: appending to its spare capacity allocates nothing
	*c.metrics.attempts.Point(dims).Value++
}

// recordWaste records what a hedge loser consumed, under the span's
// dimensions: its span duration, and its output tokens from
// gen_ai.usage.output_tokens when the span has a usable one, else its
// content chunk count (only from a trusted figure set), each marked with its
// llm.hedge.wasted.source. A loser without either records no tokens; a span
// without a usable duration (unset or reversed times) records no duration,
// nor does one longer than chunk_events::max_duration, which is counted as
// implausible unless its figures already were.
func (c *stallMetrics) recordWaste(span ptrace.Span, fig *figures.Reported, trusted bool) {
	if start, end := span.StartTimestamp(), span.EndTimestamp(); start != 0 && end >= start {
		if d := time.Duration(end - start); d <= c.chunks.MaxDuration() {
			c.record(c.metrics.wastedTime, c.attrs, nil, d.Seconds(), "span duration", span)
		} else if trusted || !fig.Any() {
			c.refused.Implausible++
		}
	}
	source := aggregate.Attribute{Name: semconv.AttrHedgeWastedSource, Present: true}
	tokens, ok := figures.OutputTokens(span.Attributes())
	switch {
	case ok:
		source.Value = wastedUsageValue
	case trusted && fig.Has(figures.IdxChunkCount):
		tokens, source.Value = fig.Int(figures.IdxChunkCount), wastedChunksValue
	default:
		return
	}
	if tokens == 0 {
		return
	}
	v := c.metrics.wastedTokens.Point(append(c.attrs, source)).Value
	// A monotonic counter never wraps: hostile usage saturates it.
	*v = addSaturating(*v, tokens)
}

// addSaturating adds two non-negative counts, stopping at MaxInt64.
func addSaturating(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// recordGapsAndStalls records the gaps between chunks and the stalls, and
// returns the number of stalls recorded. The chunk events judge read into
// c.evidence are used only when they are all there (as many as
// llm.stream.chunk_count): a span whose chunk events were dropped, or
// selected otherwise than by this connector's chunk_events (the processor's
// conditions), gets no gap values, and its stalls come from the stall
// events.
func (c *stallMetrics) recordGapsAndStalls(span ptrace.Span, fig *figures.Reported, dims []aggregate.Attribute, key []byte) int {
	ev := &c.evidence
	if ev.Count() != fig.Int(figures.IdxChunkCount) {
		return c.recordStallEvents(span, fig, dims, key)
	}
	// Judged chunk times are sorted and within max_duration of each other:
	// every gap and stall is a valid duration, and each metric's point is
	// looked up once per span. The gaps across elided chunks are recorded
	// at their mean: their count and sum stay exact, and each was at most
	// the span's keep_gaps_above_ms.
	gaps := c.metrics.perChunk.PointOfKey(key, dims).Value
	if ev.Elided == 0 {
		// Each gap one value: recorded in bulk.
		c.gapSeconds = c.gapSeconds[:0]
		c.gapNanos = ev.Gaps(c.gapNanos)
		for _, g := range c.gapNanos {
			c.gapSeconds = append(c.gapSeconds, float64(g)/1e9)
		}
		_ = gaps.RecordAll(c.gapSeconds)
	} else {
		c.gapRuns = ev.GapRuns(c.gapRuns)
		for _, g := range c.gapRuns {
			_ = gaps.RecordN(float64(g.Gap)/1e9, uint64(g.Count))
		}
	}
	// The stalls under the threshold the processor wrote (Check made it
	// positive and finite).
	f, _ := ev.Derive(figures.Nanos(fig.Float(figures.IdxStallThresholdMs)), c.stalls)
	c.stalls = f.Stalls
	if len(f.Stalls) > 0 {
		stalls := c.metrics.stall.PointOfKey(key, dims).Value
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
// so that the histogram's count and sum stay exact. figures.Check has bounded
// the events by the stall count, stall time and longest stall.
func (c *stallMetrics) recordStallEvents(span ptrace.Span, fig *figures.Reported, dims []aggregate.Attribute, key []byte) int {
	recorded, sumMs := 0, 0.0
	for _, ev := range span.Events().All() {
		if ev.Name() != semconv.EventStall {
			continue
		}
		// Check made every duration a positive, finite double.
		v, _ := ev.Attributes().Get(semconv.AttrStallEventDurationMs)
		if ms := v.Double(); exphist.Valid(ms / 1e3) {
			c.record(c.metrics.stall, dims, key, ms/1e3, semconv.AttrStallEventDurationMs, span)
			recorded++
			sumMs += ms
		}
	}
	count, totalMs := fig.Int(figures.IdxStallCount), fig.Float(figures.IdxStallMs)
	if count <= int64(recorded) || totalMs <= sumMs {
		return recorded
	}
	missing := int(count) - recorded
	mean := (totalMs - sumMs) / float64(missing) / 1e3
	if !exphist.Valid(mean) {
		return recorded
	}
	_ = c.metrics.stall.PointOfKey(key, dims).Value.RecordN(mean, uint64(missing))
	return recorded + missing
}

// record adds one value in seconds under dims, whose encoding is key (nil:
// not encoded yet); a value no duration can have (negative, NaN, huge) is
// skipped, before it can open a data point, with a debug log naming its
// source.
func (c *stallMetrics) record(series *aggregate.Series[*exphist.Histogram], dims []aggregate.Attribute, key []byte, seconds float64, source string, span ptrace.Span) {
	if !exphist.Valid(seconds) {
		c.logger.Debug("Skipping a figure no duration can have",
			zap.String("source", source), zap.Float64("seconds", seconds), zap.String("span", span.Name()), zap.Stringer("trace_id", span.TraceID()))
		return
	}
	var p *aggregate.Point[*exphist.Histogram]
	if key == nil {
		p = series.Point(dims)
	} else {
		p = series.PointOfKey(key, dims)
	}
	// Cannot fail: the value is valid.
	_ = p.Value.Record(seconds)
}

// capped bounds a dimension value at max_dimension_value_length bytes, cut
// on a UTF-8 character boundary. A value that is not a string is measured
// in its string form (bytes in base64, slices and maps in JSON), and when
// too long it is replaced by that form, cut. The cut string is copied, so
// that a data point never keeps a huge attribute value alive.
func (c *stallMetrics) capped(a aggregate.Attribute) aggregate.Attribute {
	if !a.Present {
		return a
	}
	limit := c.config.MaxDimensionValueLength
	switch a.Value.Type() {
	case pcommon.ValueTypeStr:
		if s := a.Value.Str(); len(s) > limit {
			a.Value = pcommon.NewValueStr(truncate.UTF8(s, limit))
		}
	case pcommon.ValueTypeBytes, pcommon.ValueTypeSlice, pcommon.ValueTypeMap:
		if s := a.Value.AsString(); len(s) > limit {
			a.Value = pcommon.NewValueStr(truncate.UTF8(s, limit))
		}
	default: // ints, doubles, bools and empty values are short
	}
	return a
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

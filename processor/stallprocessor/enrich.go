package stallprocessor // import "github.com/streamstall/streamstall/processor/stallprocessor"

import (
	"context"
	"math"
	"strconv"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspanevent"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
)

// enrich derives the stream figures of one span and writes them. It returns
// the first chunk time for hedge-outcome inference. A span without a usable
// chunk event gets no figure; the figures it carries (a first tier dropped
// its chunk events) are kept only when they are consistent.
func (p *stallProcessor) enrich(ctx context.Context, s *scratch, rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span, tally *batchTally) (first int64, hasChunk bool, err error) {
	hasStallEvents, kinds, err := p.collectChunkTimes(ctx, s, rs, ss, span)
	if err != nil {
		return 0, false, err
	}
	if len(s.chunkTimes) == 0 {
		p.checkCarried(span, hasStallEvents, tally)
		return 0, false, nil
	}
	times, events := s.chunkTimes, span.Events()

	start := span.StartTimestamp()
	f := figures.Derive(int64(min(start, math.MaxInt64)), times, p.threshold, s.stalls)
	s.stalls = f.Stalls
	r := figures.DeriveReasoning(int64(min(start, math.MaxInt64)), kinds)
	if start == 0 || start > math.MaxInt64 {
		// An unset (or unrepresentable) span start makes TTFT and TTFA
		// unknown, not the age of the epoch.
		f.HasTTFT, f.TTFT = false, 0
		r.HasTTFA, r.TTFA = false, 0
	}

	// The chunk events are the evidence: the span gets the whole figure set
	// derived from them, and every figure attribute it carried that this
	// derivation does not produce is removed (a first tier's figures under
	// another config, or figures set by a client). Values are overwritten in
	// place, so that processing twice gives the identical span.
	attrs := span.Attributes()
	writeFigures(attrs, &f, &r, p.maxStallEvents)
	if hasStallEvents || p.dropChunks {
		idx := 0
		events.RemoveIf(func(ev ptrace.SpanEvent) bool {
			drop := ev.Name() == semconv.EventStall || (p.dropChunks && s.chunkMask[idx])
			idx++
			return drop
		})
	}
	p.writeStallEvents(events, f.Stalls)

	tally.enriched++
	tally.stalls += int64(f.StallCount)
	return times[0], true, nil
}

// checkCarried judges the figures of a span without chunk evidence: a
// consistent set (what a first tier with drop_chunk_events wrote) stays as
// it is; an inconsistent one loses every figure attribute and every
// llm.stream.stall event, and is counted.
func (p *stallProcessor) checkCarried(span ptrace.Span, hasStallEvents bool, tally *batchTally) {
	attrs := span.Attributes()
	r := figures.ReadAttributes(attrs)
	if !r.Any() && !hasStallEvents {
		return
	}
	if hasStallEvents {
		r.ReadStallEvents(span.Events())
	}
	err := r.Check()
	if err == nil {
		return
	}
	attrs.RemoveIf(func(k string, _ pcommon.Value) bool { return figures.IsAttribute(k) })
	if hasStallEvents {
		span.Events().RemoveIf(func(ev ptrace.SpanEvent) bool { return ev.Name() == semconv.EventStall })
	}
	tally.inconsistent++
	if p.logger.Core().Enabled(zap.DebugLevel) {
		p.logger.Debug("Removed inconsistent stream figures from a span without chunk events",
			zap.Error(err), zap.String("span", span.Name()), zap.Stringer("trace_id", span.TraceID()))
	}
}

// collectChunkTimes gathers the measurable chunk times of span, sorted, into
// s.chunkTimes, summarizes their kinds, and with drop_chunk_events marks the
// chunk events in s.chunkMask. It is the per-event hot path: the default
// config takes collectByName, a name lookup and a kind lookup per event and
// nothing else; OTTL runs only when chunk_events::conditions are configured.
func (p *stallProcessor) collectChunkTimes(ctx context.Context, s *scratch, rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span) (hasStallEvents bool, kinds figures.Kinds, err error) {
	c := timeCollector{times: s.chunkTimes[:0]}
	if p.conditions.chunkEvent == nil && !p.dropChunks {
		hasStallEvents = p.collectByName(&c, span.Events())
	} else {
		hasStallEvents, err = p.collectSelected(ctx, &c, s, rs, ss, span)
	}
	s.chunkTimes = c.sorted()
	return hasStallEvents, c.kinds, err
}

func (p *stallProcessor) collectByName(c *timeCollector, events ptrace.SpanEventSlice) (hasStallEvents bool) {
	names := p.chunkNames
	for i := 0; i < events.Len(); i++ {
		ev := events.At(i)
		if name := ev.Name(); !names.contains(name) {
			hasStallEvents = hasStallEvents || name == semconv.EventStall
			continue
		}
		c.add(ev.Timestamp(), isReasoning(ev))
	}
	return hasStallEvents
}

func (p *stallProcessor) collectSelected(ctx context.Context, c *timeCollector, s *scratch, rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span) (hasStallEvents bool, err error) {
	mask := s.chunkMask[:0]
	events := span.Events()
	for i := 0; i < events.Len(); i++ {
		ev := events.At(i)
		name := ev.Name()
		isChunk := p.chunkNames.contains(name)
		if isChunk && p.conditions.chunkEvent != nil {
			tCtx := ottlspanevent.NewTransformContext(rs, ss, span, ev, ottlspanevent.WithEventIndex(int64(i)))
			isChunk, err = p.conditions.chunkEvent.Eval(ctx, tCtx)
			tCtx.Close()
			if err != nil {
				return false, err
			}
		}
		if p.dropChunks {
			mask = append(mask, isChunk)
		}
		if !isChunk {
			hasStallEvents = hasStallEvents || name == semconv.EventStall
			continue
		}
		c.add(ev.Timestamp(), isReasoning(ev))
	}
	s.chunkMask = mask
	return hasStallEvents, nil
}

// isReasoning reports whether a chunk event carries a reasoning delta. A
// chunk without llm.stream.chunk.kind, or with any other value, is an answer
// chunk (docs/contract.md section 3). Map.Get scans the event's few
// attributes in place: no allocation.
func isReasoning(ev ptrace.SpanEvent) bool {
	v, ok := ev.Attributes().Get(semconv.AttrChunkKind)
	return ok && v.Type() == pcommon.ValueTypeStr && v.Str() == semconv.ChunkKindReasoning
}

// timeCollector accumulates chunk times and their kinds, and notes whether
// the times arrived in order, so that the common, sorted case is never
// sorted again.
type timeCollector struct {
	times    []int64
	kinds    figures.Kinds
	last     int64
	unsorted bool
}

func (c *timeCollector) add(ts pcommon.Timestamp, reasoning bool) {
	// Unset (zero) times and times past 2262, which do not fit the signed
	// arithmetic of the figures, are not measurable.
	if ts-1 >= math.MaxInt64 {
		return
	}
	t := int64(ts)
	c.unsorted = c.unsorted || t < c.last
	c.last = t
	c.times = append(c.times, t)
	c.kinds.Add(t, reasoning)
}

func (c *timeCollector) sorted() []int64 {
	if c.unsorted {
		return figures.PrepareChunkTimes(c.times)
	}
	return c.times
}

// writeFigures writes the attributes of docs/contract.md section 4 with their presence
// rules, then removes every other figure attribute, and any second copy of
// one (OTLP can carry a key twice; Put rewrites the first).
func writeFigures(attrs pcommon.Map, f *figures.Figures, r *figures.Reasoning, maxStallEvents int) {
	var produced figures.Set
	attrs.EnsureCapacity(attrs.Len() + 15)
	attrs.PutInt(semconv.AttrChunkCount, int64(f.ChunkCount))
	produced.Add(figures.IdxChunkCount)
	if f.HasTTFT {
		attrs.PutDouble(semconv.AttrTTFTMs, figures.Millis(f.TTFT))
		produced.Add(figures.IdxTTFTMs)
		if _, ok := attrs.Get(semconv.AttrTimeToFirstChunk); !ok {
			attrs.PutDouble(semconv.AttrTimeToFirstChunk, float64(f.TTFT)/1e9)
		}
	}
	if f.HasGeneration() {
		attrs.PutDouble(semconv.AttrGenerationMs, figures.Millis(f.Generation))
		attrs.PutDouble(semconv.AttrStallThresholdMs, figures.Millis(f.Threshold))
		attrs.PutDouble(semconv.AttrStallMs, figures.Millis(f.StallTotal))
		attrs.PutInt(semconv.AttrStallCount, int64(f.StallCount))
		attrs.PutDouble(semconv.AttrMaxStallMs, figures.Millis(f.MaxStall))
		attrs.PutDouble(semconv.AttrActiveGenerationMs, figures.Millis(f.Active()))
		for _, i := range intervalFigures {
			produced.Add(i)
		}
		if f.Burst {
			attrs.PutBool(semconv.AttrBurst, true)
			produced.Add(figures.IdxBurst)
		}
		if tps, ok := f.ActiveTPS(outputTokens(attrs)); ok {
			attrs.PutDouble(semconv.AttrActiveTPS, tps)
			produced.Add(figures.IdxActiveTPS)
		}
	}
	if dropped := len(f.Stalls) - min(len(f.Stalls), maxStallEvents); dropped > 0 {
		attrs.PutInt(semconv.AttrStallEventsDropped, int64(dropped))
		produced.Add(figures.IdxStallEventsDropped)
	}
	if r.HasTTFA {
		attrs.PutDouble(semconv.AttrTimeToFirstAnswerMs, figures.Millis(r.TTFA))
		produced.Add(figures.IdxTimeToFirstAnswerMs)
	}
	if r.HasReasoningTime {
		attrs.PutDouble(semconv.AttrReasoningMs, figures.Millis(r.ReasoningTime))
		produced.Add(figures.IdxReasoningMs)
	}
	if r.ReasoningChunks > 0 {
		attrs.PutInt(semconv.AttrReasoningChunkCount, int64(r.ReasoningChunks))
		produced.Add(figures.IdxReasoningChunkCount)
	}
	var seen figures.Set
	attrs.RemoveIf(func(k string, _ pcommon.Value) bool {
		i, ok := figures.AttributeIndex(k)
		if !ok {
			return false
		}
		if !produced.Has(i) || seen.Has(i) {
			return true
		}
		seen.Add(i)
		return false
	})
}

// intervalFigures are present exactly when the span has two chunks or more.
var intervalFigures = []int{
	figures.IdxGenerationMs,
	figures.IdxStallThresholdMs,
	figures.IdxStallMs,
	figures.IdxStallCount,
	figures.IdxMaxStallMs,
	figures.IdxActiveGenerationMs,
}

// writeStallEvents appends one llm.stream.stall event per stall, at most
// max_stall_events; writeFigures counts the rest.
func (p *stallProcessor) writeStallEvents(events ptrace.SpanEventSlice, stalls []figures.Stall) {
	written := min(len(stalls), p.maxStallEvents)
	events.EnsureCapacity(events.Len() + written)
	for _, st := range stalls[:written] {
		ev := events.AppendEmpty()
		ev.SetName(semconv.EventStall)
		ev.SetTimestamp(pcommon.Timestamp(st.At))
		evAttrs := ev.Attributes()
		evAttrs.EnsureCapacity(3)
		evAttrs.PutDouble(semconv.AttrStallEventDurationMs, figures.Millis(st.Duration))
		evAttrs.PutInt(semconv.AttrStallEventAfterChunk, int64(st.AfterChunk))
		evAttrs.PutInt(semconv.AttrStallEventGaps, int64(st.Gaps))
	}
}

// outputTokens reads gen_ai.usage.output_tokens, which instrumentations
// write as an int, a double or a string; 0 when absent or unreadable.
func outputTokens(attrs pcommon.Map) int64 {
	v, ok := attrs.Get(semconv.AttrUsageOutputTokens)
	if !ok {
		return 0
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int()
	case pcommon.ValueTypeDouble:
		return int64(v.Double())
	case pcommon.ValueTypeStr:
		n, err := strconv.ParseInt(v.Str(), 10, 64)
		if err != nil {
			return 0
		}
		return n
	default:
		return 0
	}
}

// nameSet is the set of chunk event names. The usual configuration has two
// names, where comparing strings beats hashing them; a map takes over for
// long lists.
type nameSet struct {
	few  []string
	many map[string]struct{}
}

const nameSetLinearMax = 8

func newNameSet(names []string) nameSet {
	if len(names) <= nameSetLinearMax {
		return nameSet{few: names}
	}
	many := make(map[string]struct{}, len(names))
	for _, n := range names {
		many[n] = struct{}{}
	}
	return nameSet{many: many}
}

func (s nameSet) contains(name string) bool {
	if s.many != nil {
		_, ok := s.many[name]
		return ok
	}
	for _, n := range s.few {
		if n == name {
			return true
		}
	}
	return false
}

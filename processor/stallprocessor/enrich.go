// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallprocessor // import "github.com/streamstall/streamstall/processor/stallprocessor"

import (
	"context"
	"strings"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspanevent"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
)

// enrich derives the stream figures of one span and writes them. It returns
// the first chunk time for hedge-outcome inference. A span without a usable
// chunk event gets the figures of its marker events, if it has any
// (enrichFromMarkers), else no figure; the figures it carries (a first tier
// dropped its chunk events) are kept only when they are consistent and
// plausible. A span whose chunk times are implausible gets no figure either,
// and loses those it carried: figures come only from chunk evidence. A span
// that gets figures also gets the gen_ai.* attributes it lacks from other
// instrumentations' names (figures.FillGenAI).
func (p *stallProcessor) enrich(ctx context.Context, s *scratch, rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span, tally *batchTally) (first int64, hasChunk bool, err error) {
	c := &s.chunks
	implausible, err := p.collectChunks(ctx, s, rs, ss, span)
	if err != nil {
		return 0, false, err
	}
	if implausible != nil {
		p.removeFigures(span, c.StallEvents, implausible, tally)
		return 0, false, nil
	}
	if len(c.Times) == 0 {
		return p.enrichFromMarkers(s, span, tally)
	}
	figures.FillGenAI(span.Attributes())
	f, r := c.Derive(p.threshold, s.stalls)
	s.stalls = f.Stalls

	// The chunk events are the evidence: the span gets the whole figure set
	// derived from them, and every figure attribute it carried that this
	// derivation does not produce is removed (a first tier's figures under
	// another config, or figures set by a client). Values are overwritten in
	// place, so that processing twice gives the identical span.
	attrs := span.Attributes()
	events := span.Events()
	writeFigures(attrs, &f, &r, c.Frames(), p.maxStallEvents)
	if c.StallEvents || p.dropChunks {
		idx := 0
		events.RemoveIf(func(ev ptrace.SpanEvent) bool {
			drop := ev.Name() == semconv.EventStall || (p.dropChunks && s.chunkMask[idx])
			idx++
			return drop
		})
	}
	p.writeStallEvents(events, f.Stalls, f.Cut > 0)
	tally.enriched++
	tally.stalls += int64(f.StallCount)
	first = c.First()
	if p.conditions.chunkEvent == nil && !p.dropChunks && c.Elided == 0 {
		// The chunk events stay, selected by name alone: a connector of
		// this collector may take what was judged from the hand-off, or
		// read their times without judging them again.
		p.handoff.Put(span, p.seal(s, span), p.chunks, c)
	} else {
		attrs.Remove(semconv.AttrFiguresSeal)
	}
	return first, true, nil
}

// checkCarried judges the figures of a span without chunk evidence: a
// consistent, plausible set (what a first tier with drop_chunk_events wrote)
// stays as it is; any other loses every figure attribute and every
// llm.stream.stall event, and is counted.
func (p *stallProcessor) checkCarried(span ptrace.Span, hasStallEvents bool, tally *batchTally) {
	r := figures.ReadAttributes(span.Attributes())
	if !r.Any() && !hasStallEvents {
		return
	}
	if hasStallEvents {
		r.ReadStallEvents(span.Events())
	}
	if err := p.chunks.CheckFigures(&r); err != nil {
		p.removeFigures(span, hasStallEvents, err, tally)
	}
}

// removeFigures removes every figure attribute and llm.stream.stall event of
// a span whose figures were refused, and counts it: as implausible when err
// wraps figures.ErrImplausible, else as inconsistent. Nothing else of the
// span changes, its chunk events included.
func (p *stallProcessor) removeFigures(span ptrace.Span, hasStallEvents bool, err error, tally *batchTally) {
	span.Attributes().RemoveIf(func(k string, _ pcommon.Value) bool { return figures.IsAttribute(k) })
	if hasStallEvents {
		span.Events().RemoveIf(func(ev ptrace.SpanEvent) bool { return ev.Name() == semconv.EventStall })
	}
	reason := tally.refused.Count(err)
	if p.logger.Core().Enabled(zap.DebugLevel) {
		p.logger.Debug("Removed the stream figures of a span with "+reason, zap.Error(err), zap.String("span", span.Name()), zap.Stringer("trace_id", span.TraceID()))
	}
}

// collectChunks reads the chunk evidence of span into s.chunks, and with
// drop_chunk_events marks the chunk events in s.chunkMask. It is the
// per-event hot path: the default config takes ChunkReader.Read, a name
// lookup and a kind lookup per event and nothing else; OTTL runs only when
// chunk_events::conditions are configured. implausible is the reader's
// verdict on the chunk times; err an OTTL error to return.
func (p *stallProcessor) collectChunks(ctx context.Context, s *scratch, rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span) (implausible, err error) {
	if p.conditions.chunkEvent == nil && !p.dropChunks {
		return p.chunks.Read(span, &s.chunks), nil
	}
	c := &s.chunks
	c.Reset()
	mask := s.chunkMask[:0]
	events := span.Events()
	for i := 0; i < events.Len(); i++ {
		ev := events.At(i)
		name := ev.Name()
		isChunk := p.chunks.IsChunk(name)
		if isChunk && p.conditions.chunkEvent != nil {
			tCtx := ottlspanevent.NewTransformContext(rs, ss, span, ev, ottlspanevent.WithEventIndex(int64(i)))
			isChunk, err = p.conditions.chunkEvent.Eval(ctx, tCtx)
			tCtx.Close()
			if err != nil {
				return nil, err
			}
		}
		if p.dropChunks {
			mask = append(mask, isChunk)
		}
		if isChunk {
			c.Add(ev)
		} else if name == semconv.EventStall {
			c.StallEvents = true
		}
	}
	s.chunkMask = mask
	return p.chunks.Judge(span, c), nil
}

// writeFigures writes the attributes of docs/contract.md section 4 with their presence
// rules, then removes every other figure attribute, and any second copy of
// one (OTLP can carry a key twice; Put rewrites the first).
func writeFigures(attrs pcommon.Map, f *figures.Figures, r *figures.Reasoning, frames bool, maxStallEvents int) {
	var produced figures.Set
	// A span that carries no figure yet (no llm.stream.* attribute: the
	// usual one) has nothing to remove once they are written.
	carried := false
	for k := range attrs.All() {
		if strings.HasPrefix(k, semconv.StreamNamespace) {
			carried = true
			break
		}
	}
	attrs.EnsureCapacity(attrs.Len() + 16)
	attrs.PutInt(semconv.AttrChunkCount, int64(f.ChunkCount))
	produced.Add(figures.IdxChunkCount)
	if frames {
		attrs.PutStr(semconv.AttrEvidence, semconv.EvidenceFrames)
		produced.Add(figures.IdxEvidence)
	}
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
		produced |= figures.IntervalFigures
		if f.Cut > 0 {
			attrs.PutDouble(semconv.AttrStallCutMs, figures.Millis(f.Cut))
			produced.Add(figures.IdxStallCutMs)
		}
		if f.Burst {
			attrs.PutBool(semconv.AttrBurst, true)
			produced.Add(figures.IdxBurst)
		}
		// Unusable output tokens are 0: no rate.
		tokens, _ := figures.OutputTokens(attrs)
		if tps, ok := f.ActiveTPS(tokens); ok {
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
	// The caller rewrites or removes the seal, in its place: a second pass
	// gives the identical span.
	produced.Add(figures.IdxSeal)
	if carried {
		removeOtherFigures(attrs, produced)
	}
}

// removeOtherFigures removes every figure attribute not in produced, and
// any second copy of one.
func removeOtherFigures(attrs pcommon.Map, produced figures.Set) {
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

// writeStallEvents appends one llm.stream.stall event per stall, at most
// max_stall_events; writeFigures counts the rest. When a stall cut ended the
// stream (cut), its last stall is marked: its duration is a lower bound.
func (p *stallProcessor) writeStallEvents(events ptrace.SpanEventSlice, stalls []figures.Stall, cut bool) {
	written := min(len(stalls), p.maxStallEvents)
	events.EnsureCapacity(events.Len() + written)
	for i, st := range stalls[:written] {
		ev := events.AppendEmpty()
		ev.SetName(semconv.EventStall)
		ev.SetTimestamp(pcommon.Timestamp(st.At))
		evAttrs := ev.Attributes()
		evAttrs.EnsureCapacity(3)
		evAttrs.PutDouble(semconv.AttrStallEventDurationMs, figures.Millis(st.Duration))
		evAttrs.PutInt(semconv.AttrStallEventAfterChunk, int64(st.AfterChunk))
		evAttrs.PutInt(semconv.AttrStallEventGaps, int64(st.Gaps))
		if cut && i == len(stalls)-1 {
			evAttrs.PutBool(semconv.AttrStallEventCut, true)
		}
	}
}

// seal writes the seal of the evidence in s.chunks (figures.Sealer) and
// returns it, valid until the sealer's next use.
func (p *stallProcessor) seal(s *scratch, span ptrace.Span) []byte {
	if s.sealer == nil {
		s.sealer = figures.NewSealer()
	}
	seal := s.sealer.Seal(span, &s.chunks)
	span.Attributes().PutEmptyBytes(semconv.AttrFiguresSeal).FromRaw(seal)
	return seal
}

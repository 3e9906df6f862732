// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"errors"
	"fmt"
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

// Reported is the figure set a span carries: its figure attributes and a
// summary of its llm.stream.stall events, as read, before any judgement. A
// span whose chunk events are gone (a first tier dropped them) still carries
// the figures derived from them; Check says whether they can be true.
type Reported struct {
	present Set
	ints    [numAttributes]int64
	floats  [numAttributes]float64
	// problem is the first reading problem: a figure of the wrong type or
	// given twice.
	problem error
	// evidence is the llm.stream.evidence value, when present and known.
	evidence string
	seal     []byte

	stallEvents            int
	stallSumMs, stallMaxMs float64
	badStallEvent          error
}

// attrKind is the type each figure is written with.
func attrKind(i int) pcommon.ValueType {
	switch i {
	case IdxChunkCount, IdxStallCount, IdxStallEventsDropped, IdxReasoningChunkCount:
		return pcommon.ValueTypeInt
	case IdxBurst:
		return pcommon.ValueTypeBool
	case IdxEvidence:
		return pcommon.ValueTypeStr
	case IdxSeal:
		return pcommon.ValueTypeBytes
	default:
		return pcommon.ValueTypeDouble
	}
}

// ReadAttributes reads the figure attributes of attrs in one pass.
func ReadAttributes(attrs pcommon.Map) Reported {
	var r Reported
	for name, v := range attrs.All() {
		i, ok := AttributeIndex(name)
		if !ok {
			continue
		}
		if r.present.Has(i) {
			r.fail(fmt.Errorf("%s: given twice", name))
			continue
		}
		r.present.Add(i)
		if want := attrKind(i); v.Type() != want {
			r.fail(fmt.Errorf("%s: want %s, got %s", name, want, v.Type()))
			continue
		}
		switch v.Type() {
		case pcommon.ValueTypeInt:
			r.ints[i] = v.Int()
		case pcommon.ValueTypeDouble:
			r.floats[i] = v.Double()
		case pcommon.ValueTypeStr: // evidence: one of the processor's values
			switch e := v.Str(); e {
			case semconv.EvidenceMarkers, semconv.EvidenceFrames, semconv.EvidenceFrameMarkers:
				r.evidence = e
			default:
				r.fail(fmt.Errorf("%s: %q is none of %q, %q, %q", name, e, semconv.EvidenceMarkers, semconv.EvidenceFrames, semconv.EvidenceFrameMarkers))
			}
		case pcommon.ValueTypeBytes:
			r.seal = v.Bytes().AsRaw()
		default: // bool: the processor writes burst only as true
			if !v.Bool() {
				r.fail(fmt.Errorf("%s: is written only as true", name))
			}
		}
	}
	return r
}

func (r *Reported) fail(err error) {
	if r.problem == nil {
		r.problem = err
	}
}

// ReadStallEvents adds the llm.stream.stall events of a span to r.
func (r *Reported) ReadStallEvents(events ptrace.SpanEventSlice) {
	for _, ev := range events.All() {
		if ev.Name() != semconv.EventStall {
			continue
		}
		r.stallEvents++
		v, ok := ev.Attributes().Get(semconv.AttrStallEventDurationMs)
		switch {
		case !ok || v.Type() != pcommon.ValueTypeDouble:
			r.failEvent(fmt.Errorf("%s event %d: %s is not a double", semconv.EventStall, r.stallEvents, semconv.AttrStallEventDurationMs))
		case !(v.Double() > 0) || math.IsInf(v.Double(), 1):
			r.failEvent(fmt.Errorf("%s event %d: %s is %v, not a positive duration", semconv.EventStall, r.stallEvents, semconv.AttrStallEventDurationMs, v.Double()))
		default:
			r.stallSumMs += v.Double()
			r.stallMaxMs = max(r.stallMaxMs, v.Double())
		}
	}
}

func (r *Reported) failEvent(err error) {
	if r.badStallEvent == nil {
		r.badStallEvent = err
	}
}

// Evidence is the llm.stream.evidence value of the set, "" when absent.
func (r *Reported) Evidence() string { return r.evidence }

// Any reports whether the span carries any figure or stall event.
func (r *Reported) Any() bool { return r.present != 0 || r.stallEvents > 0 }

// Has reports whether the figure of index i is present.
func (r *Reported) Has(i int) bool { return r.present.Has(i) }

// Int is the value of an int figure (0 when absent).
func (r *Reported) Int(i int) int64 { return r.ints[i] }

// Float is the value of a double figure (0 when absent).
func (r *Reported) Float(i int) float64 { return r.floats[i] }

// Tolerance is the slack allowed when two figures must add up: 1 ns (the
// resolution of the timestamps the figures come from) plus one part per
// billion of the larger side. The processor computes each figure from
// integer nanoseconds and converts it to milliseconds once; a sum of such
// conversions is off by a few units in the last place (about 2e-16 relative
// each), far inside this bound even for a sum of millions of stall events,
// while a forged value that is off by more than a nanosecond is caught.
func Tolerance(x float64) float64 { return 1e-6 + 1e-9*math.Abs(x) }

// Check reports whether the figure set could have come from the stall
// processor: every figure has its type, is finite and not negative, is
// present exactly under its presence rule, and the figures agree with one
// another and with the stall events (docs/contract.md section 4 lists the rules). A
// span that carries nothing is consistent. The error names the first rule
// broken.
func (r *Reported) Check() error {
	if r.problem != nil {
		return r.problem
	}
	if !r.Any() {
		return nil
	}
	switch r.evidence {
	case semconv.EvidenceMarkers:
		return r.checkMarkers()
	case semconv.EvidenceFrameMarkers:
		return r.checkOnly(Set(1<<IdxEvidence), semconv.EvidenceFrameMarkers)
	case semconv.EvidenceFrames:
		// The opening frames cannot be told from content: no time to the
		// first chunk or answer is known.
		for _, i := range []int{IdxTTFTMs, IdxTimeToFirstAnswerMs} {
			if r.Has(i) {
				return fmt.Errorf("%s: present in a figure set derived from frames (%s = %s)", attributeNames[i], semconv.AttrEvidence, semconv.EvidenceFrames)
			}
		}
	}
	if !r.Has(IdxChunkCount) {
		return errors.New(semconv.AttrChunkCount + ": absent, but other figures or stall events are present")
	}
	n := r.ints[IdxChunkCount]
	if n < 1 {
		return fmt.Errorf("%s: %d, want at least 1", semconv.AttrChunkCount, n)
	}
	for i := range numAttributes {
		if !r.Has(i) {
			continue
		}
		switch attrKind(i) {
		case pcommon.ValueTypeDouble:
			if v := r.floats[i]; !(v >= 0) || math.IsInf(v, 1) {
				return fmt.Errorf("%s: %v is not a finite, non-negative value", attributeNames[i], v)
			}
		case pcommon.ValueTypeInt:
			if v := r.ints[i]; v < 0 {
				return fmt.Errorf("%s: %d is negative", attributeNames[i], v)
			}
		}
	}
	if err := r.checkInterval(n); err != nil {
		return err
	}
	return r.checkReasoning(n)
}

// checkInterval checks the figures that need two chunks, and the stall events.
func (r *Reported) checkInterval(n int64) error {
	interval := r.present & IntervalFigures
	cut := r.Has(IdxStallCutMs)
	if interval == 0 {
		for _, i := range []int{IdxBurst, IdxActiveTPS, IdxStallEventsDropped, IdxStallCutMs} {
			if r.Has(i) {
				return fmt.Errorf("%s: present without the interval figures", attributeNames[i])
			}
		}
		if r.stallEvents > 0 {
			return fmt.Errorf("%s events: present without the interval figures", semconv.EventStall)
		}
		return nil
	}
	if interval != IntervalFigures {
		for i := range numAttributes {
			if IntervalFigures.Has(i) && !r.Has(i) {
				return fmt.Errorf("%s: absent, but other interval figures are present", attributeNames[i])
			}
		}
	}
	if n < 2 && !cut {
		return fmt.Errorf("%s: %d, but interval figures need at least 2 (or a %s)", semconv.AttrChunkCount, n, semconv.AttrStallCutMs)
	}
	gen, stall := r.floats[IdxGenerationMs], r.floats[IdxStallMs]
	active, maxStall := r.floats[IdxActiveGenerationMs], r.floats[IdxMaxStallMs]
	stalls := r.ints[IdxStallCount]
	gaps := n - 1
	if cut {
		// The silence the stream was cut in is its last gap, and a stall.
		gaps = n
		switch c := r.floats[IdxStallCutMs]; {
		case !(c > 0):
			return fmt.Errorf("%s: must be positive", semconv.AttrStallCutMs)
		case c > maxStall+Tolerance(maxStall):
			return fmt.Errorf("%s %v exceeds %s %v", semconv.AttrStallCutMs, c, semconv.AttrMaxStallMs, maxStall)
		}
	}
	switch {
	case !(r.floats[IdxStallThresholdMs] > 0):
		return fmt.Errorf("%s: must be positive", semconv.AttrStallThresholdMs)
	case stall > gen+Tolerance(gen):
		return fmt.Errorf("%s %v exceeds %s %v", semconv.AttrStallMs, stall, semconv.AttrGenerationMs, gen)
	case math.Abs(active-(gen-stall)) > Tolerance(gen):
		return fmt.Errorf("%s %v is not %s - %s = %v", semconv.AttrActiveGenerationMs, active, semconv.AttrGenerationMs, semconv.AttrStallMs, gen-stall)
	case maxStall > stall+Tolerance(stall):
		return fmt.Errorf("%s %v exceeds %s %v", semconv.AttrMaxStallMs, maxStall, semconv.AttrStallMs, stall)
	case stalls > gaps:
		return fmt.Errorf("%s %d exceeds the %d gaps of %d chunks", semconv.AttrStallCount, stalls, gaps, n)
	case (stalls == 0) != (stall == 0) || (stalls == 0) != (maxStall == 0):
		return fmt.Errorf("%s %d, %s %v and %s %v: zero stalls go with zero stall time, and only they", semconv.AttrStallCount, stalls, semconv.AttrStallMs, stall, semconv.AttrMaxStallMs, maxStall)
	}
	if r.Has(IdxActiveTPS) {
		switch {
		case r.Has(IdxBurst):
			return fmt.Errorf("%s: present on a burst", semconv.AttrActiveTPS)
		case !(r.floats[IdxActiveTPS] > 0):
			return fmt.Errorf("%s: must be positive", semconv.AttrActiveTPS)
		case active < 1-Tolerance(1):
			return fmt.Errorf("%s: present with %s %v under 1 ms", semconv.AttrActiveTPS, semconv.AttrActiveGenerationMs, active)
		}
	}
	dropped := int64(0)
	if r.Has(IdxStallEventsDropped) {
		dropped = r.ints[IdxStallEventsDropped]
		if dropped < 1 {
			return fmt.Errorf("%s: written only when positive", semconv.AttrStallEventsDropped)
		}
	}
	if r.badStallEvent != nil {
		return r.badStallEvent
	}
	switch {
	case int64(r.stallEvents) > stalls-dropped:
		return fmt.Errorf("%d %s events and %d dropped exceed %s %d", r.stallEvents, semconv.EventStall, dropped, semconv.AttrStallCount, stalls)
	case r.stallMaxMs > maxStall+Tolerance(maxStall):
		return fmt.Errorf("a %s event of %v ms exceeds %s %v", semconv.EventStall, r.stallMaxMs, semconv.AttrMaxStallMs, maxStall)
	case r.stallSumMs > stall+Tolerance(stall):
		return fmt.Errorf("the %s events sum to %v ms, more than %s %v", semconv.EventStall, r.stallSumMs, semconv.AttrStallMs, stall)
	}
	return nil
}

// checkReasoning checks the reasoning figures against the chunk count and
// TTFT. The first chunk is the first reasoning chunk or the first answer
// chunk, whichever came first, so when both TTFT and TTFA are known, TTFA is
// TTFT plus the reasoning time (zero when no reasoning preceded the answer).
// A set without any reasoning figure is consistent: TTFA is not required,
// since a first tier of an earlier version does not write it.
func (r *Reported) checkReasoning(n int64) error {
	reasoningChunks := int64(0)
	if r.Has(IdxReasoningChunkCount) {
		reasoningChunks = r.ints[IdxReasoningChunkCount]
		switch {
		case reasoningChunks < 1:
			return fmt.Errorf("%s: written only when positive", semconv.AttrReasoningChunkCount)
		case reasoningChunks > n:
			return fmt.Errorf("%s: %d exceeds %s %d", semconv.AttrReasoningChunkCount, reasoningChunks, semconv.AttrChunkCount, n)
		}
	}
	hasAnswer := reasoningChunks < n
	ttfa, reasoning := r.floats[IdxTimeToFirstAnswerMs], r.floats[IdxReasoningMs]
	if r.Has(IdxTimeToFirstAnswerMs) && !hasAnswer {
		return fmt.Errorf("%s: present, but every chunk is a reasoning chunk", semconv.AttrTimeToFirstAnswerMs)
	}
	if r.Has(IdxReasoningMs) {
		switch {
		case !r.Has(IdxReasoningChunkCount):
			return fmt.Errorf("%s: present without %s", semconv.AttrReasoningMs, semconv.AttrReasoningChunkCount)
		case !hasAnswer:
			return fmt.Errorf("%s: present, but every chunk is a reasoning chunk", semconv.AttrReasoningMs)
		case !r.Has(IdxGenerationMs):
			return fmt.Errorf("%s: present without the interval figures", semconv.AttrReasoningMs)
		case reasoning > r.floats[IdxGenerationMs]+Tolerance(r.floats[IdxGenerationMs]):
			return fmt.Errorf("%s %v exceeds %s %v", semconv.AttrReasoningMs, reasoning, semconv.AttrGenerationMs, r.floats[IdxGenerationMs])
		}
	}
	switch {
	case r.Has(IdxTTFTMs) && r.Has(IdxTimeToFirstAnswerMs):
		// reasoning is 0 when absent: the first chunk was an answer chunk.
		if ttft := r.floats[IdxTTFTMs]; math.Abs(ttfa-(ttft+reasoning)) > Tolerance(ttfa) {
			return fmt.Errorf("%s %v is not %s + %s = %v", semconv.AttrTimeToFirstAnswerMs, ttfa, semconv.AttrTTFTMs, semconv.AttrReasoningMs, ttft+reasoning)
		}
	case r.Has(IdxTTFTMs) && r.Has(IdxReasoningMs):
		return fmt.Errorf("%s: absent, but %s and %s are present", semconv.AttrTimeToFirstAnswerMs, semconv.AttrTTFTMs, semconv.AttrReasoningMs)
	case r.Has(IdxTimeToFirstAnswerMs):
		// Without TTFT the first chunk precedes the span start while the
		// first answer does not: reasoning came first, and began before the start.
		if !r.Has(IdxReasoningMs) || reasoning < ttfa-Tolerance(ttfa) {
			return fmt.Errorf("%s: present without %s, so the first chunk precedes the span start: it needs a longer %s", semconv.AttrTimeToFirstAnswerMs, semconv.AttrTTFTMs, semconv.AttrReasoningMs)
		}
	}
	return nil
}

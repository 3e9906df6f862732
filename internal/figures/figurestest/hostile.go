// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package figurestest holds the hostile spans that every reader of chunk
// evidence (the stall processor, the stall_metrics connector, the
// hedge_advisor exporter) is tested against, with the figures each must give
// or the skip each must make: one table, so that the readings cannot drift
// apart.
package figurestest // import "github.com/streamstall/streamstall/internal/figures/figurestest"

import (
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

// Start is the span start of the hostile spans that have one: 2026-01-01.
const Start = pcommon.Timestamp(1_767_225_600_000_000_000)

// Threshold is the stall threshold the expected figures assume (the stall
// processor's default); MaxDuration is the chunk_events::max_duration they
// assume (the default).
const (
	Threshold   = 2 * time.Second
	MaxDuration = time.Hour
)

// Event is one span event of a hostile span.
type Event struct {
	Name string
	At   pcommon.Timestamp
	// Kind is the llm.stream.chunk.kind value, of any type; nil for none.
	Kind any
	// Attrs are further event attributes (the elision counts).
	Attrs map[string]any
}

// Want is what a reader must make of a span: Skip (implausible: no figure,
// no sample, counted), or the figures of its chunk evidence. Durations are
// nanoseconds.
type Want struct {
	Skip       bool
	ChunkCount int
	HasTTFT    bool
	TTFT       int64
	Gaps       []int64
	// ElidedGaps are the gaps across elided chunks, one run each.
	ElidedGaps      []ElidedGaps
	StallCount      int
	StallTotal      int64
	ReasoningChunks int
}

// ElidedGaps are the Count gaps around elided chunks, Sum nanoseconds
// together.
type ElidedGaps struct {
	Sum   int64
	Count int
}

// Generation is the wall clock from the first chunk to the last.
func (w Want) Generation() int64 {
	var sum int64
	for _, g := range w.Gaps {
		sum += g
	}
	for _, g := range w.ElidedGaps {
		sum += g.Sum
	}
	return sum
}

// GapCount is the number of gaps between chunks, elided ones included.
func (w Want) GapCount() int {
	n := len(w.Gaps)
	for _, g := range w.ElidedGaps {
		n += g.Count
	}
	return n
}

// Span is one hostile span.
type Span struct {
	Name       string
	Start, End pcommon.Timestamp
	// Attrs are span attributes (what the receiver says of elided chunks).
	Attrs  map[string]any
	Events []Event
	Want   Want
}

// CopyTo sets the times and appends the events of s to span.
func (s Span) CopyTo(span ptrace.Span) {
	span.SetName(s.Name)
	span.SetStartTimestamp(s.Start)
	span.SetEndTimestamp(s.End)
	for k, v := range s.Attrs {
		_ = span.Attributes().PutEmpty(k).FromRaw(v)
	}
	for _, e := range s.Events {
		ev := span.Events().AppendEmpty()
		ev.SetName(e.Name)
		ev.SetTimestamp(e.At)
		if e.Kind != nil {
			_ = ev.Attributes().PutEmpty(semconv.AttrChunkKind).FromRaw(e.Kind)
		}
		for k, v := range e.Attrs {
			_ = ev.Attributes().PutEmpty(k).FromRaw(v)
		}
	}
}

func at(ms int64) pcommon.Timestamp {
	return pcommon.Timestamp(int64(Start) + ms*int64(time.Millisecond))
}

func chunks(msOffsets ...int64) []Event {
	out := make([]Event, len(msOffsets))
	for i, off := range msOffsets {
		out[i] = Event{Name: semconv.EventChunk, At: at(off)}
	}
	return out
}

func millis(vs ...int64) []int64 {
	out := make([]int64, len(vs))
	for i, v := range vs {
		out[i] = v * int64(time.Millisecond)
	}
	return out
}

// year2200 fits signed nanoseconds, and is after any span end.
const year2200 = pcommon.Timestamp(7_258_118_400_000_000_000)

// Spans returns the hostile spans, a fresh copy each call.
func Spans() []Span {
	end := at(10_000)
	ms := int64(time.Millisecond)
	hour := int64(MaxDuration)
	inOrder := Want{ChunkCount: 4, HasTTFT: true, TTFT: 100 * ms, Gaps: millis(50, 50, 3000), StallCount: 1, StallTotal: 3000 * ms}
	return append([]Span{
		{Name: "in order", Start: Start, End: end, Events: chunks(100, 150, 200, 3200), Want: inOrder},
		{Name: "unsorted", Start: Start, End: end, Events: chunks(3200, 100, 200, 150), Want: inOrder},
		{
			Name: "duplicated", Start: Start, End: end, Events: chunks(100, 100, 200),
			Want: Want{ChunkCount: 3, HasTTFT: true, TTFT: 100 * ms, Gaps: millis(0, 100)},
		},
		{
			Name: "zero times", Start: Start, End: end,
			Events: []Event{{Name: semconv.EventChunk}, {Name: semconv.EventChunk, At: at(100)}, {Name: semconv.EventChunkLegacy}, {Name: semconv.EventChunk, At: at(300)}},
			Want:   Want{ChunkCount: 2, HasTTFT: true, TTFT: 100 * ms, Gaps: millis(200)},
		},
		{
			Name: "only zero times: no evidence", Start: Start, End: end,
			Events: []Event{{Name: semconv.EventChunk}, {Name: semconv.EventChunk}},
		},
		{
			Name: "a time past int64", Start: Start, End: end,
			Events: append(chunks(100, 200), Event{Name: semconv.EventChunk, At: math.MaxUint64}),
			Want:   Want{Skip: true},
		},
		{
			Name: "a time past int64 without an end", Start: Start,
			Events: append(chunks(100), Event{Name: semconv.EventChunk, At: pcommon.Timestamp(math.MaxInt64) + 1}),
			Want:   Want{Skip: true},
		},
		{
			Name: "far future, after the end", Start: Start, End: end,
			Events: append(chunks(100), Event{Name: semconv.EventChunk, At: year2200}),
			Want:   Want{Skip: true},
		},
		{
			Name: "far future without an end", Start: Start,
			Events: append(chunks(100), Event{Name: semconv.EventChunk, At: year2200}),
			Want:   Want{Skip: true},
		},
		{
			Name: "before the start, within the skew", Start: Start, End: end, Events: chunks(-40, 10, 60),
			Want: Want{ChunkCount: 3, Gaps: millis(50, 50)},
		},
		{Name: "before the start, beyond the skew", Start: Start, End: end, Events: chunks(-5000, 100), Want: Want{Skip: true}},
		{Name: "at the epoch", Start: Start, End: end, Events: []Event{{Name: semconv.EventChunk, At: 1}, {Name: semconv.EventChunk, At: at(100)}}, Want: Want{Skip: true}},
		{
			Name: "after the end, within the skew", Start: Start, End: at(1000), Events: chunks(100, 1500),
			Want: Want{ChunkCount: 2, HasTTFT: true, TTFT: 100 * ms, Gaps: millis(1400)},
		},
		{Name: "after the end, beyond the skew", Start: Start, End: at(1000), Events: chunks(100, 2500), Want: Want{Skip: true}},
		{Name: "end before the start", Start: Start, End: at(-3000), Events: chunks(100, 200), Want: Want{Skip: true}},
		{
			Name: "exactly max_duration", Start: Start, Events: chunks(100, 3_600_000),
			Want: Want{ChunkCount: 2, HasTTFT: true, TTFT: 100 * ms, Gaps: []int64{hour - 100*ms}, StallCount: 1, StallTotal: hour - 100*ms},
		},
		{Name: "past max_duration", Start: Start, Events: chunks(100, 3_600_001), Want: Want{Skip: true}},
		{Name: "a TTFT past max_duration", Start: Start, Events: chunks(3_600_001), Want: Want{Skip: true}},
		{Name: "years long, no start nor end", Events: chunks(0, 2*3_600_000), Want: Want{Skip: true}},
		{Name: "no start nor end", Events: chunks(100, 150), Want: Want{ChunkCount: 2, Gaps: millis(50)}},
		{Name: "a start past int64", Start: math.MaxUint64, Events: chunks(100, 150), Want: Want{ChunkCount: 2, Gaps: millis(50)}},
		{
			Name: "mixed kinds", Start: Start, End: end,
			Events: []Event{
				{Name: semconv.EventChunk, At: at(100), Kind: semconv.ChunkKindReasoning},
				{Name: semconv.EventChunk, At: at(200), Kind: int64(7)},
				{Name: semconv.EventChunk, At: at(300), Kind: "REASONING"},
				{Name: semconv.EventChunk, At: at(400), Kind: true},
				{Name: semconv.EventChunkLegacy, At: at(500), Kind: semconv.ChunkKindText},
				{Name: semconv.EventChunk, At: at(600), Kind: []any{semconv.ChunkKindReasoning}},
				{Name: semconv.EventChunk, At: at(700), Kind: semconv.ChunkKindReasoning},
			},
			Want: Want{ChunkCount: 7, HasTTFT: true, TTFT: 100 * ms, Gaps: millis(100, 100, 100, 100, 100, 100), ReasoningChunks: 2},
		},
		{
			Name: "mixed names", Start: Start, End: end,
			Events: []Event{
				{Name: semconv.EventChunkLegacy, At: at(100)},
				{Name: semconv.EventKeepalive, At: at(150)},
				{Name: semconv.EventChunk, At: at(200)},
				{Name: semconv.EventKeepalive, At: year2200},
				{Name: "gen_ai.choice", At: math.MaxUint64},
				{Name: "GEN_AI.CONTENT.COMPLETION.CHUNK", At: at(-9000)},
			},
			Want: Want{ChunkCount: 2, HasTTFT: true, TTFT: 100 * ms, Gaps: millis(100)},
		},
		manyChunks(),
	}, elidedSpans()...)
}

// elided is a chunk event that follows n elided chunks, r of them
// reasoning.
func elided(ms, n, r int64, kind any) Event {
	e := Event{Name: semconv.EventChunk, At: at(ms), Kind: kind, Attrs: map[string]any{semconv.AttrChunkElided: n}}
	if r > 0 {
		e.Attrs[semconv.AttrChunkElidedReasoning] = r
	}
	return e
}

// elidedSpans are spans whose receiver elided chunks (docs/contract.md
// section 3): honest ones, whose figures count the elided chunks, and
// malformed ones, which no receiver writes and every reader skips.
func elidedSpans() []Span {
	end := at(10_000)
	ms := int64(time.Millisecond)
	keep := func() map[string]any { // the receiver's default keep_gaps_above, 2 s
		return map[string]any{semconv.AttrChunkEventsElided: int64(58), semconv.AttrChunkEventsKeepGapsAboveMs: float64(2000)}
	}
	// 100, 49 elided, 600, 3600 (a stall of 3 s), 9 elided, 3700.
	honest := func() []Event {
		return []Event{chunk(100), elided(600, 49, 0, nil), chunk(3600), elided(3700, 9, 0, semconv.ChunkKindText)}
	}
	honestWant := Want{
		ChunkCount: 62, HasTTFT: true, TTFT: 100 * ms, Gaps: millis(3000),
		ElidedGaps: []ElidedGaps{{Sum: 500 * ms, Count: 50}, {Sum: 100 * ms, Count: 10}}, StallCount: 1, StallTotal: 3000 * ms,
	}
	spoiled := func(spoil func([]Event) []Event) []Event { return spoil(honest()) }
	return []Span{
		{Name: "elided chunks", Start: Start, End: end, Attrs: keep(), Events: honest(), Want: honestWant},
		{
			Name: "elided chunks, unsorted", Start: Start, End: end, Attrs: keep(), Want: honestWant,
			Events: spoiled(func(e []Event) []Event { return []Event{e[3], e[1], e[2], e[0]} }),
		},
		{
			Name: "elided reasoning chunks", Start: Start, End: end, Attrs: keep(),
			Events: []Event{
				{Name: semconv.EventChunk, At: at(100), Kind: semconv.ChunkKindReasoning},
				elided(300, 20, 20, semconv.ChunkKindReasoning),
				{Name: semconv.EventChunk, At: at(400), Kind: semconv.ChunkKindText},
				elided(900, 10, 3, nil),
			},
			Want: Want{
				ChunkCount: 34, HasTTFT: true, TTFT: 100 * ms, Gaps: millis(100),
				ElidedGaps: []ElidedGaps{{Sum: 200 * ms, Count: 21}, {Sum: 500 * ms, Count: 11}}, ReasoningChunks: 25,
			},
		},
		{Name: "elided chunks without keep_gaps_above_ms", Start: Start, End: end, Events: honest(), Want: Want{Skip: true}},
		{Name: "elided chunks, keep_gaps_above_ms a string", Start: Start, End: end, Attrs: map[string]any{semconv.AttrChunkEventsKeepGapsAboveMs: "2000"}, Events: honest(), Want: Want{Skip: true}},
		{
			Name: "chunks elided before the first", Start: Start, End: end, Attrs: keep(), Want: Want{Skip: true},
			Events: spoiled(func(e []Event) []Event { e[0] = elided(100, 3, 0, nil); return e }),
		},
		{
			Name: "a negative elided count", Start: Start, End: end, Attrs: keep(), Want: Want{Skip: true},
			Events: spoiled(func(e []Event) []Event { e[3] = elided(3700, -9, 0, nil); return e }),
		},
		{
			Name: "an elided count past 2^40", Start: Start, End: end, Attrs: keep(), Want: Want{Skip: true},
			Events: spoiled(func(e []Event) []Event { e[3] = elided(3700, 1<<50, 0, nil); return e }),
		},
		{
			Name: "reasoning elided before the first reasoning chunk", Start: Start, End: end, Attrs: keep(), Want: Want{Skip: true},
			Events: spoiled(func(e []Event) []Event { e[3] = elided(3700, 9, 2, nil); return e }),
		},
	}
}

func chunk(ms int64) Event { return Event{Name: semconv.EventChunk, At: at(ms)} }

// manyChunks is a span of 5000 chunks 2 ms apart.
func manyChunks() Span {
	const n = 5000
	s := Span{Name: "many chunks", Start: Start, End: at(20_000)}
	w := Want{ChunkCount: n, HasTTFT: true, TTFT: 100 * int64(time.Millisecond)}
	for i := range int64(n) {
		s.Events = append(s.Events, Event{Name: semconv.EventChunk, At: at(100 + 2*i)})
		if i > 0 {
			w.Gaps = append(w.Gaps, 2*int64(time.Millisecond))
		}
	}
	s.Want = w
	return s
}

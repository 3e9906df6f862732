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
}

// Want is what a reader must make of a span: Skip (implausible: no figure,
// no sample, counted), or the figures of its chunk evidence. Durations are
// nanoseconds.
type Want struct {
	Skip            bool
	ChunkCount      int
	HasTTFT         bool
	TTFT            int64
	Gaps            []int64
	StallCount      int
	StallTotal      int64
	ReasoningChunks int
}

// Generation is the wall clock from the first chunk to the last.
func (w Want) Generation() int64 {
	var sum int64
	for _, g := range w.Gaps {
		sum += g
	}
	return sum
}

// Span is one hostile span.
type Span struct {
	Name       string
	Start, End pcommon.Timestamp
	Events     []Event
	Want       Want
}

// CopyTo sets the times and appends the events of s to span.
func (s Span) CopyTo(span ptrace.Span) {
	span.SetName(s.Name)
	span.SetStartTimestamp(s.Start)
	span.SetEndTimestamp(s.End)
	for _, e := range s.Events {
		ev := span.Events().AppendEmpty()
		ev.SetName(e.Name)
		ev.SetTimestamp(e.At)
		if e.Kind != nil {
			_ = ev.Attributes().PutEmpty(semconv.AttrChunkKind).FromRaw(e.Kind)
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
	return []Span{
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
	}
}

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

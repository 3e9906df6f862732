// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

// handed reads and seals span as the stall processor does, and puts its
// evidence into h; it returns the figure set the connector then reads.
func handed(t *testing.T, h *Handoff, span ptrace.Span) Reported {
	t.Helper()
	r := NewChunkReader(DefaultChunkEventsConfig())
	c := new(Chunks)
	require.NoError(t, r.Read(span, c))
	seal := NewSealer().Seal(span, c)
	span.Attributes().PutEmptyBytes(semconv.AttrFiguresSeal).FromRaw(seal)
	h.Put(span, seal, r, c)
	return ReadAttributes(span.Attributes())
}

// take takes span's evidence from h as the connector does.
func take(h *Handoff, span ptrace.Span, rep *Reported) (*Chunks, bool) {
	c := new(Chunks)
	return c, h.Take(span, rep, NewChunkReader(DefaultChunkEventsConfig()), c)
}

// The connector takes the evidence the processor judged, once, and it is
// the evidence a full read gives.
func TestHandoffGivesWhatWasJudged(t *testing.T) {
	h := NewHandoff(DefaultHandoffEntries, DefaultHandoffBytes)
	defer h.Open()()
	span := streamSpan(5000, false, 400, 420, 3440, 3460)
	markCut(span, 1000)
	rep := handed(t, h, span)
	assert.Equal(t, 1, h.Len())

	got, ok := take(h, span, &rep)
	require.True(t, ok)
	want := new(Chunks)
	require.NoError(t, NewChunkReader(DefaultChunkEventsConfig()).Read(span, want))
	assert.Equal(t, want.Times, got.Times)
	assert.Equal(t, want.Count(), got.Count())
	assert.Equal(t, want.Cut(), got.Cut())
	wantFigures, _ := want.Derive(2000*ms, nil)
	gotFigures, _ := got.Derive(2000*ms, nil)
	assert.Equal(t, wantFigures, gotFigures)

	assert.Zero(t, h.Len(), "taken")
	_, ok = take(h, span, &rep)
	assert.False(t, ok, "an entry is taken once")
}

// Without an open connector nothing is handed off, and a connector finds
// nothing: it reads the span itself.
func TestHandoffOnlyWhileAConnectorIsOpen(t *testing.T) {
	h := NewHandoff(DefaultHandoffEntries, DefaultHandoffBytes)
	span := streamSpan(5000, false, 400, 420, 3440)
	rep := handed(t, h, span)
	assert.Zero(t, h.Len())
	_, ok := take(h, span, &rep)
	assert.False(t, ok)

	closeFirst, closeSecond := h.Open(), h.Open()
	handed(t, h, span)
	closeFirst()
	closeFirst() // closing twice closes once
	assert.Equal(t, 1, h.Len(), "a connector is still open")
	closeSecond()
	assert.Zero(t, h.Len(), "the last connector closed: the entries are dropped")
}

// A span changed since the processor judged it gets nothing from the
// hand-off, and its entry is dropped: the connector reads it in full.
func TestHandoffRefusesAChangedSpan(t *testing.T) {
	for name, change := range map[string]func(ptrace.Span){
		"the span end":   func(s ptrace.Span) { s.SetEndTimestamp(s.EndTimestamp() + 1) },
		"the span start": func(s ptrace.Span) { s.SetStartTimestamp(s.StartTimestamp() - 1) },
		"the span id":    func(s ptrace.Span) { s.SetSpanID(pcommon.SpanID{3}) },
		"the trace id":   func(s ptrace.Span) { s.SetTraceID(pcommon.TraceID{3}) },
		"an event more":  func(s ptrace.Span) { s.Events().AppendEmpty().SetName(semconv.EventKeepalive) },
		"an event less": func(s ptrace.Span) {
			second := s.Events().At(1).Timestamp()
			s.Events().RemoveIf(func(ev ptrace.SpanEvent) bool { return ev.Timestamp() == second })
		},
		"the last chunk time":  func(s ptrace.Span) { s.Events().At(3).SetTimestamp(s.Events().At(3).Timestamp() + 1) },
		"the first chunk time": func(s ptrace.Span) { s.Events().At(0).SetTimestamp(s.Events().At(0).Timestamp() - 1) },
		"the last chunk name":  func(s ptrace.Span) { s.Events().At(3).SetName(semconv.EventKeepalive) },
		"the cut mark":         func(s ptrace.Span) { s.Attributes().Remove(semconv.AttrErrorType) },
	} {
		h := NewHandoff(DefaultHandoffEntries, DefaultHandoffBytes)
		closeFn := h.Open()
		span := streamSpan(5000, false, 400, 420, 3440, 3460)
		markCut(span, 1000)
		rep := handed(t, h, span)
		change(span)
		_, ok := take(h, span, &rep)
		assert.False(t, ok, name)
		assert.Zero(t, h.Len(), name)
		closeFn()
	}

	// A connector selecting other chunk events reads the span itself.
	h := NewHandoff(DefaultHandoffEntries, DefaultHandoffBytes)
	defer h.Open()()
	span := streamSpan(5000, false, 400, 420, 3440, 3460)
	rep := handed(t, h, span)
	other := DefaultChunkEventsConfig()
	other.Names = []string{semconv.EventChunk}
	assert.False(t, h.Take(span, &rep, NewChunkReader(other), new(Chunks)), "other chunk_events::names")
}

// Evidence the hand-off cannot check cheaply is not handed off: chunk
// events out of order, elided chunks, no chunk at all.
func TestHandoffLeavesOutWhatItCannotCheck(t *testing.T) {
	h := NewHandoff(DefaultHandoffEntries, DefaultHandoffBytes)
	defer h.Open()()
	unordered := streamSpan(5000, false, 400, 3440, 420)
	handed(t, h, unordered)
	assert.Zero(t, h.Len(), "out of order")

	elided := streamSpan(5000, false, 400, 420, 440)
	elided.Events().At(2).Attributes().PutInt(semconv.AttrChunkElided, 1)
	elided.Attributes().PutDouble(semconv.AttrChunkEventsKeepGapsAboveMs, 100)
	handed(t, h, elided)
	assert.Zero(t, h.Len(), "elided chunks")

	r := NewChunkReader(DefaultChunkEventsConfig())
	c := new(Chunks)
	none := streamSpan(5000, false)
	require.NoError(t, r.Read(none, c))
	h.Put(none, NewSealer().Seal(none, c), r, c)
	assert.Zero(t, h.Len(), "no chunk")
}

// The hand-off holds at most its bound of entries and of bytes: past it the
// oldest entry is dropped, and its span is read again by the connector.
func TestHandoffBoundDropsTheOldest(t *testing.T) {
	spanNo := func(i int) ptrace.Span {
		span := streamSpan(5000, false, 400, 420, 3440, 3460)
		span.SetSpanID(pcommon.SpanID{byte(i)})
		return span
	}
	for _, bound := range []struct {
		name                 string
		maxEntries, maxBytes int
	}{
		{"entries", 3, DefaultHandoffBytes},
		{"bytes", DefaultHandoffEntries, 3 * (handoffEntryBytes + 8*4)},
	} {
		h := NewHandoff(bound.maxEntries, bound.maxBytes)
		closeFn := h.Open()
		var spans []ptrace.Span
		var reps []Reported
		for i := range 5 {
			spans = append(spans, spanNo(i))
			reps = append(reps, handed(t, h, spans[i]))
			assert.LessOrEqual(t, h.Len(), 3, bound.name)
		}
		for i := range 5 {
			_, ok := take(h, spans[i], &reps[i])
			assert.Equal(t, i >= 2, ok, "%s: span %d", bound.name, i)
		}
		closeFn()
	}

	h := NewHandoff(DefaultHandoffEntries, handoffEntryBytes)
	defer h.Open()()
	handed(t, h, spanNo(0))
	assert.Zero(t, h.Len(), "an entry above the byte bound alone")
}

// Processors and connectors of several pipelines share the hand-off
// concurrently, each taking its own spans' evidence.
func TestHandoffConcurrentPipelines(t *testing.T) {
	h := NewHandoff(DefaultHandoffEntries, DefaultHandoffBytes)
	defer h.Open()()
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() {
			r := NewChunkReader(DefaultChunkEventsConfig())
			sealer := NewSealer()
			var judged, taken Chunks
			for i := range 200 {
				span := streamSpan(5000, false, 400, 420, 3440, int64(3460+i))
				span.SetSpanID(pcommon.SpanID{byte(p), byte(i)})
				if err := r.Read(span, &judged); err != nil {
					t.Error(err)
					return
				}
				seal := sealer.Seal(span, &judged)
				span.Attributes().PutEmptyBytes(semconv.AttrFiguresSeal).FromRaw(seal)
				h.Put(span, seal, r, &judged)
				rep := ReadAttributes(span.Attributes())
				if !h.Take(span, &rep, r, &taken) {
					t.Errorf("pipeline %d: span %d not handed off", p, i)
					return
				}
				if last := taken.Times[len(taken.Times)-1]; last != int64(span.StartTimestamp())+(3460+int64(i))*ms {
					t.Errorf("pipeline %d: span %d got another span's evidence", p, i)
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, h.Len())
}

// The contract states the hand-off's bounds.
func TestContractStatesTheHandoffBounds(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "contract.md"))
	require.NoError(t, err)
	text := strings.Join(strings.Fields(string(doc)), " ")
	want := fmt.Sprintf("holds at most %d,%03d entries and %d MiB", DefaultHandoffEntries/1000, DefaultHandoffEntries%1000, DefaultHandoffBytes>>20)
	assert.Contains(t, text, want)
}

// The figures Derive keeps with the evidence, and the hand-off carries,
// are those a fresh derivation gives, under the threshold asked; evidence
// read again derives again.
func TestDeriveKeepsItsFigures(t *testing.T) {
	span := streamSpan(7000, false, 400, 420, 3440, 3460, 6500)
	r := NewChunkReader(DefaultChunkEventsConfig())
	c := new(Chunks)
	require.NoError(t, r.Read(span, c))
	first, firstReasoning := c.Derive(2000*ms, nil)
	require.Len(t, first.Stalls, 2)
	again, againReasoning := c.Derive(2000*ms, make([]Stall, 5))
	assert.Equal(t, first, again)
	assert.Equal(t, firstReasoning, againReasoning)
	longer, _ := c.Derive(3020*ms, nil)
	assert.Len(t, longer.Stalls, 1, "another threshold derives again")

	fresh := new(Chunks)
	require.NoError(t, r.Read(span, fresh))
	want, _ := fresh.Derive(3020*ms, nil)
	assert.Equal(t, want, longer)

	span.Events().At(4).SetTimestamp(span.Events().At(3).Timestamp() + pcommon.Timestamp(20*ms))
	require.NoError(t, r.Read(span, c))
	moved, _ := c.Derive(3020*ms, nil)
	assert.Empty(t, moved.Stalls, "evidence read again derives again")
}

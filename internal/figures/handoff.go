// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The bounds of the process's hand-off (docs/contract.md section 4). 4,096
// spans cover a batch processor between stall and stall_metrics holding
// 200 ms of 20,000 spans a second; 8 MiB holds 4,096 spans of 250 chunks.
// Past either bound the oldest entry is dropped, and its span is read again.
const (
	DefaultHandoffEntries = 4096
	DefaultHandoffBytes   = 8 << 20
)

// handoffEntryBytes is what an entry costs besides its chunk times.
const handoffEntryBytes = 256

// recycleMaxTimes and recycleMax bound the evidence buffers kept for reuse:
// those of spans up to 1,024 chunks, at most 256 of them (about 2 MiB).
const (
	recycleMaxTimes = 1024
	recycleMax      = 256
)

// Handoff carries the chunk evidence the stall processor judged on a span
// it sealed to a stall_metrics connector of the same process, which then
// records the span without reading its chunk events again: the evidence is
// read once. An entry is keyed by the seal and taken (removed) by the
// connector that records the span; one that no connector takes (no
// connector in the pipeline, a sampler dropped the span, another pipeline)
// is dropped, oldest first, once the hand-off holds its bound of entries or
// bytes. A connector that finds no entry for a span, or one that does not
// match the span it reads, reads the span as it would without the hand-off.
// Entries are made only while a connector is open. Safe for concurrent use.
type Handoff struct {
	maxEntries, maxBytes int
	takers               atomic.Int32

	// mu guards the fields below; no other lock is taken under it.
	mu      sync.Mutex
	entries map[[SealSize]byte]*judgedSpan
	// oldest and newest end the list of entries in the order they came.
	oldest, newest *judgedSpan
	bytes          int
	// spare are emptied entries whose buffers a Put reuses.
	spare []*judgedSpan
}

// judgedSpan is one entry: the span it was made for and the evidence judged.
type judgedSpan struct {
	seal       [SealSize]byte
	traceID    pcommon.TraceID
	spanID     pcommon.SpanID
	start, end pcommon.Timestamp
	// events is the span's event count once the processor wrote it.
	events int
	// selection is the chunk_events::names of the processor's reader.
	selection string
	evidence  Chunks
	size      int

	older, newer *judgedSpan
}

var processHandoff = NewHandoff(DefaultHandoffEntries, DefaultHandoffBytes)

// ProcessHandoff is the hand-off of this process, shared by every stall
// processor and stall_metrics connector in it.
func ProcessHandoff() *Handoff { return processHandoff }

// NewHandoff returns an empty hand-off of at most maxEntries entries and
// maxBytes bytes.
func NewHandoff(maxEntries, maxBytes int) *Handoff {
	return &Handoff{maxEntries: maxEntries, maxBytes: maxBytes, entries: make(map[[SealSize]byte]*judgedSpan)}
}

// Open registers a connector that takes entries; close undoes it. Once the
// last one closes, the entries are dropped.
func (h *Handoff) Open() (closeFn func()) {
	h.takers.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			if h.takers.Add(-1) > 0 {
				return
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			clear(h.entries)
			h.oldest, h.newest, h.bytes, h.spare = nil, nil, 0, nil
		})
	}
}

// Len is the number of entries held.
func (h *Handoff) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.entries)
}

// Put hands the evidence c that r judged on span, which carries seal, to
// the connectors: c's buffers move to the entry, and c is left empty with
// other buffers. Nothing is handed when no connector is open, or the
// evidence cannot be checked against the span cheaply (chunk events out of
// order, llm.stream.stall events removed, elided chunks), or exceeds the
// byte bound alone.
func (h *Handoff) Put(span ptrace.Span, seal []byte, r *ChunkReader, c *Chunks) {
	if h.takers.Load() == 0 || len(seal) != SealSize || !c.inOrder || c.StallEvents || c.elision || len(c.Times) == 0 {
		return
	}
	size := handoffEntryBytes + 8*cap(c.Times) + 16*cap(c.runs)
	if size > h.maxBytes {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.takers.Load() == 0 {
		return // the last connector closed meanwhile
	}
	key := [SealSize]byte(seal)
	if old := h.entries[key]; old != nil {
		h.remove(old)
	}
	for len(h.entries) > 0 && (len(h.entries) >= h.maxEntries || h.bytes+size > h.maxBytes) {
		h.remove(h.oldest)
	}
	if h.maxEntries <= 0 {
		return
	}
	e := h.spareEntry()
	e.seal, e.traceID, e.spanID = key, span.TraceID(), span.SpanID()
	e.start, e.end = span.StartTimestamp(), span.EndTimestamp()
	e.events, e.selection, e.size = span.Events().Len(), r.selection, size
	e.evidence, *c = *c, e.evidence
	c.Reset()
	h.entries[key] = e
	h.bytes += size
	e.older, e.newer = h.newest, nil
	if h.newest != nil {
		h.newest.newer = e
	} else {
		h.oldest = e
	}
	h.newest = e
}

// Take reads into c the evidence handed for span, which carries the figure
// set rep, and reports whether it did. The entry is removed either way. It
// reports false, and the caller reads the span itself, when there is no
// entry for the span's seal, or the span no longer matches it: another
// trace or span id, start or end, number of events, stream marks (a stall
// cut, frame evidence), first or last chunk event, or a reader r selecting
// other chunk event names.
func (h *Handoff) Take(span ptrace.Span, rep *Reported, r *ChunkReader, c *Chunks) bool {
	if len(rep.seal) != SealSize || h.takers.Load() == 0 {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.entries[[SealSize]byte(rep.seal)]
	if e == nil {
		return false
	}
	ok := e.matches(span, r)
	if ok {
		e.evidence, *c = *c, e.evidence
	}
	h.remove(e)
	return ok
}

// matches reports whether span is still the span e was made for, as far as
// can be told without reading its chunk events: the identity and times the
// seal covers, its event count, its stream marks, and its first and last
// chunk events.
func (e *judgedSpan) matches(span ptrace.Span, r *ChunkReader) bool {
	events := span.Events()
	if e.traceID != span.TraceID() || e.spanID != span.SpanID() || e.start != span.StartTimestamp() ||
		e.end != span.EndTimestamp() || e.events != events.Len() || e.selection != r.selection {
		return false
	}
	ev := &e.evidence
	for _, at := range [2]struct {
		index int
		time  int64
	}{{ev.firstEvent, ev.Times[0]}, {ev.lastEvent, ev.Times[len(ev.Times)-1]}} {
		chunk := events.At(at.index)
		if int64(chunk.Timestamp()) != at.time || !r.names.contains(chunk.Name()) {
			return false
		}
	}
	skip, cut, frames := ev.skip, ev.cut, ev.frames
	ev.readStreamMarks(span.Attributes())
	return ev.skip == skip && ev.cut == cut && ev.frames == frames
}

// remove unlinks e and keeps it for reuse. Callers hold mu.
func (h *Handoff) remove(e *judgedSpan) {
	delete(h.entries, e.seal)
	h.bytes -= e.size
	if e.older != nil {
		e.older.newer = e.newer
	} else {
		h.oldest = e.newer
	}
	if e.newer != nil {
		e.newer.older = e.older
	} else {
		h.newest = e.older
	}
	e.older, e.newer = nil, nil
	if len(h.spare) < recycleMax && cap(e.evidence.Times) <= recycleMaxTimes {
		h.spare = append(h.spare, e)
	}
}

// spareEntry returns an entry to fill, with its buffers if it has any.
// Callers hold mu.
func (h *Handoff) spareEntry() *judgedSpan {
	n := len(h.spare)
	if n == 0 {
		return new(judgedSpan)
	}
	e := h.spare[n-1]
	h.spare[n-1] = nil
	h.spare = h.spare[:n-1]
	return e
}

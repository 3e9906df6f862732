// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The handoff bounds: a span of more chunks is not handed off (its
// connector reads its chunk times from the span), and at most handoffSlots
// spans wait, the oldest given up first. 4096 slots of at most 512 times
// hold 16 MiB at most, about 6.5 MiB for streams of 200 chunks.
const (
	handoffSlots    = 4096
	handoffMaxTimes = 512
)

// handoff carries the chunk times the stall processor judged to the
// stall_metrics connectors of the same process, keyed by the span's seal,
// so that a connector need not read the span's chunk events at all. It is
// used only while a connector is registered, and what it hands over is
// checked: the seal must verify over the span and the times handed over.
// A span whose times were given up (past the bounds, or never claimed)
// is read from its events instead.
type handoff struct {
	consumers atomic.Int64

	mu    sync.Mutex
	slots [handoffSlots]handoffSlot
	next  int
	index map[[SealSize]byte]int
}

type handoffSlot struct {
	key   [SealSize]byte
	used  bool
	times []int64
}

var chunkHandoff = &handoff{index: make(map[[SealSize]byte]int, handoffSlots)}

// RegisterHandoffConsumer registers a reader of handed-off chunk times
// until release is called: the stall processor hands off only while one is
// registered.
func RegisterHandoffConsumer() (release func()) {
	chunkHandoff.consumers.Add(1)
	var once sync.Once
	return func() { once.Do(func() { chunkHandoff.consumers.Add(-1) }) }
}

// HandOff offers the judged chunk times of c, sealed as seal, to the
// connectors of this process.
func HandOff(seal []byte, c *Chunks) {
	h := chunkHandoff
	if h.consumers.Load() == 0 || len(seal) != SealSize || len(c.Times) > handoffMaxTimes || c.Elided > 0 {
		return
	}
	key := [SealSize]byte(seal)
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.index[key]; ok {
		return // the same span twice: its times are the same
	}
	s := &h.slots[h.next]
	if s.used {
		delete(h.index, s.key)
	}
	s.key, s.used = key, true
	s.times = append(s.times[:0], c.Times...)
	h.index[key] = h.next
	h.next = (h.next + 1) % handoffSlots
}

// claim moves the times handed off under seal into dst, reporting whether
// there were any.
func (h *handoff) claim(seal []byte, dst *[]int64) bool {
	if len(seal) != SealSize || h.consumers.Load() == 0 {
		return false
	}
	key := [SealSize]byte(seal)
	h.mu.Lock()
	defer h.mu.Unlock()
	i, ok := h.index[key]
	if !ok {
		return false
	}
	s := &h.slots[i]
	*dst = append((*dst)[:0], s.times...)
	s.used = false
	delete(h.index, key)
	return true
}

// ReadHandedOff reads the chunk evidence of a sealed span from the times
// the processor of this process handed off for it, without touching its
// events, and reports whether it could: times were handed off under the
// span's seal, and the seal verifies over the span and those times. The
// evidence carries no chunk kinds: its figures are the span's, checked.
func (r *ChunkReader) ReadHandedOff(span ptrace.Span, c *Chunks, rep *Reported, s *Sealer) bool {
	c.Reset()
	if !chunkHandoff.claim(rep.seal, &c.Times) {
		return false
	}
	c.start = knownTime(span.StartTimestamp())
	c.end = knownTime(span.EndTimestamp())
	// Handed-off evidence is of kinded chunk events or of frames; which,
	// the span's marks say as they did to the processor (the seal covers
	// what they decided).
	c.bare = len(c.Times)
	c.readStreamMarks(span.Attributes())
	if !c.frames {
		c.bare = 0
	}
	return s.Verify(span, c, rep)
}

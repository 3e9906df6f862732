// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package advice

import (
	"github.com/DataDog/sketches-go/ddsketch"
)

// Window is a sliding window over the samples of one series: the window is
// cut into slots that rotate, the oldest cleared when time enters a new
// one, and reads merge them, so an estimate covers between (slots-1)/slots
// of the window and the whole of it and forgets an incident within one
// window. Times are unix nanoseconds. Window is not safe for concurrent use.
type Window struct {
	span    int64 // nanoseconds per slot
	slots   []slot
	cur     int
	curEnd  int64
	lastObs int64
	cap     *shareCap // nil: no client share cap
}

type slot struct {
	ttft *Censored
	gap  *ddsketch.DDSketch
}

func newSlot() slot { return slot{ttft: NewCensored(), gap: NewSketch()} }

func (s slot) clear() {
	s.ttft.Clear()
	s.gap.Clear()
}

// NewWindow returns an empty window of the given length (nanoseconds) cut
// into slots (at least 1).
func NewWindow(window int64, slots int) *Window {
	slots = max(slots, 1)
	w := &Window{span: max(window/int64(slots), 1), slots: make([]slot, slots)}
	for i := range w.slots {
		w.slots[i] = newSlot()
	}
	return w
}

// CapClients bounds the share of the window one client's samples may hold
// (share.go); share outside (0, 1) removes the cap. At most maxClients are
// told apart, the others share one bucket. It forgets the tallies so far.
func (w *Window) CapClients(share float64, maxClients int) {
	w.cap = newShareCap(share, maxClients, len(w.slots))
}

// rotate moves the current slot to the one holding now. Time going
// backwards (spans arriving out of order) stays in the current slot.
func (w *Window) rotate(now int64) {
	if w.curEnd == 0 {
		w.curEnd = now + w.span
		return
	}
	if now < w.curEnd {
		return
	}
	steps := (now-w.curEnd)/w.span + 1
	if steps >= int64(len(w.slots)) {
		for _, s := range w.slots {
			s.clear()
		}
		if w.cap != nil {
			w.cap.clearAll()
		}
	} else {
		for range steps {
			w.cur = (w.cur + 1) % len(w.slots)
			w.slots[w.cur].clear()
			if w.cap != nil {
				w.cap.clearSlot(w.cur)
			}
		}
	}
	w.curEnd += steps * w.span
}

// ObserveTTFT records a time to first content (nanoseconds) seen at now.
func (w *Window) ObserveTTFT(now, ttft int64) {
	w.rotate(now)
	w.lastObs = now
	w.slots[w.cur].ttft.Add(float64(ttft))
}

// ObserveCensored records an attempt that ran elapsed nanoseconds without
// content, ending at now.
func (w *Window) ObserveCensored(now, elapsed int64) {
	w.rotate(now)
	w.lastObs = now
	w.slots[w.cur].ttft.AddCensored(float64(elapsed))
}

// ObserveGap records a gap between two content chunks (nanoseconds).
func (w *Window) ObserveGap(now, gap int64) {
	if gap <= 0 {
		return
	}
	w.rotate(now)
	w.lastObs = now
	// Add only fails on negative or NaN values, excluded above.
	_ = w.slots[w.cur].gap.Add(float64(gap))
}

// TakeTTFT reports whether client may add a TTFT sample (exact or
// censored) at now under the share cap, and counts it if so; the caller
// then observes it. Without a cap it always may.
func (w *Window) TakeTTFT(now int64, client string) bool { return w.take(now, client, kindTTFT) }

// TakeGap is TakeTTFT for one inter-chunk gap.
func (w *Window) TakeGap(now int64, client string) bool { return w.take(now, client, kindGap) }

func (w *Window) take(now int64, client string, kind int) bool {
	if w.cap == nil {
		return true
	}
	w.rotate(now)
	return w.cap.take(client, kind, w.cur)
}

// LastObserved is the time of the last sample, 0 before any.
func (w *Window) LastObserved() int64 { return w.lastObs }

// Merged merges the slots current at now into dst (which it clears first):
// the TTFT sample and the gap sketch of the whole window.
func (w *Window) Merged(now int64, dst *Merged) {
	w.rotate(now)
	dst.TTFT.Clear()
	dst.Gap.Clear()
	for _, s := range w.slots {
		dst.TTFT.MergeWith(s.ttft)
		// Merging sketches of one mapping cannot fail.
		_ = dst.Gap.MergeWith(s.gap)
	}
}

// Merged is a window read at one instant; reuse one across reads.
type Merged struct {
	TTFT *Censored
	Gap  *ddsketch.DDSketch
}

// NewMerged returns an empty read buffer.
func NewMerged() *Merged { return &Merged{TTFT: NewCensored(), Gap: NewSketch()} }

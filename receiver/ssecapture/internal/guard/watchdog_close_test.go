// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pausingClock is a fake clock whose next Now, once paused, waits for the
// test (so a watchdog's look can be held between its checks), and whose
// timers say when they are stopped.
type pausingClock struct {
	*clockwork.FakeClock
	paused  atomic.Bool
	entered chan struct{}
	release chan struct{}

	mu     sync.Mutex
	timers []*stopTimer
}

type stopTimer struct {
	clockwork.Timer
	stopped atomic.Bool
}

func (t *stopTimer) Stop() bool { t.stopped.Store(true); return t.Timer.Stop() }

func (c *pausingClock) Now() time.Time {
	if c.paused.CompareAndSwap(true, false) {
		c.entered <- struct{}{}
		<-c.release
	}
	return c.FakeClock.Now()
}

func (c *pausingClock) AfterFunc(d time.Duration, f func()) clockwork.Timer {
	t := &stopTimer{Timer: c.FakeClock.AfterFunc(d, f)}
	c.mu.Lock()
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	return t
}

func (c *pausingClock) armed() []*stopTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*stopTimer(nil), c.timers...)
}

// TestWatchdogArmsNoTimerAfterClose: a look under way when the body closes
// leaves no timer running after it (it would hold the call for a stall
// timeout, and fire on a closed stream).
func TestWatchdogArmsNoTimerAfterClose(t *testing.T) {
	h := newHarness(t, Rule{StallTimeout: time.Second, MaxAttempts: 1})
	pc := &pausingClock{FakeClock: h.clock, entered: make(chan struct{}), release: make(chan struct{})}
	h.guard = New(Settings{Default: h.guard.def.Rule, Clock: pc, AutoStall: h.guard.autoStall})
	_, _, resp, cc := h.commit(t, textFrame)
	cc.set(h.clock.Now(), true)
	h.blockUntil(t, 1)
	h.clock.Advance(500 * time.Millisecond)
	cc.set(h.clock.Now(), true) // the deadline moves on: the next look re-arms

	pc.paused.Store(true)
	h.clock.Advance(500 * time.Millisecond)
	select {
	case <-pc.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the watchdog did not look")
	}
	require.NoError(t, resp.Body.Close()) // while the look is under way
	close(pc.release)

	require.Eventually(t, func() bool { return len(pc.armed()) == 2 }, 5*time.Second, time.Millisecond, "the look re-arms")
	re := pc.armed()[1]
	assert.Eventually(t, re.stopped.Load, time.Second, time.Millisecond, "a timer armed after Close is stopped")
}

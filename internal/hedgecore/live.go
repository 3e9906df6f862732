// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
)

// Live is the Source of a race run over the network: the attempts' readers
// send their events on a channel, stamped with the time they arrived; a
// clockwork timer fires the race's deadlines; the end of the call's
// context gives the call up.
type Live[E any] struct {
	ctx     context.Context
	clock   clockwork.Clock
	now     func() int64
	events  <-chan E
	timer   clockwork.Timer
	armedAt int64 // deadline the timer is set for, 0 when stopped
}

var _ Source[struct{}] = (*Live[struct{}])(nil)

// NewLive returns the source of a call that ends with ctx, whose time in
// unix nanoseconds is now() on clock's timers, and whose attempts' events
// arrive on events.
func NewLive[E any](ctx context.Context, clock clockwork.Clock, now func() int64, events <-chan E) *Live[E] {
	return &Live[E]{ctx: ctx, clock: clock, now: now, events: events}
}

// Wait arms the timer for deadline and waits for an event, the timer or
// the context.
func (l *Live[E]) Wait(deadline int64) Wake[E] {
	l.arm(deadline)
	var tick <-chan time.Time
	if l.armedAt != 0 {
		tick = l.timer.Chan()
	}
	select {
	case e := <-l.events:
		return Wake[E]{Kind: WakeEvent, Event: e}
	case <-tick:
		l.armedAt = 0
		return Wake[E]{Kind: WakeDeadline, Now: l.now()}
	case <-l.ctx.Done():
		return Wake[E]{Kind: WakeAbort, Err: context.Cause(l.ctx)}
	}
}

// arm sets the timer to deadline; 0 stops it.
func (l *Live[E]) arm(deadline int64) {
	if deadline == l.armedAt {
		return
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	l.armedAt = deadline
	if deadline == 0 {
		return
	}
	wait := max(time.Duration(deadline-l.now()), 0)
	if l.timer == nil {
		l.timer = l.clock.NewTimer(wait)
	} else {
		l.timer.Reset(wait)
	}
}

// Stop stops the timer; the source may not be waited on again.
func (l *Live[E]) Stop() {
	if l.timer != nil {
		l.timer.Stop()
	}
	l.armedAt = 0
}

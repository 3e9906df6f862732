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
// context gives the call up. The race sees its events and deadlines in the
// order of their times, whatever order the channel and the timer were
// ready in: events wait on the channel while the race's caller is busy (a
// slow reader of the stream), and a deadline that passed meanwhile must
// not win over an event that arrived before it, nor an event that arrived
// after it over the deadline.
type Live[E Timed] struct {
	ctx     context.Context
	clock   clockwork.Clock
	now     func() int64
	events  <-chan E
	timer   clockwork.Timer
	armedAt int64 // deadline the timer is set for, 0 when stopped
	// held is an event taken from the channel after a deadline that came
	// before it: the next Wait returns it.
	held    E
	hasHeld bool
	// given is the last deadline Wait returned: a held event comes next.
	given int64
}

// Timed is an event stamped with the time it arrived (unix nanoseconds,
// on the Live source's clock).
type Timed interface{ When() int64 }

// NewLive returns the source of a call that ends with ctx, whose time in
// unix nanoseconds is now() on clock's timers, and whose attempts' events
// arrive on events.
func NewLive[E Timed](ctx context.Context, clock clockwork.Clock, now func() int64, events <-chan E) *Live[E] {
	return &Live[E]{ctx: ctx, clock: clock, now: now, events: events}
}

// Wait arms the timer for deadline and waits for an event, the timer or
// the context.
func (l *Live[E]) Wait(deadline int64) Wake[E] {
	l.arm(deadline)
	if l.hasHeld {
		var zero E
		e := l.held
		l.held, l.hasHeld = zero, false
		return l.inOrder(e)
	}
	var tick <-chan time.Time
	if l.armedAt != 0 {
		tick = l.timer.Chan()
	}
	select {
	case e := <-l.events:
		return l.inOrder(e)
	case <-tick:
		fired := l.armedAt
		l.armedAt = 0
		// An event that waited on the channel meanwhile may have come
		// before the deadline.
		select {
		case e := <-l.events:
			if e.When() <= fired {
				return Wake[E]{Kind: WakeEvent, Event: e}
			}
			l.held, l.hasHeld = e, true
		default:
		}
		l.given = fired
		return Wake[E]{Kind: WakeDeadline, Now: l.now()}
	case <-l.ctx.Done():
		return Wake[E]{Kind: WakeAbort, Err: context.Cause(l.ctx)}
	}
}

// inOrder returns e, or the deadline armed when it passed before e
// arrived (e is then held for the next Wait).
func (l *Live[E]) inOrder(e E) Wake[E] {
	if l.armedAt == 0 || e.When() <= l.armedAt || l.armedAt <= l.given {
		return Wake[E]{Kind: WakeEvent, Event: e}
	}
	l.held, l.hasHeld = e, true
	l.timer.Stop()
	l.given, l.armedAt = l.armedAt, 0
	return Wake[E]{Kind: WakeDeadline, Now: l.now()}
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

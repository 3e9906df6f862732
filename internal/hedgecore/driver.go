// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

// WakeKind says what ended a driver's wait.
type WakeKind uint8

const (
	// WakeEvent: an attempt's event came first.
	WakeEvent WakeKind = iota
	// WakeDeadline: the race's deadline came first.
	WakeDeadline
	// WakeAbort: the call was given up from outside (the caller's context).
	WakeAbort
	// WakeIdle: nothing can happen any more (a simulation ran dry); the
	// race is left as it is.
	WakeIdle
)

// Wake is what ended a driver's wait.
type Wake[E any] struct {
	Kind WakeKind
	// Event is the attempt's event (WakeEvent); it carries its own time.
	Event E
	// Now is when the deadline was reached (WakeDeadline).
	Now int64
	// Err is why the call was given up (WakeAbort).
	Err error
}

// Source is where a driver's events come from and what keeps its time: the
// network and a clock for the hedge client and the proxy's guard (Live), a
// simulated schedule for cmd/hedgesim.
type Source[E any] interface {
	// Wait blocks until the next event or until deadline (unix
	// nanoseconds; 0: none), whichever comes first.
	Wait(deadline int64) Wake[E]
}

// Carrier carries out a race's decisions on its attempts, real or
// simulated: it hands their events to the race (Race.Content, Complete,
// Fail...), and starts and cancels them when the race says so.
type Carrier[E any] interface {
	Handle(e E)
	Launch(attempt int)
	Cancel(attempt int)
}

// Driver is the one loop that runs a Race: wait for whichever comes first
// of an attempt's event, the race's next deadline and the end of the call
// from outside; hand it to the race; carry out the race's actions. The
// hedge client, the proxy's guard and cmd/hedgesim all run their races
// through it, so they take the same decisions in the same order; the race
// stays a pure state machine.
type Driver[E any] struct {
	race *Race
	src  Source[E]
	car  Carrier[E]
}

// NewDriver returns the driver of r, whose events come from src and whose
// actions car carries out.
func NewDriver[E any](r *Race, src Source[E], car Carrier[E]) Driver[E] {
	return Driver[E]{race: r, src: src, car: car}
}

// Start launches the primary at now; the race has been Reset.
func (d *Driver[E]) Start(now int64) {
	d.race.Start(now)
	d.Apply()
}

// Step waits once and hands what came to the race, then carries out its
// actions. It reports false when the source is idle: nothing can happen any
// more.
func (d *Driver[E]) Step() bool {
	w := d.src.Wait(d.race.Deadline())
	switch w.Kind {
	case WakeEvent:
		d.car.Handle(w.Event)
	case WakeDeadline:
		d.race.Advance(w.Now)
	case WakeAbort:
		d.race.Abort(w.Err)
	case WakeIdle:
		return false
	}
	d.Apply()
	return true
}

// Abort ends the call from outside and carries out the cancellations.
func (d *Driver[E]) Abort(err error) {
	d.race.Abort(err)
	d.Apply()
}

// Apply carries out the actions the race emitted since the last call.
func (d *Driver[E]) Apply() {
	for _, act := range d.race.Actions() {
		switch act.Kind {
		case Launch:
			d.car.Launch(act.Attempt)
		case Cancel:
			d.car.Cancel(act.Attempt)
		}
	}
}

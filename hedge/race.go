package hedge

import "errors"

// maxAttemptsLimit is gRPC's clamp on maxAttempts (gRFC A6).
const maxAttemptsLimit = 5

// errStalled is the race's verdict when the watchdog ends a call; the driver
// turns it into a *StallError with the call's details.
var errStalled = errors.New("stalled")

// trigger is why an attempt was started (llm.hedge.trigger).
type trigger uint8

const (
	triggerPrimary trigger = iota
	triggerTTFT
	triggerStall
	triggerError
)

func (t trigger) String() string {
	switch t {
	case triggerTTFT:
		return "ttft"
	case triggerStall:
		return "stall"
	case triggerError:
		return "error"
	}
	return ""
}

type attemptState uint8

const (
	attemptRunning attemptState = iota
	attemptWon
	attemptCancelled
	attemptFailed
)

// attempt is the race's view of one request to one source.
type attempt struct {
	source       int
	trigger      trigger
	continuation bool
	state        attemptState
	start        int64
	first        int64
	last         int64
	chunks       int
	// stallHedged is set once the current silence has launched a stall hedge,
	// so one silence launches at most one.
	stallHedged bool
}

type actionKind uint8

const (
	actionLaunch actionKind = iota
	actionCancel
)

// action is what the race asks its driver to do.
type action struct {
	kind    actionKind
	attempt int
}

// errorClass sorts attempt failures (SPEC section 8).
type errorClass uint8

const (
	// classRetryable: connection errors, 408, 429, 5xx. The next attempt
	// starts at once.
	classRetryable errorClass = iota
	// classFatal: other 4xx. The request itself is wrong; no source will
	// answer it, so the call ends.
	classFatal
	// classStalled: the watchdog gave up on the attempt.
	classStalled
)

// race is the decision core of one logical call: which attempt starts when,
// which one is committed, which ones are cancelled, when the call ends. It is
// a pure state machine over explicit timestamps (unix nanoseconds): no
// goroutine, no clock, no allocation. The Hedger drives it from network
// events and a clockwork timer; cmd/hedgesim drives the very same code from a
// discrete-event simulation.
type race struct {
	p        *policy
	buffered bool

	attempts [maxAttemptsLimit]attempt
	n        int
	next     int // next source, round robin from the primary

	// committed is the attempt whose content the caller gets: in streaming
	// delivery the one that delivered first (or the continuation that took
	// over); in buffered delivery the leader, replaced by whichever attempt
	// completes first.
	committed int
	hedgeAt   int64 // next TTFT hedge, 0 when none is due
	// lastDelivered is the time of the last chunk the caller saw (streaming).
	lastDelivered int64
	// continuable is false once a non-text chunk was delivered: a partial
	// tool call or reasoning block cannot be resent as an assistant prefix.
	continuable bool

	done    bool
	winner  int
	err     error
	errFrom int // attempt whose failure ended the call, -1 if none

	acts  [2 * maxAttemptsLimit]action
	nacts int
}

func (r *race) reset(p *policy, buffered bool) {
	*r = race{p: p, buffered: buffered, committed: -1, winner: -1, errFrom: -1, continuable: true}
}

// actions returns and clears the actions emitted by the last event.
func (r *race) actions() []action {
	a := r.acts[:r.nacts]
	r.nacts = 0
	return a
}

func (r *race) emit(kind actionKind, i int) {
	r.acts[r.nacts] = action{kind: kind, attempt: i}
	r.nacts++
}

// start launches the primary.
func (r *race) start(now int64) {
	r.launch(now, triggerPrimary, false)
}

// launch starts one more attempt if the attempt limit and, for anything but
// the primary, the budget allow it.
func (r *race) launch(now int64, t trigger, continuation bool) bool {
	if r.done || r.n >= r.p.maxAttempts {
		return false
	}
	if t != triggerPrimary && !r.p.budget.allow() {
		return false
	}
	i := r.n
	r.attempts[i] = attempt{source: r.next % r.p.sources, trigger: t, continuation: continuation, start: now}
	r.next++
	r.n++
	r.emit(actionLaunch, i)
	if r.committed < 0 && r.n < r.p.maxAttempts {
		r.hedgeAt = now + r.p.delay(r.attempts[i].source)
	}
	return true
}

// content records one content chunk of attempt i and reports whether it goes
// to the caller now (streaming delivery, committed attempt).
func (r *race) content(i int, now int64, text bool) bool {
	a := &r.attempts[i]
	if r.done || a.state != attemptRunning {
		return false
	}
	if a.chunks == 0 {
		a.first = now
		if !a.continuation {
			r.p.observe(a.source, now, now-a.start)
		}
	}
	a.chunks++
	a.last = now
	a.stallHedged = false
	switch {
	case r.committed < 0:
		// First content of the call: commit. The others have delivered
		// nothing, so cancelling them loses nothing.
		r.committed = i
		r.hedgeAt = 0
		r.cancelAllBut(i)
	case r.buffered:
		return false
	case i != r.committed:
		if !a.continuation {
			return false
		}
		// A continuation delivered before the stalled stream resumed: it
		// takes over the stream, the stalled attempt is dropped for good.
		r.cancel(r.committed)
		r.committed = i
	default:
		// The committed stream resumed before any continuation spoke: first
		// delivered wins, the continuations are dropped.
		for j := 0; j < r.n; j++ {
			if j != i && r.attempts[j].state == attemptRunning && r.attempts[j].chunks == 0 {
				r.cancel(j)
			}
		}
	}
	if r.buffered {
		return false
	}
	r.lastDelivered = now
	if !text {
		r.continuable = false
	}
	return true
}

// complete records the normal end of attempt i's stream.
func (r *race) complete(i int, now int64) {
	a := &r.attempts[i]
	if r.done || a.state != attemptRunning {
		return
	}
	if !r.buffered && r.committed >= 0 && i != r.committed && !a.continuation {
		return
	}
	a.state = attemptWon
	r.committed = i
	r.winner = i
	r.done = true
	r.cancelAllBut(i)
	r.p.budget.success()
}

// fail records that attempt i ended with an error of the given class.
func (r *race) fail(i int, now int64, class errorClass, err error) {
	a := &r.attempts[i]
	if r.done || a.state != attemptRunning {
		return
	}
	a.state = attemptFailed
	if class == classFatal {
		// Before commit the request itself is wrong and no source will take
		// it; after commit only the committed attempt's verdict matters.
		if r.committed < 0 || r.committed == i || !r.running() {
			r.finish(i, err)
		}
		return
	}
	r.p.budget.failure()
	t := triggerError
	if class == classStalled {
		t = triggerStall
	}
	switch {
	case r.committed < 0 || r.buffered:
		r.launch(now, t, false)
	case i == r.committed && r.canContinue() && !r.continuing():
		r.launch(now, t, true)
	}
	if !r.running() {
		r.finish(i, err)
	}
}

// advance fires the timers due at now: the TTFT hedge, the stall hedges and
// the watchdog.
func (r *race) advance(now int64) {
	if r.done {
		return
	}
	if r.committed < 0 && r.hedgeAt > 0 && now >= r.hedgeAt {
		r.hedgeAt = 0
		r.launch(now, triggerTTFT, false)
	}
	if r.committed < 0 {
		return
	}
	if !r.buffered {
		if r.p.stallTimeout > 0 && now-r.lastDelivered >= r.p.stallTimeout {
			r.finish(r.committed, errStalled)
			return
		}
		c := &r.attempts[r.committed]
		if r.stallHedgeDue(c, now) && r.canContinue() {
			c.stallHedged = true
			if !r.continuing() {
				r.launch(now, triggerStall, true)
			}
		}
		return
	}
	for i := 0; i < r.n && !r.done; i++ {
		a := &r.attempts[i]
		if a.state != attemptRunning || a.chunks == 0 {
			continue
		}
		if r.p.stallTimeout > 0 && now-a.last >= r.p.stallTimeout {
			r.emit(actionCancel, i) // its reader still waits on the silent stream
			r.fail(i, now, classStalled, errStalled)
			continue
		}
		if r.stallHedgeDue(a, now) {
			a.stallHedged = true
			r.launch(now, triggerStall, false)
		}
	}
}

func (r *race) stallHedgeDue(a *attempt, now int64) bool {
	return r.p.stallAfter > 0 && a.state == attemptRunning && a.chunks > 0 && !a.stallHedged &&
		now-a.last >= r.p.stallAfter
}

// deadline is the next instant at which advance has something to do, or 0.
func (r *race) deadline() int64 {
	if r.done {
		return 0
	}
	if r.committed < 0 {
		return r.hedgeAt
	}
	var next int64
	earliest := func(t int64) {
		if next == 0 || t < next {
			next = t
		}
	}
	if !r.buffered {
		if r.p.stallTimeout > 0 {
			earliest(r.lastDelivered + r.p.stallTimeout)
		}
		c := &r.attempts[r.committed]
		if r.canContinue() && r.p.stallAfter > 0 && c.state == attemptRunning && !c.stallHedged {
			earliest(c.last + r.p.stallAfter)
		}
		return next
	}
	for i := 0; i < r.n; i++ {
		a := &r.attempts[i]
		if a.state != attemptRunning || a.chunks == 0 {
			continue
		}
		if r.p.stallTimeout > 0 {
			earliest(a.last + r.p.stallTimeout)
		}
		if r.p.stallAfter > 0 && !a.stallHedged {
			earliest(a.last + r.p.stallAfter)
		}
	}
	return next
}

// abort ends the call from outside (the caller's context).
func (r *race) abort(err error) {
	if !r.done {
		r.finish(-1, err)
	}
}

func (r *race) canContinue() bool {
	return r.p.continuation && r.continuable && !r.buffered
}

// continuing reports whether a continuation is running and silent.
func (r *race) continuing() bool {
	for i := 0; i < r.n; i++ {
		a := &r.attempts[i]
		if a.continuation && a.state == attemptRunning && a.chunks == 0 {
			return true
		}
	}
	return false
}

func (r *race) running() bool {
	for i := 0; i < r.n; i++ {
		if r.attempts[i].state == attemptRunning {
			return true
		}
	}
	return false
}

func (r *race) finish(from int, err error) {
	r.done = true
	r.err = err
	r.errFrom = from
	r.cancelAllBut(-1)
}

func (r *race) cancelAllBut(keep int) {
	for j := 0; j < r.n; j++ {
		if j != keep && r.attempts[j].state == attemptRunning {
			r.cancel(j)
		}
	}
}

func (r *race) cancel(i int) {
	r.attempts[i].state = attemptCancelled
	r.emit(actionCancel, i)
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

import (
	"errors"

	"github.com/streamstall/streamstall/internal/semconv"
)

// MaxAttempts is gRPC's clamp on maxAttempts (gRFC A6).
const MaxAttempts = 5

// ErrStalled is the race's verdict when the watchdog ends a call; the driver
// turns it into a *StallError with the call's details.
var ErrStalled = errors.New("stalled")

// ErrTTFTTimeout is the race's verdict when the last attempt left was given
// up for want of content within the policy's TTFT timeout.
var ErrTTFTTimeout = errors.New("no content within the ttft timeout")

// Trigger is why an attempt was started (llm.hedge.trigger).
type Trigger uint8

const (
	TriggerPrimary Trigger = iota // no trigger: the primary
	TriggerTTFT
	TriggerStall
	TriggerError
)

func (t Trigger) String() string {
	switch t {
	case TriggerTTFT:
		return semconv.HedgeTriggerTTFT
	case TriggerStall:
		return semconv.HedgeTriggerStall
	case TriggerError:
		return semconv.HedgeTriggerError
	}
	return ""
}

// State is where an attempt is.
type State uint8

const (
	Running State = iota
	Won
	Cancelled // a loser: dropped, never resurrected
	Failed
)

// Attempt is the race's view of one request to one source.
type Attempt struct {
	Source       int
	Trigger      Trigger
	Continuation bool
	State        State
	Start        int64
	First        int64
	Last         int64
	Chunks       int
	// Delay is the hedge delay armed when the attempt started in the TTFT
	// race (nanoseconds), and DelaySource where it came from; DelayNone
	// for attempts started after commit.
	Delay       int64
	DelaySource DelaySource
	// stallHedged is set once the current silence has launched a stall hedge,
	// so one silence launches at most one.
	stallHedged bool
	// answered is set once the attempt delivered an answer chunk (text or
	// tool call): its watchdog no longer spares reasoning.
	answered bool
	// RetryAt is when the source asked, in a failed attempt's answer
	// (Retry-After), to be called again: until then no attempt of the call
	// goes to it (FailAfter). 0 when it asked nothing.
	RetryAt int64
}

// ActionKind says whether an action starts or cancels an attempt.
type ActionKind uint8

const (
	Launch ActionKind = iota
	Cancel
)

// Action is what the race asks its driver to do.
type Action struct {
	Kind    ActionKind
	Attempt int
}

// Class sorts attempt failures (docs/contract.md section 8).
type Class uint8

const (
	// Retryable: connection errors, 408, 429, 5xx. The next attempt
	// starts at once.
	Retryable Class = iota
	// Fatal: other 4xx. The request itself is wrong; no source will
	// answer it, so the call ends.
	Fatal
	// Stalled: the watchdog gave up on the attempt.
	Stalled
	// TTFTTimedOut: the attempt delivered no content within the TTFT
	// timeout. The next attempt starts at once, as for Retryable.
	TTFTTimedOut
	// Refused: the caller's own credential was refused (an auth or quota
	// error of the key the call carries). No source may serve the call on
	// another's credential: it ends at once, whatever else runs.
	Refused
)

// Race is the decision core of one logical call: which attempt starts when,
// which one is committed, which ones are cancelled, when the call ends. It is
// a pure state machine over explicit timestamps (unix nanoseconds): no
// goroutine, no clock, no allocation. One loop drives it (Driver): the
// Hedger and the proxy's guard from network events and a clockwork timer
// (Live), cmd/hedgesim from a discrete-event simulation.
type Race struct {
	p        *Policy
	buffered bool

	attempts [MaxAttempts]Attempt
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
	// answered is set once an answer chunk (text or tool call) was
	// delivered (streaming).
	answered bool
	// budget is the bucket the call's hedges and retries draw on: the
	// policy's, or the caller's client's (DrawOn).
	budget *Budget

	done    bool
	winner  int
	err     error
	errFrom int // attempt whose failure ended the call, -1 if none

	acts  [2 * MaxAttempts]Action
	nacts int
	now   int64 // time of the event being handled, 0 in Abort
	// refused counts the attempts the budget did not allow, and
	// refusedShared those of them the shared bucket refused.
	refused, refusedShared int
}

// Reset prepares r for a new call under p.
func (r *Race) Reset(p *Policy, buffered bool) {
	*r = Race{p: p, buffered: buffered, committed: -1, winner: -1, errFrom: -1, continuable: true, budget: p.budget}
}

// DrawOn makes the call's hedges and retries draw on b instead of the
// policy's bucket (nil: no budget): the bucket of the client the call is
// for (ClientBudgets). Call it after Reset, before Start.
func (r *Race) DrawOn(b *Budget) { r.budget = b }

// Actions returns and clears the actions emitted since the last call.
func (r *Race) Actions() []Action {
	a := r.acts[:r.nacts]
	r.nacts = 0
	return a
}

func (r *Race) emit(kind ActionKind, i int) {
	r.acts[r.nacts] = Action{Kind: kind, Attempt: i}
	r.nacts++
}

// Start launches the primary at now.
func (r *Race) Start(now int64) {
	r.launch(now, TriggerPrimary, false)
}

// launch starts one more attempt if the attempt limit and, for anything but
// the primary, the budget allow it.
func (r *Race) launch(now int64, t Trigger, continuation bool) {
	if r.done || r.n >= r.p.maxAttempts {
		return
	}
	src, ok := r.nextSource(now)
	if !ok {
		return // every source asked to wait: none is called against its answer
	}
	if t != TriggerPrimary {
		if ok, byShared := r.budget.allow(); !ok {
			r.refused++
			if byShared {
				r.refusedShared++
			}
			return
		}
	}
	i := r.n
	a := &r.attempts[i]
	*a = Attempt{Source: src, Trigger: t, Continuation: continuation, Start: now}
	r.next = src + 1
	r.n++
	if r.committed < 0 && !r.p.noTTFTHedge {
		a.Delay, a.DelaySource = r.p.DelayFrom(a.Source)
		if r.n < r.p.maxAttempts {
			r.hedgeAt = now + a.Delay
		}
	}
	r.emit(Launch, i)
}

// nextSource is the source the next attempt goes to: round robin from the
// one after the last attempt's, skipping the sources that asked to wait
// past now; false when every source asked to.
func (r *Race) nextSource(now int64) (int, bool) {
	for k := 0; k < r.p.sources; k++ {
		if s := (r.next + k) % r.p.sources; !r.waits(s, now) {
			return s, true
		}
	}
	return 0, false
}

// waits reports whether an attempt on source s asked to wait past now.
func (r *Race) waits(s int, now int64) bool {
	for j := 0; j < r.n; j++ {
		if a := &r.attempts[j]; a.Source == s && a.RetryAt > now {
			return true
		}
	}
	return false
}

// Content records one answer chunk (text, or a tool call when text is
// false) of attempt i and reports whether it goes to the caller now
// (streaming delivery, committed attempt).
func (r *Race) Content(i int, now int64, text bool) bool {
	return r.content(i, now, text, true, true)
}

// CommitUnseen commits attempt i, as its first content chunk would, when
// the caller must pass its stream on without having seen that chunk (its
// frames cannot be read, or what it sent before content was more than the
// caller may hold). Its time to first content is then only known to be
// past now: a censored sample, as for a loser cancelled before content,
// never an observation that would teach the policy the time to its
// headers as a TTFT.
func (r *Race) CommitUnseen(i int, now int64) bool {
	return r.content(i, now, false, true, false)
}

// Reasoning records one reasoning chunk of attempt i, as Content does: it
// commits and counts for the TTFT like any content, but it cannot be
// continued as text, and until an answer chunk comes the watchdog allows
// the policy's reasoning timeout.
func (r *Race) Reasoning(i int, now int64) bool {
	return r.content(i, now, false, false, true)
}

// content records a content chunk of attempt i; seen says whether it was
// one (see CommitUnseen).
func (r *Race) content(i int, now int64, text, answer, seen bool) bool {
	r.now = now
	a := &r.attempts[i]
	if r.done || a.State != Running {
		return false
	}
	if a.Chunks == 0 {
		a.First = now
		switch {
		case a.Continuation:
		case seen:
			r.p.Observe(a.Source, now, now-a.Start)
		default:
			r.p.observeCensored(a.Source, now, now-a.Start)
		}
	}
	a.Chunks++
	a.Last = now
	a.stallHedged = false
	a.answered = a.answered || answer
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
		if !a.Continuation {
			return false
		}
		// A continuation delivered before the stalled stream resumed: it
		// takes over the stream, the stalled attempt is dropped for good
		// (one that broke stays failed).
		if r.attempts[r.committed].State == Running {
			r.cancel(r.committed)
		}
		r.committed = i
	default:
		// The committed stream resumed before any continuation spoke: first
		// delivered wins, the continuations are dropped.
		for j := 0; j < r.n; j++ {
			if j != i && r.attempts[j].State == Running && r.attempts[j].Chunks == 0 {
				r.cancel(j)
			}
		}
	}
	if r.buffered {
		return false
	}
	r.lastDelivered = now
	r.answered = r.answered || answer
	if !text {
		r.continuable = false
	}
	return true
}

// Complete records the normal end of attempt i's stream.
func (r *Race) Complete(i int, now int64) {
	r.now = now
	a := &r.attempts[i]
	if r.done || a.State != Running {
		return
	}
	if !r.buffered && r.committed >= 0 && i != r.committed && !a.Continuation {
		return
	}
	a.State = Won
	r.committed = i
	r.winner = i
	r.done = true
	r.cancelAllBut(i)
	r.budget.Success()
}

// FailAfter records attempt i's failure as Fail does, when its source asked
// not to be called again before retryAt (unix nanoseconds; a Retry-After):
// until then the call's next attempts go to other sources, and when every
// source asked to wait no attempt starts, so the call ends with this
// failure once no other attempt runs. The caller then gets the source's
// answer, its Retry-After with it, instead of a retry that source refused
// in advance.
func (r *Race) FailAfter(i int, now int64, class Class, err error, retryAt int64) {
	if a := &r.attempts[i]; !r.done && a.State == Running && retryAt > now {
		a.RetryAt = retryAt
	}
	r.Fail(i, now, class, err)
}

// Fail records that attempt i ended with an error of the given class.
func (r *Race) Fail(i int, now int64, class Class, err error) {
	r.now = now
	a := &r.attempts[i]
	if r.done || a.State != Running {
		return
	}
	a.State = Failed
	if class == Refused {
		r.finish(i, err)
		return
	}
	if class == Fatal {
		// A 4xx is that source's refusal: a wrong request, or a model or
		// key the source does not have (an alternate of another provider).
		// No attempt starts on it; the call ends with it once no other
		// attempt can still answer, or when the committed stream had it
		// (in buffered delivery nothing was delivered: the leader is no
		// committed stream, and a running hedge may still answer).
		if (!r.buffered && r.committed == i) || !r.running() {
			r.finish(i, err)
		}
		return
	}
	r.budget.Failure()
	t := TriggerError
	switch class {
	case Stalled:
		t = TriggerStall
	case TTFTTimedOut:
		t = TriggerTTFT
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

// Advance fires the timers due at now: the TTFT hedge, the stall hedges and
// the watchdog.
func (r *Race) Advance(now int64) {
	r.now = now
	if r.done {
		return
	}
	if r.committed < 0 && r.p.ttftTimeout > 0 {
		// Timeouts first: an attempt given up now starts the next one at
		// once, which re-arms the hedge delay from now.
		for i := 0; i < r.n && !r.done; i++ {
			a := &r.attempts[i]
			if a.State == Running && now-a.Start >= r.p.ttftTimeout {
				// Its TTFT is only known to exceed the timeout: a
				// censored sample, as for a cancelled loser.
				r.p.observeCensored(a.Source, now, now-a.Start)
				r.emit(Cancel, i) // its reader still waits on the silent attempt
				r.Fail(i, now, TTFTTimedOut, ErrTTFTTimeout)
			}
		}
		if r.done {
			return
		}
	}
	if r.committed < 0 && r.hedgeAt > 0 && now >= r.hedgeAt {
		r.hedgeAt = 0
		r.launch(now, TriggerTTFT, false)
	}
	if r.committed < 0 {
		return
	}
	if !r.buffered {
		if d := r.p.StallDeadline(r.lastDelivered, r.answered); d > 0 && now >= d {
			r.budget.Failure()
			r.finish(r.committed, ErrStalled)
			return
		}
		c := &r.attempts[r.committed]
		if r.stallHedgeDue(c, now) && r.canContinue() {
			c.stallHedged = true
			if !r.continuing() {
				r.launch(now, TriggerStall, true)
			}
		}
		return
	}
	for i := 0; i < r.n && !r.done; i++ {
		a := &r.attempts[i]
		if a.State != Running || a.Chunks == 0 {
			continue
		}
		if d := r.p.StallDeadline(a.Last, a.answered); d > 0 && now >= d {
			r.emit(Cancel, i) // its reader still waits on the silent stream
			r.Fail(i, now, Stalled, ErrStalled)
			continue
		}
		if r.stallHedgeDue(a, now) {
			a.stallHedged = true
			r.launch(now, TriggerStall, false)
		}
	}
}

func (r *Race) stallHedgeDue(a *Attempt, now int64) bool {
	return r.p.stallAfter > 0 && a.State == Running && a.Chunks > 0 && !a.stallHedged &&
		now-a.Last >= r.p.stallAfter
}

// Deadline is the next instant at which Advance has something to do, or 0.
func (r *Race) Deadline() int64 {
	if r.done {
		return 0
	}
	var next int64
	earliest := func(t int64) {
		if next == 0 || t < next {
			next = t
		}
	}
	if r.committed < 0 {
		if r.hedgeAt > 0 {
			earliest(r.hedgeAt)
		}
		if r.p.ttftTimeout > 0 {
			for i := 0; i < r.n; i++ {
				if a := &r.attempts[i]; a.State == Running {
					earliest(a.Start + r.p.ttftTimeout)
				}
			}
		}
		return next
	}
	if !r.buffered {
		if d := r.p.StallDeadline(r.lastDelivered, r.answered); d > 0 {
			earliest(d)
		}
		c := &r.attempts[r.committed]
		if r.canContinue() && r.p.stallAfter > 0 && c.State == Running && !c.stallHedged {
			earliest(c.Last + r.p.stallAfter)
		}
		return next
	}
	for i := 0; i < r.n; i++ {
		a := &r.attempts[i]
		if a.State != Running || a.Chunks == 0 {
			continue
		}
		if d := r.p.StallDeadline(a.Last, a.answered); d > 0 {
			earliest(d)
		}
		if r.p.stallAfter > 0 && !a.stallHedged {
			earliest(a.Last + r.p.stallAfter)
		}
	}
	return next
}

// Abort ends the call from outside (the caller's context).
func (r *Race) Abort(err error) {
	r.now = 0 // the caller gave up: its cancellations say nothing about the sources
	if !r.done {
		r.finish(-1, err)
	}
}

func (r *Race) canContinue() bool {
	return r.p.continuation && r.continuable && !r.buffered
}

// continuing reports whether a continuation is running and silent.
func (r *Race) continuing() bool {
	for i := 0; i < r.n; i++ {
		a := &r.attempts[i]
		if a.Continuation && a.State == Running && a.Chunks == 0 {
			return true
		}
	}
	return false
}

func (r *Race) running() bool {
	for i := 0; i < r.n; i++ {
		if r.attempts[i].State == Running {
			return true
		}
	}
	return false
}

func (r *Race) finish(from int, err error) {
	r.done = true
	r.err = err
	r.errFrom = from
	r.cancelAllBut(-1)
}

func (r *Race) cancelAllBut(keep int) {
	for j := 0; j < r.n; j++ {
		if j != keep && r.attempts[j].State == Running {
			r.cancel(j)
		}
	}
}

func (r *Race) cancel(i int) {
	a := &r.attempts[i]
	a.State = Cancelled
	r.emit(Cancel, i)
	if a.Chunks == 0 && !a.Continuation && r.now > 0 {
		// A loser cancelled before its first content is a censored sample:
		// its TTFT exceeds the time it ran. See DelayEstimator.ObserveCensored.
		r.p.observeCensored(a.Source, r.now, r.now-a.Start)
	}
}

// Attempt returns attempt i (0 <= i < Attempts()).
func (r *Race) Attempt(i int) *Attempt { return &r.attempts[i] }

// Attempts counts the attempts started.
func (r *Race) Attempts() int { return r.n }

// Buffered reports whether the call is in buffered delivery.
func (r *Race) Buffered() bool { return r.buffered }

// Done reports whether the call has ended.
func (r *Race) Done() bool { return r.done }

// Winner is the attempt that completed the call, -1 if none.
func (r *Race) Winner() int { return r.winner }

// Committed is the attempt whose content the caller gets, -1 before any.
func (r *Race) Committed() int { return r.committed }

// Err is the error that ended the call: ErrStalled for the watchdog, the
// attempt's error otherwise, nil after success.
func (r *Race) Err() error { return r.err }

// ErrFrom is the attempt whose failure ended the call, -1 if none.
func (r *Race) ErrFrom() int { return r.errFrom }

// Refused counts the attempts of the call that the budget did not allow.
func (r *Race) Refused() int { return r.refused }

// RefusedShared counts the refused attempts that the shared bucket of
// ClientBudgets refused while the client's own bucket allowed them.
func (r *Race) RefusedShared() int { return r.refusedShared }

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

const ms = int64(time.Millisecond)

type option func(*Config)

func stallTimeout(d time.Duration) option { return func(c *Config) { c.StallTimeout = d } }
func stallAfter(d time.Duration) option   { return func(c *Config) { c.StallAfter = d } }
func continuation() option                { return func(c *Config) { c.Continuation = true } }
func maxAttempts(n int) option            { return func(c *Config) { c.MaxAttempts = n } }
func budget(maxTokens, ratio float64) option {
	return func(c *Config) { c.MaxTokens, c.TokenRatio = maxTokens, ratio }
}

// testPolicy is a fixed 100 ms delay over three sources, three attempts, no
// watchdog and no budget, changed by opts.
func testPolicy(t *testing.T, opts ...option) *Policy {
	t.Helper()
	cfg := Config{Sources: 3, Delay: 100 * time.Millisecond, MaxAttempts: 3}
	for _, o := range opts {
		o(&cfg)
	}
	return NewPolicy(cfg)
}

func newRace(p *Policy, buffered bool) *Race {
	r := &Race{}
	r.Reset(p, buffered)
	return r
}

// acts renders the pending actions as "+i" (launch) and "-i" (cancel).
func acts(r *Race) []string {
	var out []string
	for _, a := range r.Actions() {
		sign := "+"
		if a.Kind == Cancel {
			sign = "-"
		}
		out = append(out, sign+string(rune('0'+a.Attempt)))
	}
	return out
}

func TestRaceTTFTHedgeFirstDeliveredWins(t *testing.T) {
	r := newRace(testPolicy(t), false)
	r.Start(0)
	assert.Equal(t, []string{"+0"}, acts(r))
	assert.Equal(t, 100*ms, r.Deadline())

	r.Advance(99 * ms)
	assert.Empty(t, acts(r), "no hedge before the delay")
	r.Advance(100 * ms)
	assert.Equal(t, []string{"+1"}, acts(r))
	assert.Equal(t, TriggerTTFT, r.attempts[1].Trigger)
	assert.Equal(t, 1, r.attempts[1].Source)
	assert.Equal(t, 200*ms, r.Deadline(), "the next hedge is staggered by another delay")

	// The hedge delivers first: it is committed even though the primary
	// resumes a moment later, and the primary is never resurrected.
	assert.True(t, r.Content(1, 150*ms, true))
	assert.Equal(t, []string{"-0"}, acts(r))
	assert.False(t, r.Content(0, 151*ms, true))
	assert.Equal(t, Cancelled, r.attempts[0].State)

	r.Complete(1, 300*ms)
	assert.True(t, r.done)
	assert.Equal(t, 1, r.winner)
	assert.NoError(t, r.err)
}

func TestRaceStaggeredHedgesStopAtMaxAttempts(t *testing.T) {
	r := newRace(testPolicy(t, maxAttempts(3)), false)
	r.Start(0)
	r.Advance(100 * ms)
	r.Advance(200 * ms)
	assert.Equal(t, []string{"+0", "+1", "+2"}, acts(r))
	assert.Equal(t, []int{0, 1, 2}, []int{r.attempts[0].Source, r.attempts[1].Source, r.attempts[2].Source})
	assert.Zero(t, r.Deadline(), "no timer once the attempts are spent")
	r.Advance(10_000 * ms)
	assert.Empty(t, acts(r))

	assert.True(t, r.Content(0, 250*ms, true))
	assert.Equal(t, []string{"-1", "-2"}, acts(r))
}

func TestRaceMaxAttemptsClampedToFive(t *testing.T) {
	p := testPolicy(t, maxAttempts(9))
	assert.Equal(t, 5, p.maxAttempts)
}

func TestRaceBudgetStopsHedges(t *testing.T) {
	p := testPolicy(t, budget(4, 0.5))
	// Tokens 4, threshold 2: two hedges drain it to 2, the third is refused.
	for call, want := range []bool{true, true, false} {
		r := newRace(p, false)
		r.Start(0)
		r.Advance(100 * ms)
		assert.Equal(t, want, r.n == 2, "call %d", call)
	}
	assert.InDelta(t, 2.0, p.budget.level(), 1e-9)

	// A successful call refunds tokenRatio: 2.5 > 2, one more hedge.
	r := newRace(p, false)
	r.Start(0)
	r.Content(0, ms, true)
	r.Complete(0, 2*ms)
	assert.InDelta(t, 2.5, p.budget.level(), 1e-9)
	r = newRace(p, false)
	r.Start(0)
	r.Advance(100 * ms)
	assert.Equal(t, 2, r.n)
}

func TestRaceRetryableErrorStartsNextAtOnce(t *testing.T) {
	r := newRace(testPolicy(t), false)
	r.Start(0)
	acts(r)
	e429 := errors.New("429 too many requests")
	r.Fail(0, 5*ms, Retryable, e429)
	assert.Equal(t, []string{"+1"}, acts(r))
	assert.Equal(t, TriggerError, r.attempts[1].Trigger)
	assert.Equal(t, 5*ms, r.attempts[1].Start)
	assert.False(t, r.done)

	// Every source fails: the call ends with the last error.
	r.Fail(1, 6*ms, Retryable, errors.New("reset"))
	r.Fail(2, 7*ms, Retryable, e429)
	assert.True(t, r.done)
	assert.Same(t, e429, r.err)
}

func TestRaceFatalErrorEndsCall(t *testing.T) {
	r := newRace(testPolicy(t), false)
	r.Start(0)
	acts(r)
	e400 := errors.New("400 bad request")
	r.Fail(0, 20*ms, Fatal, e400)
	assert.True(t, r.done)
	assert.Same(t, e400, r.err)
	assert.Empty(t, acts(r), "no attempt starts on a 4xx")
}

// TestRaceFatalErrorOfOneSourceLeavesTheOthers: a hedge's 4xx (a model or
// key its source does not have) ends only that attempt while the primary
// may still answer; the call ends with the 4xx once none can.
func TestRaceFatalErrorOfOneSourceLeavesTheOthers(t *testing.T) {
	r := newRace(testPolicy(t), false)
	r.Start(0)
	r.Advance(100 * ms)
	acts(r)
	e404 := errors.New("404 model not found")
	r.Fail(1, 120*ms, Fatal, e404)
	assert.False(t, r.done, "the primary still runs")
	assert.Empty(t, acts(r), "nothing cancelled, nothing started")
	r.Content(0, 300*ms, true)
	assert.Equal(t, 0, r.Committed())

	r = newRace(testPolicy(t), false)
	r.Start(0)
	r.Advance(100 * ms)
	acts(r)
	r.Fail(1, 120*ms, Fatal, e404)
	e400 := errors.New("400 bad request")
	r.Fail(0, 150*ms, Fatal, e400)
	assert.True(t, r.done)
	assert.Same(t, e400, r.err, "the last refusal stands for the call")
}

// TestRaceRefusedCredentialEndsCall: a refused credential of the caller's
// ends the call at once, the hedges running on other credentials too.
func TestRaceRefusedCredentialEndsCall(t *testing.T) {
	r := newRace(testPolicy(t), false)
	r.Start(0)
	r.Advance(100 * ms)
	acts(r)
	quota := errors.New("429 insufficient_quota")
	r.Fail(0, 120*ms, Refused, quota)
	assert.True(t, r.done)
	assert.Same(t, quota, r.err)
	assert.Equal(t, []string{"-1"}, acts(r), "the hedge is cancelled")
}

func TestRaceWatchdogIgnoresKeepalivesAndEndsStreamingCall(t *testing.T) {
	p := testPolicy(t, stallTimeout(time.Second), budget(10, 0.1))
	r := newRace(p, false)
	r.Start(0)
	r.Content(0, 50*ms, true)
	r.Content(0, 60*ms, true)
	assert.Equal(t, 1060*ms, r.Deadline())
	// Keepalives are not race events at all: only content moves the clock.
	r.Advance(1059 * ms)
	assert.False(t, r.done)
	r.Advance(1060 * ms)
	assert.True(t, r.done)
	assert.ErrorIs(t, r.err, ErrStalled)
	assert.Equal(t, 0, r.errFrom)
	assert.InDelta(t, 9, p.budget.level(), 1e-9, "a stall is a failure")
}

func TestRaceBufferedStallAfterFirstToCompleteWins(t *testing.T) {
	r := newRace(testPolicy(t, stallAfter(2*time.Second), stallTimeout(30*time.Second)), true)
	r.Start(0)
	assert.False(t, r.Content(0, 50*ms, true), "buffered delivery delivers nothing before the end")
	assert.Equal(t, 2050*ms, r.Deadline())
	r.Advance(2050 * ms)
	assert.Equal(t, []string{"+0", "+1"}, acts(r))
	assert.Equal(t, TriggerStall, r.attempts[1].Trigger)
	assert.False(t, r.attempts[1].Continuation)
	r.Advance(3000 * ms)
	assert.Empty(t, acts(r), "one silence launches one hedge")

	// Both run; the fresh attempt completes first and wins.
	r.Content(1, 2200*ms, true)
	r.Content(0, 2300*ms, true)
	r.Complete(1, 2400*ms)
	assert.Equal(t, 1, r.winner)
	assert.Equal(t, []string{"-0"}, acts(r))
}

func TestRaceBufferedWatchdogRetries(t *testing.T) {
	r := newRace(testPolicy(t, stallTimeout(5*time.Second)), true)
	r.Start(0)
	r.Content(0, 50*ms, true)
	r.Advance(5050 * ms)
	assert.Equal(t, []string{"+0", "-0", "+1"}, acts(r))
	assert.Equal(t, Failed, r.attempts[0].State)
	assert.Equal(t, TriggerStall, r.attempts[1].Trigger)
	assert.False(t, r.done)
}

func TestRaceContinuationTakesOver(t *testing.T) {
	p := testPolicy(t, stallAfter(2*time.Second), stallTimeout(30*time.Second), continuation())
	r := newRace(p, false)
	r.Start(0)
	r.Content(0, 50*ms, true)
	acts(r)
	r.Advance(2050 * ms)
	assert.Equal(t, []string{"+1"}, acts(r))
	assert.True(t, r.attempts[1].Continuation)
	assert.Equal(t, TriggerStall, r.attempts[1].Trigger)

	assert.True(t, r.Content(1, 3000*ms, true), "the continuation's text goes to the caller")
	assert.Equal(t, []string{"-0"}, acts(r))
	assert.Equal(t, 1, r.committed)
	assert.False(t, r.Content(0, 3001*ms, true), "the stalled stream is never resurrected")
	r.Complete(1, 4000*ms)
	assert.Equal(t, 1, r.winner)
}

func TestRaceContinuationDroppedWhenStreamResumes(t *testing.T) {
	p := testPolicy(t, stallAfter(2*time.Second), continuation())
	r := newRace(p, false)
	r.Start(0)
	r.Content(0, 50*ms, true)
	r.Advance(2050 * ms)
	acts(r)
	assert.True(t, r.Content(0, 2100*ms, true))
	assert.Equal(t, []string{"-1"}, acts(r))
	assert.False(t, r.Content(1, 2200*ms, true))
}

func TestRaceNoContinuationAfterToolCall(t *testing.T) {
	p := testPolicy(t, stallAfter(2*time.Second), stallTimeout(10*time.Second), continuation())
	r := newRace(p, false)
	r.Start(0)
	r.Content(0, 50*ms, false)
	acts(r)
	assert.Equal(t, 10050*ms, r.Deadline(), "only the watchdog is left")
	r.Advance(2050 * ms)
	assert.Empty(t, acts(r))
}

func TestRaceBrokenStreamContinues(t *testing.T) {
	p := testPolicy(t, stallAfter(2*time.Second), continuation())
	r := newRace(p, false)
	r.Start(0)
	r.Content(0, 50*ms, true)
	acts(r)
	r.Fail(0, 60*ms, Retryable, errors.New("connection reset"))
	assert.Equal(t, []string{"+1"}, acts(r))
	assert.True(t, r.attempts[1].Continuation)
	assert.Equal(t, TriggerError, r.attempts[1].Trigger)
	assert.False(t, r.done)
}

func TestRaceBrokenStreamWithoutContinuationEnds(t *testing.T) {
	r := newRace(testPolicy(t), false)
	r.Start(0)
	r.Content(0, 50*ms, true)
	err := errors.New("connection reset")
	r.Fail(0, 60*ms, Retryable, err)
	assert.True(t, r.done)
	assert.Same(t, err, r.err)
}

func TestRaceAbort(t *testing.T) {
	r := newRace(testPolicy(t), false)
	r.Start(0)
	r.Advance(100 * ms)
	acts(r)
	r.Abort(context.Canceled)
	assert.Equal(t, []string{"-0", "-1"}, acts(r))
	assert.ErrorIs(t, r.err, context.Canceled)
	r.Content(0, 200*ms, true)
	assert.Empty(t, acts(r))
}

func TestRaceAllocatesNothing(t *testing.T) {
	p := testPolicy(t, stallTimeout(time.Second), budget(10, 0.1))
	r := &Race{}
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(p, false)
		r.Start(0)
		r.Advance(r.Deadline())
		r.Content(1, 150*ms, true)
		r.Content(1, 160*ms, true)
		r.Complete(1, 170*ms)
		r.Actions()
	})
	assert.Zero(t, allocs)
}

// TestRaceRetryAfterKeepsTheSourceOut: a source that answered with a
// Retry-After gets no attempt of the call before then; the next attempt
// goes to another source, and when every source asked to wait none starts
// and the call ends with the answer that asked, for the caller to wait.
func TestRaceRetryAfterKeepsTheSourceOut(t *testing.T) {
	r := newRace(testPolicy(t, maxAttempts(5)), false)
	r.Start(0)
	acts(r)
	e429 := errors.New("429 too many requests")
	r.FailAfter(0, 5*ms, Retryable, e429, 30_000*ms)
	assert.Equal(t, []string{"+1"}, acts(r), "the next source at once")
	assert.Equal(t, 1, r.attempts[1].Source)
	assert.Equal(t, 30_000*ms, r.attempts[0].RetryAt)

	// Source 1 fails without asking to wait, source 2 asks for 1 s: the
	// round robin comes back to source 1, past source 0 that still waits.
	r.Fail(1, 6*ms, Retryable, errors.New("503"))
	assert.Equal(t, []string{"+2"}, acts(r))
	assert.Equal(t, 2, r.attempts[2].Source)
	r.FailAfter(2, 7*ms, Retryable, e429, 1_007*ms)
	assert.Equal(t, []string{"+3"}, acts(r))
	assert.Equal(t, 1, r.attempts[3].Source, "source 0 and 2 wait, source 1 did not ask")

	// Source 1 asks too: every source waits, no attempt starts, and the
	// call ends with that answer although attempts remain.
	e503 := errors.New("503 overloaded")
	r.FailAfter(3, 8*ms, Retryable, e503, 2_000*ms)
	assert.Empty(t, acts(r))
	assert.True(t, r.done)
	assert.Same(t, e503, r.err)
	assert.Equal(t, 4, r.n)
}

// TestRaceRetryAfterOfTheOnlySource: with one source, a 429 that asks to
// wait ends the call with it instead of calling the source again at once;
// one that asks for no wait, or a wait already over, is retried.
func TestRaceRetryAfterOfTheOnlySource(t *testing.T) {
	p := NewPolicy(Config{Sources: 1, Delay: 100 * time.Millisecond, MaxAttempts: 3})
	e429 := errors.New("429")

	r := newRace(p, false)
	r.Start(0)
	acts(r)
	r.FailAfter(0, 5*ms, Retryable, e429, 5*ms) // Retry-After: 0
	assert.Equal(t, []string{"+1"}, acts(r), "no wait asked: retried at once")
	r.FailAfter(1, 6*ms, Retryable, e429, 2_006*ms)
	assert.Empty(t, acts(r))
	assert.True(t, r.done)
	assert.Same(t, e429, r.err)

	// A wait over by the time the hedge timer fires no longer keeps the
	// source out.
	r = newRace(p, false)
	r.Start(0)
	acts(r)
	r.Advance(100 * ms)
	assert.Equal(t, []string{"+1"}, acts(r))
	r.FailAfter(1, 110*ms, Retryable, e429, 150*ms)
	assert.Empty(t, acts(r), "the primary still runs, and its source waits until 150 ms")
	assert.False(t, r.done)
	r.Advance(200 * ms)
	assert.Equal(t, []string{"+2"}, acts(r), "the hedge at 200 ms: the wait is over")
}

// TestRaceRetryAfterDrawsNoToken: an attempt not started because every
// source waits takes nothing from the budget.
func TestRaceRetryAfterDrawsNoToken(t *testing.T) {
	p := NewPolicy(Config{Sources: 1, Delay: 100 * time.Millisecond, MaxAttempts: 3, MaxTokens: 10, TokenRatio: 0.1})
	r := newRace(p, false)
	r.Start(0)
	acts(r)
	before := p.budget.level()
	r.FailAfter(0, 5*ms, Retryable, errors.New("429"), 10_000*ms)
	assert.True(t, r.done)
	assert.InDelta(t, before-1, p.budget.level(), 1e-9, "the failure itself costs its token, the wait none")
	assert.Zero(t, r.Refused())
}

// TestRaceCommitUnseenTeachesNoTTFT: attempts committed before any content
// was seen (unreadable frames, more before content than may be held) give
// the adaptive delay censored samples only: however many of them, the delay
// stays the fallback, where as many seen first chunks teach it theirs.
func TestRaceCommitUnseenTeachesNoTTFT(t *testing.T) {
	for _, seen := range []bool{false, true} {
		p := NewPolicy(Config{Sources: 1, Delay: 2 * time.Second, MaxAttempts: 3, Adaptive: true, Quantile: 0.95, MinSamples: 3})
		for k := range 5 {
			r := newRace(p, false)
			start := int64(k) * 10 * ms
			r.Start(start)
			acts(r)
			if seen {
				assert.True(t, r.Content(0, start+2*ms, true))
			} else {
				assert.True(t, r.CommitUnseen(0, start+2*ms))
			}
			assert.Equal(t, 0, r.Committed())
			r.Complete(0, start+5*ms)
		}
		delay, source := p.DelayFrom(0)
		if seen {
			assert.Equal(t, DelayLocal, source, "seen first chunks teach the delay")
			assert.Less(t, delay, int64(time.Second))
		} else {
			assert.Equal(t, DelayFallback, source, "commits without content teach nothing")
			assert.Equal(t, int64(2*time.Second), delay)
		}
	}
}

package hedge

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ms = int64(time.Millisecond)

func testPolicy(t *testing.T, opts ...Option) *policy {
	t.Helper()
	cfg := defaultConfig()
	cfg.adaptive = false
	cfg.delay = 100 * time.Millisecond
	cfg.stallTimeout = 0
	cfg.maxTokens = 0
	for _, o := range opts {
		o(&cfg)
	}
	require.NoError(t, cfg.validate())
	return newPolicy(&cfg, 3)
}

func newRace(p *policy, buffered bool) *race {
	r := &race{}
	r.reset(p, buffered)
	return r
}

// acts renders the pending actions as "+i" (launch) and "-i" (cancel).
func acts(r *race) []string {
	var out []string
	for _, a := range r.actions() {
		sign := "+"
		if a.kind == actionCancel {
			sign = "-"
		}
		out = append(out, sign+string(rune('0'+a.attempt)))
	}
	return out
}

func TestRaceTTFTHedgeFirstDeliveredWins(t *testing.T) {
	r := newRace(testPolicy(t), false)
	r.start(0)
	assert.Equal(t, []string{"+0"}, acts(r))
	assert.Equal(t, 100*ms, r.deadline())

	r.advance(99 * ms)
	assert.Empty(t, acts(r), "no hedge before the delay")
	r.advance(100 * ms)
	assert.Equal(t, []string{"+1"}, acts(r))
	assert.Equal(t, triggerTTFT, r.attempts[1].trigger)
	assert.Equal(t, 1, r.attempts[1].source)
	assert.Equal(t, 200*ms, r.deadline(), "the next hedge is staggered by another delay")

	// The hedge delivers first: it is committed even though the primary
	// resumes a moment later, and the primary is never resurrected.
	assert.True(t, r.content(1, 150*ms, true))
	assert.Equal(t, []string{"-0"}, acts(r))
	assert.False(t, r.content(0, 151*ms, true))
	assert.Equal(t, attemptCancelled, r.attempts[0].state)

	r.complete(1, 300*ms)
	assert.True(t, r.done)
	assert.Equal(t, 1, r.winner)
	assert.NoError(t, r.err)
}

func TestRaceStaggeredHedgesStopAtMaxAttempts(t *testing.T) {
	r := newRace(testPolicy(t, MaxAttempts(3)), false)
	r.start(0)
	r.advance(100 * ms)
	r.advance(200 * ms)
	assert.Equal(t, []string{"+0", "+1", "+2"}, acts(r))
	assert.Equal(t, []int{0, 1, 2}, []int{r.attempts[0].source, r.attempts[1].source, r.attempts[2].source})
	assert.Zero(t, r.deadline(), "no timer once the attempts are spent")
	r.advance(10_000 * ms)
	assert.Empty(t, acts(r))

	assert.True(t, r.content(0, 250*ms, true))
	assert.Equal(t, []string{"-1", "-2"}, acts(r))
}

func TestRaceMaxAttemptsClampedToFive(t *testing.T) {
	p := testPolicy(t, MaxAttempts(9))
	assert.Equal(t, 5, p.maxAttempts)
}

func TestRaceBudgetStopsHedges(t *testing.T) {
	p := testPolicy(t, Budget(4, 0.5))
	// Tokens 4, threshold 2: two hedges drain it to 2, the third is refused.
	for call, want := range []bool{true, true, false} {
		r := newRace(p, false)
		r.start(0)
		r.advance(100 * ms)
		assert.Equal(t, want, r.n == 2, "call %d", call)
	}
	assert.InDelta(t, 2.0, p.budget.level(), 1e-9)

	// A successful call refunds tokenRatio: 2.5 > 2, one more hedge.
	r := newRace(p, false)
	r.start(0)
	r.content(0, ms, true)
	r.complete(0, 2*ms)
	assert.InDelta(t, 2.5, p.budget.level(), 1e-9)
	r = newRace(p, false)
	r.start(0)
	r.advance(100 * ms)
	assert.Equal(t, 2, r.n)
}

func TestRaceRetryableErrorStartsNextAtOnce(t *testing.T) {
	r := newRace(testPolicy(t), false)
	r.start(0)
	acts(r)
	e429 := &StatusError{StatusCode: 429}
	r.fail(0, 5*ms, classify(e429), e429)
	assert.Equal(t, []string{"+1"}, acts(r))
	assert.Equal(t, triggerError, r.attempts[1].trigger)
	assert.Equal(t, 5*ms, r.attempts[1].start)
	assert.False(t, r.done)

	// Every source fails: the call ends with the last error.
	r.fail(1, 6*ms, classRetryable, errors.New("reset"))
	r.fail(2, 7*ms, classRetryable, e429)
	assert.True(t, r.done)
	assert.Same(t, e429, r.err)
}

func TestRaceFatalErrorEndsCall(t *testing.T) {
	r := newRace(testPolicy(t), false)
	r.start(0)
	r.advance(100 * ms)
	acts(r)
	e400 := &StatusError{StatusCode: 400}
	require.Equal(t, classFatal, classify(e400))
	r.fail(1, 120*ms, classFatal, e400)
	assert.True(t, r.done)
	assert.Same(t, e400, r.err)
	assert.Equal(t, []string{"-0"}, acts(r), "the other attempts are cancelled")
}

func TestRaceWatchdogIgnoresKeepalivesAndEndsStreamingCall(t *testing.T) {
	r := newRace(testPolicy(t, StallTimeout(time.Second)), false)
	r.start(0)
	r.content(0, 50*ms, true)
	r.content(0, 60*ms, true)
	assert.Equal(t, 1060*ms, r.deadline())
	// Keepalives are not race events at all: only content moves the clock.
	r.advance(1059 * ms)
	assert.False(t, r.done)
	r.advance(1060 * ms)
	assert.True(t, r.done)
	assert.ErrorIs(t, r.err, errStalled)
	assert.Equal(t, 0, r.errFrom)
}

func TestRaceBufferedStallAfterFirstToCompleteWins(t *testing.T) {
	r := newRace(testPolicy(t, StallAfter(2*time.Second), StallTimeout(30*time.Second)), true)
	r.start(0)
	assert.False(t, r.content(0, 50*ms, true), "buffered delivery delivers nothing before the end")
	assert.Equal(t, 2050*ms, r.deadline())
	r.advance(2050 * ms)
	assert.Equal(t, []string{"+0", "+1"}, acts(r))
	assert.Equal(t, triggerStall, r.attempts[1].trigger)
	assert.False(t, r.attempts[1].continuation)
	r.advance(3000 * ms)
	assert.Empty(t, acts(r), "one silence launches one hedge")

	// Both run; the fresh attempt completes first and wins.
	r.content(1, 2200*ms, true)
	r.content(0, 2300*ms, true)
	r.complete(1, 2400*ms)
	assert.Equal(t, 1, r.winner)
	assert.Equal(t, []string{"-0"}, acts(r))
}

func TestRaceBufferedWatchdogRetries(t *testing.T) {
	r := newRace(testPolicy(t, StallTimeout(5*time.Second)), true)
	r.start(0)
	r.content(0, 50*ms, true)
	r.advance(5050 * ms)
	assert.Equal(t, []string{"+0", "-0", "+1"}, acts(r))
	assert.Equal(t, attemptFailed, r.attempts[0].state)
	assert.Equal(t, triggerStall, r.attempts[1].trigger)
	assert.False(t, r.done)
}

func TestRaceContinuationTakesOver(t *testing.T) {
	p := testPolicy(t, StallAfter(2*time.Second), StallTimeout(30*time.Second), Continuation())
	r := newRace(p, false)
	r.start(0)
	r.content(0, 50*ms, true)
	acts(r)
	r.advance(2050 * ms)
	assert.Equal(t, []string{"+1"}, acts(r))
	assert.True(t, r.attempts[1].continuation)
	assert.Equal(t, triggerStall, r.attempts[1].trigger)

	assert.True(t, r.content(1, 3000*ms, true), "the continuation's text goes to the caller")
	assert.Equal(t, []string{"-0"}, acts(r))
	assert.Equal(t, 1, r.committed)
	assert.False(t, r.content(0, 3001*ms, true), "the stalled stream is never resurrected")
	r.complete(1, 4000*ms)
	assert.Equal(t, 1, r.winner)
}

func TestRaceContinuationDroppedWhenStreamResumes(t *testing.T) {
	p := testPolicy(t, StallAfter(2*time.Second), Continuation())
	r := newRace(p, false)
	r.start(0)
	r.content(0, 50*ms, true)
	r.advance(2050 * ms)
	acts(r)
	assert.True(t, r.content(0, 2100*ms, true))
	assert.Equal(t, []string{"-1"}, acts(r))
	assert.False(t, r.content(1, 2200*ms, true))
}

func TestRaceNoContinuationAfterToolCall(t *testing.T) {
	p := testPolicy(t, StallAfter(2*time.Second), StallTimeout(10*time.Second), Continuation())
	r := newRace(p, false)
	r.start(0)
	r.content(0, 50*ms, false)
	acts(r)
	assert.Equal(t, 10050*ms, r.deadline(), "only the watchdog is left")
	r.advance(2050 * ms)
	assert.Empty(t, acts(r))
}

func TestRaceBrokenStreamContinues(t *testing.T) {
	p := testPolicy(t, StallAfter(2*time.Second), Continuation())
	r := newRace(p, false)
	r.start(0)
	r.content(0, 50*ms, true)
	acts(r)
	r.fail(0, 60*ms, classRetryable, errors.New("connection reset"))
	assert.Equal(t, []string{"+1"}, acts(r))
	assert.True(t, r.attempts[1].continuation)
	assert.Equal(t, triggerError, r.attempts[1].trigger)
	assert.False(t, r.done)
}

func TestRaceBrokenStreamWithoutContinuationEnds(t *testing.T) {
	r := newRace(testPolicy(t), false)
	r.start(0)
	r.content(0, 50*ms, true)
	err := errors.New("connection reset")
	r.fail(0, 60*ms, classRetryable, err)
	assert.True(t, r.done)
	assert.Same(t, err, r.err)
}

func TestRaceAbort(t *testing.T) {
	r := newRace(testPolicy(t), false)
	r.start(0)
	r.advance(100 * ms)
	acts(r)
	r.abort(errCallClosed)
	assert.Equal(t, []string{"-0", "-1"}, acts(r))
	assert.ErrorIs(t, r.err, errCallClosed)
	r.content(0, 200*ms, true)
	assert.Empty(t, acts(r))
}

func TestRaceAllocatesNothing(t *testing.T) {
	p := testPolicy(t, StallTimeout(time.Second), Budget(10, 0.1))
	r := &race{}
	allocs := testing.AllocsPerRun(100, func() {
		r.reset(p, false)
		r.start(0)
		r.advance(r.deadline())
		r.content(1, 150*ms, true)
		r.content(1, 160*ms, true)
		r.complete(1, 170*ms)
		r.actions()
	})
	assert.Zero(t, allocs)
}

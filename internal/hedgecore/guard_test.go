// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The decisions the sse_capture proxy's guard adds to the race: a TTFT
// timeout per attempt, failover without a TTFT hedge, a reasoning-aware
// watchdog, budget refusals counted, a budget shared between policies.

var errStatus503 = errors.New("503")

func ttftTimeout(d time.Duration) option { return func(c *Config) { c.TTFTTimeout = d } }
func noTTFTHedge() option                { return func(c *Config) { c.NoTTFTHedge = true } }

func TestRaceTTFTTimeoutStartsTheNextAttempt(t *testing.T) {
	r := newRace(testPolicy(t, noTTFTHedge(), ttftTimeout(time.Second), maxAttempts(2)), false)
	r.Start(0)
	assert.Equal(t, []string{"+0"}, acts(r))
	assert.Equal(t, 1000*ms, r.Deadline(), "only the timeout is due: no hedge delay")
	assert.Equal(t, DelayNone, r.attempts[0].DelaySource, "no hedge delay was armed")

	r.Advance(999 * ms)
	assert.Empty(t, acts(r))
	r.Advance(1000 * ms)
	assert.Equal(t, []string{"-0", "+1"}, acts(r), "the silent attempt is given up and the next starts at once")
	assert.Equal(t, Failed, r.attempts[0].State)
	assert.Equal(t, TriggerTTFT, r.attempts[1].Trigger)
	assert.Equal(t, 2000*ms, r.Deadline())

	assert.True(t, r.Content(1, 1500*ms, true))
	r.Complete(1, 1600*ms)
	assert.Equal(t, 1, r.Winner())
	assert.NoError(t, r.Err())
}

func TestRaceTTFTTimeoutOnTheLastAttemptEndsTheCall(t *testing.T) {
	r := newRace(testPolicy(t, noTTFTHedge(), ttftTimeout(time.Second), maxAttempts(2)), false)
	r.Start(0)
	acts(r)
	r.Advance(1000 * ms)
	assert.Equal(t, []string{"-0", "+1"}, acts(r))
	r.Advance(2000 * ms)
	assert.Equal(t, []string{"-1"}, acts(r))
	assert.True(t, r.Done())
	assert.ErrorIs(t, r.Err(), ErrTTFTTimeout)
	assert.Equal(t, 1, r.ErrFrom())
	assert.Zero(t, r.Deadline())
}

func TestRaceTTFTTimeoutBesideAHedge(t *testing.T) {
	// Hedge at 100 ms, timeout at 250 ms, three attempts: the primary times
	// out while the hedge still runs, so the third starts at once.
	r := newRace(testPolicy(t, ttftTimeout(250*time.Millisecond)), false)
	r.Start(0)
	acts(r)
	r.Advance(100 * ms)
	assert.Equal(t, []string{"+1"}, acts(r))
	assert.Equal(t, 200*ms, r.Deadline(), "the next hedge comes before the timeout")
	r.Advance(200 * ms)
	assert.Equal(t, []string{"+2"}, acts(r))
	assert.Equal(t, 250*ms, r.Deadline())
	r.Advance(250 * ms)
	assert.Equal(t, []string{"-0"}, acts(r), "no attempt left to start: the others still run")
	assert.False(t, r.Done())
	assert.True(t, r.Content(2, 300*ms, true))
	assert.Equal(t, []string{"-1"}, acts(r))
}

func TestRaceWithoutTTFTHedgeFailsOver(t *testing.T) {
	r := newRace(testPolicy(t, noTTFTHedge(), maxAttempts(2)), false)
	r.Start(0)
	assert.Equal(t, []string{"+0"}, acts(r))
	assert.Zero(t, r.Deadline(), "nothing is due without a hedge delay or a timeout")
	r.Fail(0, 5*ms, Retryable, errStatus503)
	assert.Equal(t, []string{"+1"}, acts(r), "a 503 is replaced at once")
	assert.Equal(t, TriggerError, r.attempts[1].Trigger)
	r.Fail(1, 9*ms, Retryable, errStatus503)
	assert.True(t, r.Done(), "both failed")
	assert.Equal(t, 1, r.ErrFrom(), "the last failure stands for the call")
}

func TestRaceCountsBudgetRefusals(t *testing.T) {
	p := testPolicy(t, budget(2, 0.1))
	r := newRace(p, false)
	r.Start(0)
	acts(r)
	r.Advance(100 * ms)
	assert.Equal(t, []string{"+1"}, acts(r), "the first hedge takes the bucket to its threshold")
	assert.Equal(t, 0, r.Refused())
	r.Advance(200 * ms)
	assert.Empty(t, acts(r), "the bucket is at half: no more hedges")
	assert.Equal(t, 1, r.Refused())
}

func TestSharedBudget(t *testing.T) {
	b := NewBudget(2, 0.1)
	p1 := NewPolicy(Config{Sources: 1, Delay: 100 * time.Millisecond, MaxAttempts: 2, Budget: b})
	p2 := NewPolicy(Config{Sources: 1, Delay: 100 * time.Millisecond, MaxAttempts: 2, Budget: b, MaxTokens: 50})
	require.Same(t, b, p1.Budget())
	require.Same(t, b, p2.Budget(), "a shared bucket wins over MaxTokens")
	r := newRace(p1, false)
	r.Start(0)
	acts(r)
	r.Advance(100 * ms)
	assert.Equal(t, []string{"+1"}, acts(r))
	r = newRace(p2, false)
	r.Start(0)
	acts(r)
	r.Advance(100 * ms)
	assert.Empty(t, acts(r), "the other policy's hedge drained the shared bucket")
}

func TestStallDeadlineSparesReasoning(t *testing.T) {
	p := NewPolicy(Config{StallTimeout: 30 * time.Second, ReasoningStallTimeout: 5 * time.Minute})
	assert.Equal(t, int64(30*time.Second)+7, p.StallDeadline(7, true))
	assert.Equal(t, int64(5*time.Minute)+7, p.StallDeadline(7, false), "while only reasoning has come")

	p = NewPolicy(Config{StallTimeout: 30 * time.Second})
	assert.Equal(t, int64(30*time.Second), p.StallTimeoutFor(false), "0 takes stall_timeout")

	p = NewPolicy(Config{})
	assert.Zero(t, p.StallDeadline(7, true), "off")
	assert.Zero(t, p.StallDeadline(7, false))
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// learnedTimeouts stands for timeouts learned from traffic; they change
// while calls run.
type learnedTimeouts struct{ answer, reasoning atomic.Int64 }

func (l *learnedTimeouts) StallTimeout(answered bool) int64 {
	if answered {
		return l.answer.Load()
	}
	return l.reasoning.Load()
}

func TestStallDeadlineTakesLearnedTimeouts(t *testing.T) {
	l := &learnedTimeouts{}
	l.answer.Store(int64(2 * time.Second))
	l.reasoning.Store(int64(9 * time.Second))
	p := NewPolicy(Config{StallTimeout: time.Minute, StallTimeouts: l})
	assert.Equal(t, 2000*ms+7, p.StallDeadline(7, true), "the learned timeout, not the configured one")
	assert.Equal(t, 9000*ms+7, p.StallDeadline(7, false))
	l.answer.Store(int64(3 * time.Second))
	assert.Equal(t, 3000*ms+7, p.StallDeadline(7, true), "as the learner moves")
	assert.Equal(t, 3000*ms, p.StallTimeout())
	l.answer.Store(0)
	assert.Zero(t, p.StallDeadline(7, true), "a learner may turn the watchdog off")
}

func TestRaceWatchdogUsesLearnedTimeouts(t *testing.T) {
	l := &learnedTimeouts{}
	l.answer.Store(int64(500 * time.Millisecond))
	r := newRace(testPolicy(t, noTTFTHedge(), func(c *Config) { c.StallTimeouts = l }), false)
	r.Start(0)
	acts(r)
	assert.True(t, r.Content(0, 10*ms, true))
	assert.Equal(t, 510*ms, r.Deadline())
	l.answer.Store(int64(time.Second))
	assert.Equal(t, 1010*ms, r.Deadline(), "the deadline follows what was learned since")
	r.Advance(1010 * ms)
	assert.ErrorIs(t, r.Err(), ErrStalled)
}

// TestRaceWatchdogSparesReasoningUntilAnAnswer: while only reasoning has
// been delivered the watchdog allows the reasoning timeout; the first
// answer chunk brings the stall timeout back.
func TestRaceWatchdogSparesReasoningUntilAnAnswer(t *testing.T) {
	reasoning := func(c *Config) { c.ReasoningStallTimeout = 5 * time.Second }
	for _, buffered := range []bool{false, true} {
		r := newRace(testPolicy(t, noTTFTHedge(), stallTimeout(time.Second), reasoning), buffered)
		r.Start(0)
		acts(r)
		r.Reasoning(0, 10*ms)
		assert.Equal(t, 5010*ms, r.Deadline(), "buffered %v: only reasoning so far", buffered)
		r.Advance(4000 * ms)
		assert.False(t, r.Done())
		r.Reasoning(0, 4000*ms)
		r.Content(0, 4100*ms, true)
		assert.Equal(t, 5100*ms, r.Deadline(), "buffered %v: an answer came", buffered)
		r.Advance(5100 * ms)
		assert.True(t, r.Done() || r.Attempt(0).State == Failed, "buffered %v: the stall timeout ended it", buffered)
	}
}

func TestReasoningCommitsButCannotBeContinued(t *testing.T) {
	r := newRace(testPolicy(t, continuation(), stallAfter(time.Second), stallTimeout(time.Minute)), false)
	r.Start(0)
	acts(r)
	assert.True(t, r.Reasoning(0, 10*ms), "reasoning is content: it commits and is delivered")
	assert.Equal(t, 0, r.Committed())
	r.Advance(1010 * ms)
	assert.Empty(t, acts(r), "a reasoning block cannot be resent as an assistant prefix")
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testEvent is an attempt's content chunk or its end.
type testEvent struct {
	attempt int
	at      int64
	done    bool
}

func (e testEvent) When() int64 { return e.at }

// recorder carries out a race's actions by writing them down, and hands
// events to the race.
type recorder struct {
	r   *Race
	log []string
}

func (c *recorder) Handle(e testEvent) {
	if e.done {
		c.r.Complete(e.attempt, e.at)
		return
	}
	c.r.Content(e.attempt, e.at, true)
}
func (c *recorder) Launch(i int) { c.log = append(c.log, "+"+string(rune('0'+i))) }
func (c *recorder) Cancel(i int) { c.log = append(c.log, "-"+string(rune('0'+i))) }

// scriptedSource hands out wakes in order and records the deadlines it was
// asked to wait for.
type scriptedSource struct {
	wakes     []Wake[testEvent]
	deadlines []int64
}

func (s *scriptedSource) Wait(deadline int64) Wake[testEvent] {
	s.deadlines = append(s.deadlines, deadline)
	if len(s.wakes) == 0 {
		return Wake[testEvent]{Kind: WakeIdle}
	}
	w := s.wakes[0]
	s.wakes = s.wakes[1:]
	return w
}

func TestDriverHandsEveryWakeToTheRace(t *testing.T) {
	r := newRace(testPolicy(t), false)
	car := &recorder{r: r}
	src := &scriptedSource{wakes: []Wake[testEvent]{
		{Kind: WakeDeadline, Now: 100 * ms},
		{Kind: WakeEvent, Event: testEvent{attempt: 1, at: 150 * ms}},
		{Kind: WakeEvent, Event: testEvent{attempt: 1, at: 300 * ms, done: true}},
	}}
	d := NewDriver[testEvent](r, src, car)
	d.Start(0)
	assert.Equal(t, []string{"+0"}, car.log)
	for !r.Done() {
		require.True(t, d.Step())
	}
	assert.Equal(t, []string{"+0", "+1", "-0"}, car.log, "the hedge at its deadline, the primary dropped at commit")
	assert.Equal(t, []int64{100 * ms, 200 * ms, 0}, src.deadlines, "the driver waits for the race's own deadline")
	assert.Equal(t, 1, r.Winner())
	assert.False(t, d.Step(), "an idle source stops the driver")
}

func TestDriverAbort(t *testing.T) {
	errGone := errors.New("caller gone")
	r := newRace(testPolicy(t), false)
	car := &recorder{r: r}
	d := NewDriver[testEvent](r, &scriptedSource{wakes: []Wake[testEvent]{{Kind: WakeAbort, Err: errGone}}}, car)
	d.Start(0)
	require.True(t, d.Step())
	assert.True(t, r.Done())
	assert.ErrorIs(t, r.Err(), errGone)
	assert.Equal(t, []string{"+0", "-0"}, car.log)
}

// liveCall runs a driver over Live on a fake clock in a goroutine of its
// own, as the hedge client's Next and the guard's RoundTrip do.
type liveCall struct {
	clock  *clockwork.FakeClock
	race   *Race
	car    *recorder
	events chan testEvent
	steps  chan struct{}
	done   chan struct{}
}

func startLive(ctx context.Context, t *testing.T, p *Policy) *liveCall {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Unix(1_700_000_000, 0))
	c := &liveCall{clock: clock, race: newRace(p, false), events: make(chan testEvent), steps: make(chan struct{}, 16), done: make(chan struct{})}
	c.car = &recorder{r: c.race}
	now := func() int64 { return clock.Now().UnixNano() }
	src := NewLive(ctx, clock, now, c.events)
	d := NewDriver[testEvent](c.race, src, c.car)
	d.Start(now())
	go func() {
		defer close(c.done)
		defer src.Stop()
		for !c.race.Done() {
			d.Step()
			c.steps <- struct{}{}
		}
	}()
	return c
}

func (c *liveCall) step(t *testing.T) {
	t.Helper()
	select {
	case <-c.steps:
	case <-time.After(5 * time.Second):
		t.Fatal("the driver did not step")
	}
}

func (c *liveCall) waitTimer(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, c.clock.BlockUntilContext(ctx, 1), "the driver armed its timer")
}

func TestLiveFiresTheRaceDeadlineOnTheClock(t *testing.T) {
	c := startLive(t.Context(), t, testPolicy(t, maxAttempts(2)))
	c.waitTimer(t)
	c.clock.Advance(99 * time.Millisecond)
	select {
	case <-c.steps:
		t.Fatal("the timer fired before the hedge delay")
	case <-time.After(20 * time.Millisecond):
	}
	c.clock.Advance(time.Millisecond)
	c.step(t)
	assert.Equal(t, []string{"+0", "+1"}, c.car.log, "the hedge at the delay")
	start := c.race.Attempt(0).Start
	c.events <- testEvent{attempt: 1, at: start + 120*ms}
	c.step(t)
	assert.Equal(t, []string{"+0", "+1", "-0"}, c.car.log)
	c.events <- testEvent{attempt: 1, at: start + 130*ms, done: true}
	c.step(t)
	<-c.done
	assert.Equal(t, 1, c.race.Winner())
}

func TestLiveAbortsWhenTheContextEnds(t *testing.T) {
	errGone := errors.New("caller gone")
	ctx, cancel := context.WithCancelCause(t.Context())
	c := startLive(ctx, t, testPolicy(t))
	cancel(errGone)
	c.step(t)
	<-c.done
	assert.ErrorIs(t, c.race.Err(), errGone)
	assert.Equal(t, []string{"+0", "-0"}, c.car.log)
}

func TestLiveStopsItsTimerWithoutADeadline(t *testing.T) {
	c := startLive(t.Context(), t, testPolicy(t, noTTFTHedge(), stallTimeout(time.Second)))
	start := c.race.Attempt(0).Start
	c.events <- testEvent{attempt: 0, at: start}
	c.step(t)
	c.waitTimer(t) // the watchdog, one second after the content chunk
	c.clock.Advance(time.Second)
	c.step(t)
	<-c.done
	assert.ErrorIs(t, c.race.Err(), ErrStalled, "the watchdog ended the call on the clock")
}

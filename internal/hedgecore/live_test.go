// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLiveGivesEventsAndDeadlinesInTheOrderOfTheirTimes: an event that
// waited on the channel while the race's caller was busy (a slow reader)
// comes before a deadline that passed meanwhile when it arrived before it,
// and after it when it arrived after it, whatever the channel and the timer
// were ready in: Go's select picks among ready cases at random, so each
// case runs many times.
func TestLiveGivesEventsAndDeadlinesInTheOrderOfTheirTimes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration // the waiting event's arrival, after the start
		want  []WakeKind
	}{
		{"arrived before the deadline", 500 * time.Millisecond, []WakeKind{WakeEvent, WakeDeadline}},
		{"arrived after the deadline", 1500 * time.Millisecond, []WakeKind{WakeDeadline, WakeEvent}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 50 {
				clock := clockwork.NewFakeClockAt(time.Unix(1_700_000_000, 0))
				start := clock.Now().UnixNano()
				events := make(chan testEvent, 4)
				l := NewLive(context.Background(), clock, func() int64 { return clock.Now().UnixNano() }, events)
				deadline := start + int64(time.Second)
				events <- testEvent{at: start}
				require.Equal(t, WakeEvent, l.Wait(deadline).Kind) // arms the timer
				events <- testEvent{attempt: 1, at: start + int64(tc.after)}
				clock.Advance(2 * time.Second) // the timer fires while the event waits
				var got []WakeKind
				for range 2 {
					w := l.Wait(deadline)
					got = append(got, w.Kind)
					if w.Kind == WakeEvent {
						assert.Equal(t, 1, w.Event.attempt)
					}
				}
				require.Equal(t, tc.want, got)
				l.Stop()
			}
		})
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
)

// TestGapsOfZeroAreLearned: frames that arrive in one read are stamped
// alike, and docs/contract.md counts "equal timestamps [as] a gap of 0".
// Dropped (a TTFT of 0 is none), they would leave the learned "p99.9 gap"
// that of the nonzero gaps only, a much lower quantile of the stream's gaps
// on an upstream that sends its frames several to a read. Here 9,000 gaps
// of 0, 995 of 10 ms and 5 of 5 s: the p99.9 is 10 ms and the timeout the
// floor (30 s); without the zeros the 5 s gaps would be 0.5 % of what is
// learned, and the watchdog would wait 50 s.
func TestGapsOfZeroAreLearned(t *testing.T) {
	g := New(Settings{
		Default:   Rule{StallTimeout: AutoTimeout, AutoStall: true, MaxAttempts: 1},
		AutoStall: AutoStall{Multiple: 10, Floor: 30 * time.Second, Ceiling: 10 * time.Minute, MinSamples: 20},
		Clock:     clockwork.NewFakeClockAt(time.Unix(1_700_000_000, 0)),
	})
	pol := g.For("openai", "gpt-4o")
	gaps := make([]Gap, 0, 10000)
	for range 5 {
		gaps = append(gaps, Gap{Length: 5 * time.Second})
	}
	for range 9000 {
		gaps = append(gaps, Gap{Length: 0})
	}
	for range 995 {
		gaps = append(gaps, Gap{Length: 10 * time.Millisecond})
	}
	pol.ObserveGaps(time.Unix(1_700_000_000, 0).UnixNano(), gaps)
	assert.Equal(t, StallLocal.String(), pol.StallTimeoutSource(true).String())
	assert.Equal(t, 30*time.Second, pol.StallTimeout(true),
		"p99.9 of all 10,000 gaps is 10 ms: the floor; the 5 s gaps are 0.05 % of them")
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDelayFromFallbackLocalFleet(t *testing.T) {
	p := NewPolicy(Config{Sources: 2, Adaptive: true, Quantile: 0.5, Delay: 2 * time.Second, MinSamples: 20, MaxAttempts: 2})
	d, src := p.DelayFrom(0)
	assert.Equal(t, int64(2*time.Second), d)
	assert.Equal(t, DelayFallback, src)

	p.SetFleet(0, &FleetAdvice{Delay: int64(300 * time.Millisecond), Samples: 980})
	d, src = p.DelayFrom(0)
	assert.Equal(t, int64(300*time.Millisecond), d, "a cold process takes the fleet's delay from its first call")
	assert.Equal(t, DelayFleet, src)
	_, src = p.DelayFrom(1)
	assert.Equal(t, DelayFallback, src, "advice is per source")

	for i := range 20 {
		p.Observe(0, int64(i)*ms, 100*ms)
	}
	d, src = p.DelayFrom(0)
	// (980 * 300 + 20 * 100) / 1000 = 296 ms, within the sketch's 1 %.
	assert.InEpsilon(t, float64(296*ms), float64(d), 0.01)
	assert.Equal(t, DelayFleet, src, "blended")

	p.SetFleet(0, nil)
	d, src = p.DelayFrom(0)
	assert.InEpsilon(t, float64(100*ms), float64(d), 0.01)
	assert.Equal(t, DelayLocal, src)

	p.SetFleet(0, &FleetAdvice{Delay: 0, Samples: 10})
	_, src = p.DelayFrom(0)
	assert.Equal(t, DelayLocal, src, "empty advice is no advice")
	p.SetFleet(5, &FleetAdvice{Delay: 1, Samples: 1}) // out of range: ignored
}

func TestDelayFromFixedDelayTakesFleetAdvice(t *testing.T) {
	p := NewPolicy(Config{Sources: 1, Delay: time.Second, MaxAttempts: 2})
	p.SetFleet(0, &FleetAdvice{Delay: int64(10 * time.Microsecond), Samples: 5})
	d, src := p.DelayFrom(0)
	assert.Equal(t, minAdaptiveDelayNanos, d, "never below 1 ms")
	assert.Equal(t, DelayFleet, src)
}

func TestRaceRecordsTheDelayOfEachAttempt(t *testing.T) {
	p := NewPolicy(Config{Sources: 2, Delay: 100 * time.Millisecond, MaxAttempts: 3, StallAfter: 50 * time.Millisecond, Continuation: true})
	p.SetFleet(1, &FleetAdvice{Delay: int64(40 * time.Millisecond), Samples: 100})
	r := newRace(p, false)
	r.Start(0)
	assert.Equal(t, DelayFallback, r.Attempt(0).DelaySource)
	assert.Equal(t, 100*ms, r.Attempt(0).Delay)
	r.Advance(100 * ms)
	assert.Equal(t, DelayFleet, r.Attempt(1).DelaySource)
	assert.Equal(t, 40*ms, r.Attempt(1).Delay)
	assert.Equal(t, 140*ms, r.Deadline(), "the second hedge waits for the fleet's delay of source 1")

	r.Content(1, 120*ms, true)
	r.Advance(170 * ms) // a stall: the continuation starts after commit
	assert.Equal(t, 3, r.Attempts())
	assert.Equal(t, DelayNone, r.Attempt(2).DelaySource)
	assert.Empty(t, DelayNone.String())
	assert.Equal(t, "fleet", DelayFleet.String())
	assert.Equal(t, "local", DelayLocal.String())
	assert.Equal(t, "fallback", DelayFallback.String())
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDelayEstimatorColdStartThenQuantile(t *testing.T) {
	e := NewDelayEstimator(0.95, int64(2*time.Second), int64(DefaultWindow), 20)
	for i := 1; i <= 19; i++ {
		e.Observe(int64(i)*ms, int64(i)*10*ms)
		assert.Equal(t, int64(2*time.Second), e.Delay(), "cold until 20 samples")
	}
	for i := 20; i <= 100; i++ {
		e.Observe(int64(i)*ms, int64(i)*10*ms)
	}
	// Samples 10 ms .. 1000 ms: p95 is 950 ms within the sketch's 1 %.
	assert.InEpsilon(t, float64(950*ms), float64(e.Delay()), 0.02)
}

func TestDelayEstimatorForgetsOldWindows(t *testing.T) {
	window := int64(time.Minute)
	e := NewDelayEstimator(0.5, int64(time.Second), window, 20)
	for i := range 100 {
		e.Observe(int64(i)*ms, 5*int64(time.Second))
	}
	assert.InEpsilon(t, float64(5*time.Second), float64(e.Delay()), 0.02)
	// The next window sees fast answers: the median follows once they are the
	// majority (the cached quantile lags by at most recomputeEvery samples).
	for i := range 110 {
		e.Observe(window+int64(i)*ms, 100*ms)
	}
	assert.InEpsilon(t, float64(100*ms), float64(e.Delay()), 0.02)
	// Two windows later the incident is gone entirely.
	for i := range 20 {
		e.Observe(3*window+int64(i)*ms, 300*ms)
	}
	assert.InEpsilon(t, float64(300*ms), float64(e.Delay()), 0.02)
	// After a long idle period everything is stale: cold start again.
	e.Observe(10*window, 10*ms)
	assert.Equal(t, int64(time.Second), e.Delay())
}

func TestDelayEstimatorIgnoresNonPositive(t *testing.T) {
	e := NewDelayEstimator(0.95, 7, int64(DefaultWindow), 1)
	e.Observe(1, 0)
	e.Observe(1, -5)
	assert.Equal(t, int64(7), e.Delay())
}

// ObserveN(v, n) learns what n calls of Observe(v) do: a run of gaps
// known by its count and mean weighs as its gaps one by one.
func TestDelayEstimatorObserveNWeighsAsNSamples(t *testing.T) {
	one := NewDelayEstimator(0.99, 7, int64(DefaultWindow), 20)
	many := NewDelayEstimator(0.99, 7, int64(DefaultWindow), 20)
	for range 992 {
		one.Observe(1, 10*ms)
	}
	for range 8 {
		one.Observe(1, 5000*ms)
	}
	many.ObserveN(1, 10*ms, 992)
	many.ObserveN(1, 5000*ms, 8)
	many.ObserveN(1, 0, 10) // nothing, as Observe(0)
	many.ObserveN(1, 10*ms, 0)
	d, n, ok := many.Local()
	assert.True(t, ok)
	assert.Equal(t, int64(1000), n)
	assert.Equal(t, one.Delay(), d, "p99 of 992 gaps of 10 ms and 8 of 5 s")
}

func TestDelayEstimatorConcurrent(t *testing.T) {
	e := NewDelayEstimator(0.95, int64(time.Second), int64(DefaultWindow), 20)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 1000 {
				e.Observe(int64(i)*ms, int64(rng.IntN(100)+1)*ms)
				_ = e.Delay()
			}
		})
	}
	wg.Wait()
	assert.InEpsilon(t, float64(95*ms), float64(e.Delay()), 0.05)
}

func TestBudgetRetryThrottlingArithmetic(t *testing.T) {
	b := NewBudget(10, 0.1)
	assert.InDelta(t, 10, b.level(), 1e-9)
	allowed := 0
	for b.Allow() {
		allowed++
	}
	// Allowed while tokens > 5: at 10, 9, 8, 7 and 6.
	assert.Equal(t, 5, allowed)
	assert.InDelta(t, 5, b.level(), 1e-9)
	b.Success()
	assert.InDelta(t, 5.1, b.level(), 1e-9)
	assert.True(t, b.Allow())
	assert.False(t, b.Allow())
	for range 20 {
		b.Failure()
	}
	assert.InDelta(t, 0, b.level(), 1e-9, "never below zero")
	for range 200 {
		b.Success()
	}
	assert.InDelta(t, 10, b.level(), 1e-9, "never above maxTokens")
}

func TestBudgetDisabled(t *testing.T) {
	b := NewBudget(0, 0.1)
	assert.Nil(t, b)
	assert.True(t, b.Allow())
	b.Failure()
	b.Success()
}

// BenchmarkHedgeDecision is the per-call decision: the learned delay of the
// source (quantile lookup) and the budget check.
func BenchmarkHedgeDecision(b *testing.B) {
	p := NewPolicy(Config{
		Sources: 2, Adaptive: true, Quantile: DefaultQuantile, Delay: 2 * time.Second,
		MaxTokens: 10, TokenRatio: 0.1, MaxAttempts: 3,
	})
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 1000 {
		p.Observe(i%2, int64(i)*ms, int64(rng.IntN(3000)+500)*ms)
	}
	b.ReportAllocs()
	var sink int64
	i := 0
	for b.Loop() {
		d, _ := p.DelayFrom(i & 1)
		sink += d
		if p.budget.Allow() {
			p.budget.Success()
		}
		i++
	}
	_ = sink
}

// BenchmarkRaceCall runs one hedged call through the decision core: start,
// TTFT hedge, commit, 10 chunks, completion.
func BenchmarkRaceCall(b *testing.B) {
	p := NewPolicy(Config{
		Sources: 2, Adaptive: true, Quantile: DefaultQuantile, Delay: 2 * time.Second,
		MaxTokens: 10, TokenRatio: 0.1, MaxAttempts: 3,
	})
	r := &Race{}
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(p, false)
		r.Start(0)
		r.Advance(r.Deadline())
		for c := range int64(10) {
			r.Content(1, r.attempts[1].Start+100*ms+c*ms, true)
		}
		r.Complete(1, r.attempts[1].Start+200*ms)
		r.Actions()
	}
}

func TestDelayEstimatorCensoredSamples(t *testing.T) {
	e := NewDelayEstimator(0.5, int64(time.Second), DefaultWindow.Nanoseconds(), 20)
	for i := range 40 {
		e.Observe(int64(i)*ms, 100*ms)
	}
	assert.InEpsilon(t, float64(100*ms), float64(e.Delay()), 0.02)
	// Losers cancelled after 50 ms say nothing about the median: dropped.
	for i := range 100 {
		e.ObserveCensored(int64(40+i)*ms, 50*ms)
	}
	assert.InEpsilon(t, float64(100*ms), float64(e.Delay()), 0.02)
	// Losers cancelled after 300 ms are above it whatever their real TTFT.
	for i := range 60 {
		e.ObserveCensored(int64(140+i)*ms, 300*ms)
	}
	assert.InEpsilon(t, float64(300*ms), float64(e.Delay()), 0.02)
}

func TestRaceRecordsCensoredLosers(t *testing.T) {
	p := NewPolicy(Config{Sources: 2, Adaptive: true, Quantile: 0.5, Delay: 100 * time.Millisecond, MinSamples: 1, MaxAttempts: 2})
	r := &Race{}
	r.Reset(p, false)
	r.Start(0)
	r.Advance(100 * ms)
	r.Content(1, 130*ms, true) // the hedge wins after 30 ms; the primary ran 130 ms
	r.Actions()
	assert.InEpsilon(t, float64(130*ms), float64(delay(p, 0)), 0.02, "the primary's censored 130 ms is a sample")
	assert.InEpsilon(t, float64(30*ms), float64(delay(p, 1)), 0.02)
}

// delay is the hedge delay of source, without where it came from.
func delay(p *Policy, source int) int64 {
	d, _ := p.DelayFrom(source)
	return d
}

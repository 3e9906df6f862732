// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package advice

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exponentialCensored draws n exponential durations of mean 1 and censors
// them independently with exponential censoring times of rate
// share/(1-share), so that a share of them is censored.
func exponentialCensored(n int, share float64, seed uint64) (c *Censored, censored int) {
	rng := rand.New(rand.NewPCG(seed, 0))
	rate := share / (1 - share)
	c = NewCensored()
	for range n {
		t := rng.ExpFloat64()
		cut := rng.ExpFloat64() / rate
		if cut < t {
			c.AddCensored(cut)
			censored++
		} else {
			c.Add(t)
		}
	}
	return c, censored
}

// TestKaplanMeierExponential is the known answer: the p95 of an exponential
// of mean 1 is ln 20. With 30 % of the samples censored, the winners-only
// quantile is that of min(T, C), an exponential of rate 1/0.7: ln 20 * 0.7,
// 30 % low. The product-limit estimate stays within the sketch's 1 % plus
// the sampling error.
func TestKaplanMeierExponential(t *testing.T) {
	c, censored := exponentialCensored(50000, 0.3, 1)
	assert.InDelta(t, 0.3, float64(censored)/50000, 0.01)

	for _, q := range []float64{0.5, 0.9, 0.95, 0.99} {
		want := -math.Log(1 - q)
		km, ok := c.Quantile(q)
		require.True(t, ok, q)
		assert.InEpsilon(t, want, km, 0.04, "Kaplan-Meier p%v", 100*q)
		naive, ok := c.NaiveQuantile(q)
		require.True(t, ok)
		assert.InEpsilon(t, want*0.7, naive, 0.04, "winners-only p%v", 100*q)
		assert.Less(t, naive, 0.8*want, "winners-only p%v must be biased low", 100*q)
	}
}

// TestKaplanMeierHedgingCensoring censors the way hedging does: an attempt
// slower than the delay d is cancelled when its hedge answers, at d plus
// the hedge's own TTFT. Every slow attempt is censored, yet the p95 stays
// identified because a share of them win against slower hedges.
func TestKaplanMeierHedgingCensoring(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 0))
	c := NewCensored()
	d := -math.Log(1 - 0.75) // hedge at the p75: a quarter of the calls hedge
	for range 40000 {
		primary := rng.ExpFloat64()
		if primary <= d {
			c.Add(primary)
			continue
		}
		hedge := rng.ExpFloat64()
		if d+hedge < primary {
			c.AddCensored(d + hedge) // the primary loses
			c.Add(hedge)
		} else {
			c.Add(primary)
			c.AddCensored(primary - d) // the hedge loses
		}
	}
	km, ok := c.Quantile(0.95)
	require.True(t, ok)
	assert.InEpsilon(t, math.Log(20), km, 0.04)
	naive, _ := c.NaiveQuantile(0.95)
	assert.Less(t, naive, 0.9*math.Log(20))
}

// Without censoring, the estimate is the sketch's quantile.
func TestKaplanMeierNoCensoringMatchesSketch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 0))
	c := NewCensored()
	for range 10000 {
		c.Add(1 + 100*rng.Float64())
	}
	for _, q := range []float64{0.1, 0.5, 0.95, 0.999} {
		km, ok := c.Quantile(q)
		require.True(t, ok)
		sk, _ := c.NaiveQuantile(q)
		assert.InEpsilon(t, sk, km, 0.021, q) // at most one bin apart
	}
}

func TestKaplanMeierUndefined(t *testing.T) {
	c := NewCensored()
	_, ok := c.Quantile(0.5)
	assert.False(t, ok, "empty")

	for i := range 10 {
		c.Add(float64(i + 1))
	}
	for range 90 {
		c.AddCensored(20) // the tail is all censored: beyond p10 nothing is known
	}
	v, ok := c.Quantile(0.1)
	assert.True(t, ok)
	assert.InEpsilon(t, 10, v, 0.02)
	_, ok = c.Quantile(0.5)
	assert.False(t, ok, "the median is not identified")

	for _, q := range []float64{0, 1, -1, math.NaN()} {
		_, ok = c.Quantile(q)
		assert.False(t, ok, q)
	}
	vals, oks := c.Quantiles([]float64{0.05, 0.5, 0.1}, nil)
	assert.Len(t, vals, 3)
	assert.Equal(t, []bool{true, false, false}, oks, "quantiles must be ascending: past an unidentified one the rest stay unset")
}

func TestCensoredIgnoresInvalid(t *testing.T) {
	c := NewCensored()
	for _, v := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		c.Add(v)
		c.AddCensored(v)
	}
	assert.Zero(t, c.Count())
}

func TestCensoredMergeAndClear(t *testing.T) {
	a, b := NewCensored(), NewCensored()
	a.Add(1)
	b.AddCensored(2)
	a.MergeWith(b)
	assert.Equal(t, 1.0, a.Events())
	assert.Equal(t, 1.0, a.Censored())
	a.Clear()
	assert.Zero(t, a.Count())
}

// TestWorkedExample is the example of docs/hedging.md: ten hedged calls at a
// 100 ms delay, whose losers were cancelled before their first content.
func TestWorkedExample(t *testing.T) {
	c := NewCensored()
	for _, ms := range []float64{40, 40, 50, 60, 60, 70, 80, 80, 90, 600} {
		c.Add(ms)
	}
	for _, ms := range []float64{140, 160, 180, 500} {
		c.AddCensored(ms)
	}
	km, ok := c.Quantiles([]float64{0.5, 0.9}, nil)
	require.Equal(t, []bool{true, true}, ok)
	assert.InEpsilon(t, 80, km[0], 0.01)
	assert.InEpsilon(t, 600, km[1], 0.01)
	naive50, _ := c.NaiveQuantile(0.5)
	naive90, _ := c.NaiveQuantile(0.9)
	assert.InEpsilon(t, 60, naive50, 0.01)
	assert.InEpsilon(t, 90, naive90, 0.01)
}

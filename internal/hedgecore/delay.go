// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/DataDog/sketches-go/ddsketch"

	"github.com/streamstall/streamstall/internal/advice"
)

// Estimator constants.
const (
	recomputeEvery        = 8
	minAdaptiveDelayNanos = int64(1e6) // never hedge sooner than 1 ms: below that it is a duplicate request
)

// DelayEstimator learns the hedge delay of one source (one endpoint and
// model) as a quantile of its recent time to first content. Samples go into a
// DDSketch per window; two windows rotate, so the estimate covers between one
// and two windows of history and forgets an incident within two. The quantile
// is recomputed every few samples and cached, so the per-call lookup is one
// atomic load: the decision path never touches the sketch.
type DelayEstimator struct {
	quantile   float64
	fallback   int64
	window     int64
	minSamples float64

	mu        sync.Mutex
	cur, prev *ddsketch.DDSketch
	scratch   *ddsketch.DDSketch
	windowEnd int64
	pending   int

	cached atomic.Int64 // nanoseconds; 0 while cold
	// samples is the number of samples in the windows at the last
	// recompute: the weight of the local estimate against fleet advice.
	samples atomic.Int64
}

// NewDelayEstimator returns a cold estimator of the given quantile; fallback
// and window are nanoseconds.
func NewDelayEstimator(quantile float64, fallback, window int64, minSamples int) *DelayEstimator {
	return &DelayEstimator{
		quantile:   quantile,
		fallback:   fallback,
		window:     window,
		minSamples: float64(minSamples),
		cur:        advice.NewSketch(),
		prev:       advice.NewSketch(),
		scratch:    advice.NewSketch(),
	}
}

// Delay returns the hedge delay in nanoseconds: the learned quantile, or the
// fallback until enough samples have been seen (cold start).
func (e *DelayEstimator) Delay() int64 {
	if d := e.cached.Load(); d > 0 {
		return d
	}
	return e.fallback
}

// Observe records one time to first content (nanoseconds) seen at now.
func (e *DelayEstimator) Observe(now, ttft int64) {
	if ttft <= 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	rotated := e.rotate(now)
	// Add only fails on negative or NaN values, excluded above.
	_ = e.cur.Add(float64(ttft))
	e.pending++
	if rotated || e.pending >= recomputeEvery || e.cached.Load() == 0 {
		e.recompute()
	}
}

// ObserveN records n samples of one value (nanoseconds) seen at now, as n
// calls of Observe would: the gaps of a run of chunks known by their count
// and their mean.
func (e *DelayEstimator) ObserveN(now, v, n int64) {
	if v <= 0 || n <= 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	rotated := e.rotate(now)
	// AddWithCount only fails on negative or NaN values, excluded above.
	_ = e.cur.AddWithCount(float64(v), float64(n))
	e.pending += int(min(n, recomputeEvery))
	if rotated || e.pending >= recomputeEvery || e.cached.Load() == 0 {
		e.recompute()
	}
}

// ObserveCensored records an attempt cancelled after elapsed nanoseconds
// without content: its TTFT is only known to exceed elapsed. For a quantile
// that is all that matters when elapsed is at or above the current estimate:
// the sample is above the quantile whatever its true value, so it is
// recorded at elapsed. Shorter censored runs are dropped. Without this, only
// the winners of races would be sampled, the slow attempts that hedging
// cancels would vanish from the distribution, and the delay would sink until
// the budget stopped it.
func (e *DelayEstimator) ObserveCensored(now, elapsed int64) {
	if elapsed >= e.Delay() {
		e.Observe(now, elapsed)
	}
}

// rotate starts a new window when now has passed the current one. Time going
// backwards (calls finishing out of order) is treated as the current window.
func (e *DelayEstimator) rotate(now int64) bool {
	switch {
	case e.windowEnd == 0:
		e.windowEnd = now + e.window
		return false
	case now < e.windowEnd:
		return false
	case now < e.windowEnd+e.window:
		e.prev, e.cur = e.cur, e.prev
		e.cur.Clear()
		e.windowEnd += e.window
	default: // idle for more than a window: everything is stale
		e.prev.Clear()
		e.cur.Clear()
		e.windowEnd = now + e.window
	}
	return true
}

// Local returns the learned delay and the samples behind it; ok is false
// while cold.
func (e *DelayEstimator) Local() (delay, samples int64, ok bool) {
	d := e.cached.Load()
	return d, e.samples.Load(), d > 0
}

func (e *DelayEstimator) recompute() {
	e.pending = 0
	n := e.cur.GetCount() + e.prev.GetCount()
	e.samples.Store(int64(n))
	if n < e.minSamples {
		e.cached.Store(0)
		return
	}
	e.scratch.Clear()
	// Merging sketches of one mapping cannot fail.
	_ = e.scratch.MergeWith(e.prev)
	_ = e.scratch.MergeWith(e.cur)
	q, err := e.scratch.GetValueAtQuantile(e.quantile)
	if err != nil || math.IsNaN(q) {
		e.cached.Store(0)
		return
	}
	e.cached.Store(max(int64(q), minAdaptiveDelayNanos))
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

import (
	"math"
	"sync/atomic"
)

// budgetScale is the fixed-point scale of the token count: a thousandth of a
// token, as in gRPC's retryThrottling, so tokenRatio keeps three decimals.
const budgetScale = 1000

// Budget is the token bucket of gRPC's retryThrottling (gRFC A6), shared by
// every call of one Hedger. A hedge or retry is allowed only while the bucket
// holds more than half of maxTokens, and it costs one token; a failed attempt
// costs one token; a successful call refunds tokenRatio. When every source is
// slow the bucket drains and hedging stops by itself, so a hedge storm cannot
// amplify an outage: in the long run extra attempts per call stay below
// tokenRatio.
//
// A client's bucket (ClientBudgets) also draws on a shared one, the cap over
// all clients: see ClientBudgets for how.
type Budget struct {
	tokens    atomic.Int64 // in thousandths of a token
	max       int64
	threshold int64
	ratio     int64
	shared    *Budget
}

// NewBudget returns a full bucket, or nil (no budget) when maxTokens <= 0.
func NewBudget(maxTokens, tokenRatio float64) *Budget {
	if maxTokens <= 0 || math.IsNaN(maxTokens) || math.IsInf(maxTokens, 0) {
		return nil
	}
	b := &Budget{
		max:   int64(maxTokens * budgetScale),
		ratio: int64(math.Round(max(tokenRatio, 0) * budgetScale)),
	}
	b.threshold = b.max / 2
	b.tokens.Store(b.max)
	return b
}

// Allow takes one token for a hedge or retry and reports whether it may go.
// A client's bucket allows it only when the shared one does too.
func (b *Budget) Allow() bool {
	ok, _ := b.allow()
	return ok
}

// allow is Allow, and for a refusal whether the shared bucket refused it
// (the client's own allowed it): the cap over all clients, which stops
// hedging for every client, not one client's own spent bucket.
func (b *Budget) allow() (ok, byShared bool) {
	if b == nil {
		return true, false
	}
	taken := b.take()
	if taken == 0 {
		return false, false
	}
	if b.shared != nil && b.shared.take() == 0 {
		b.add(taken) // refused by the cap over all clients: nothing was spent
		return false, true
	}
	return true, false
}

// take takes one token while the bucket is above its threshold and returns
// what it took, 0 for a refusal.
func (b *Budget) take() int64 {
	for {
		t := b.tokens.Load()
		if t <= b.threshold {
			return 0
		}
		n := max(t-budgetScale, 0)
		if b.tokens.CompareAndSwap(t, n) {
			return t - n
		}
	}
}

// Failure records a failed attempt. A client's failure costs the shared
// bucket too while the client's own bucket still allows hedges: a client
// whose bucket is spent starts no more of them, so its further failures
// cost only itself, and one client alone cannot spend the shared bucket.
func (b *Budget) Failure() {
	if b == nil {
		return
	}
	for {
		t := b.tokens.Load()
		if b.tokens.CompareAndSwap(t, max(t-budgetScale, 0)) {
			if t > b.threshold && b.shared != nil {
				b.shared.Failure()
			}
			return
		}
	}
}

// Success records a successful call.
func (b *Budget) Success() {
	if b == nil {
		return
	}
	b.add(b.ratio)
	if b.shared != nil {
		b.shared.Success()
	}
}

// add puts n thousandths of a token back, up to the bucket's size.
func (b *Budget) add(n int64) {
	for {
		t := b.tokens.Load()
		if b.tokens.CompareAndSwap(t, min(t+n, b.max)) {
			return
		}
	}
}

// level returns the tokens in the bucket, for the tests.
func (b *Budget) level() float64 {
	if b == nil {
		return math.Inf(1)
	}
	return float64(b.tokens.Load()) / budgetScale
}

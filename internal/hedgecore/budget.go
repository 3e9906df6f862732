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
type Budget struct {
	tokens    atomic.Int64 // in thousandths of a token
	max       int64
	threshold int64
	ratio     int64
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
func (b *Budget) Allow() bool {
	if b == nil {
		return true
	}
	for {
		t := b.tokens.Load()
		if t <= b.threshold {
			return false
		}
		if b.tokens.CompareAndSwap(t, max(t-budgetScale, 0)) {
			return true
		}
	}
}

// Failure records a failed attempt.
func (b *Budget) Failure() {
	if b == nil {
		return
	}
	for {
		t := b.tokens.Load()
		if b.tokens.CompareAndSwap(t, max(t-budgetScale, 0)) {
			return
		}
	}
}

// Success records a successful call.
func (b *Budget) Success() {
	if b == nil {
		return
	}
	for {
		t := b.tokens.Load()
		if b.tokens.CompareAndSwap(t, min(t+b.ratio, b.max)) {
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

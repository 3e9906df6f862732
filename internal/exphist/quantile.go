// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package exphist

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Quantile returns the q-quantile (0 <= q <= 1) of the values recorded in
// dp, or NaN when dp is empty. The value of a bucket (lo, hi] is reported as
// 2*lo*hi/(lo+hi), the point whose relative error to any value in the bucket
// is at most (base-1)/(base+1): the accuracy a DDSketch mapping promises.
// Results are clamped to the point's min and max when it has them.
func Quantile(dp pmetric.ExponentialHistogramDataPoint, q float64) float64 {
	neg, pos := dp.Negative().BucketCounts(), dp.Positive().BucketCounts()
	total := dp.ZeroCount()
	for i := 0; i < neg.Len(); i++ {
		total += neg.At(i)
	}
	for i := 0; i < pos.Len(); i++ {
		total += pos.At(i)
	}
	if total == 0 || math.IsNaN(q) {
		return math.NaN()
	}
	q = min(max(q, 0), 1)
	// The 0-based rank of the wanted value among the sorted values.
	rank := uint64(q * float64(total-1))
	gamma := base(dp.Scale())
	clamp := func(v float64) float64 {
		if dp.HasMin() {
			v = max(v, dp.Min())
		}
		if dp.HasMax() {
			v = min(v, dp.Max())
		}
		return v
	}
	var seen uint64
	// Negative buckets: most negative (highest index) first.
	for i := neg.Len() - 1; i >= 0; i-- {
		seen += neg.At(i)
		if rank < seen {
			return clamp(-representative(gamma, int(dp.Negative().Offset())+i))
		}
	}
	seen += dp.ZeroCount()
	if rank < seen {
		return clamp(0)
	}
	for i := 0; i < pos.Len(); i++ {
		seen += pos.At(i)
		if rank < seen {
			return clamp(representative(gamma, int(dp.Positive().Offset())+i))
		}
	}
	return clamp(math.Inf(1)) // unreachable: rank < total
}

// representative is the value reported for bucket index i: (gamma^i, gamma^(i+1)].
func representative(gamma float64, i int) float64 {
	lo := math.Pow(gamma, float64(i))
	hi := lo * gamma
	return 2 * lo * hi / (lo + hi)
}

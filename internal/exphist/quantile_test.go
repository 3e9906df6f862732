// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package exphist

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// point builds a scale-0 (base 2) point from bucket counts starting at offset.
func point(offset int32, zero uint64, counts ...uint64) pmetric.ExponentialHistogramDataPoint {
	dp := pmetric.NewExponentialHistogramDataPoint()
	dp.SetScale(0)
	dp.SetZeroCount(zero)
	dp.Positive().SetOffset(offset)
	dp.Positive().BucketCounts().FromRaw(counts)
	return dp
}

func TestQuantile(t *testing.T) {
	// Buckets (1,2], (2,4], (4,8] with 1, 2, 1 values.
	dp := point(0, 0, 1, 2, 1)
	assert.InDelta(t, 4.0/3, Quantile(dp, 0), 1e-12)
	assert.InDelta(t, 8.0/3, Quantile(dp, 0.5), 1e-12)
	assert.InDelta(t, 16.0/3, Quantile(dp, 1), 1e-12)

	dp.SetMin(1.5)
	dp.SetMax(5)
	assert.Equal(t, 1.5, Quantile(dp, 0), "clamped to min")
	assert.Equal(t, 5.0, Quantile(dp, 1), "clamped to max")

	assert.Equal(t, 0.0, Quantile(point(0, 3, 1), 0.5), "zero bucket")
	assert.True(t, math.IsNaN(Quantile(point(0, 0), 0.5)))
}

func TestQuantileRelativeError(t *testing.T) {
	// Every value v in its bucket is reported within (base-1)/(base+1).
	for scale := int32(-2); scale <= 8; scale++ {
		base := math.Exp2(math.Exp2(-float64(scale)))
		bound := (base - 1) / (base + 1)
		for _, v := range []float64{0.001, 0.37, 1, 1.5, 2.0001, 55, 1234.5} {
			idx := int32(math.Ceil(math.Log(v)/math.Log(base))) - 1
			dp := pmetric.NewExponentialHistogramDataPoint()
			dp.SetScale(scale)
			dp.Positive().SetOffset(idx)
			dp.Positive().BucketCounts().FromRaw([]uint64{1})
			got := Quantile(dp, 0.5)
			assert.LessOrEqual(t, math.Abs(got-v)/v, bound*(1+1e-9), "scale %d value %g got %g", scale, v, got)
		}
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package exphist

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

var quantiles = []float64{0.01, 0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99, 0.999}

// distributions are random and adversarial latency data, in seconds.
var distributions = map[string]func(r *rand.Rand) float64{
	"uniform":   func(r *rand.Rand) float64 { return 0.05 + 30*r.Float64() },
	"lognormal": func(r *rand.Rand) float64 { return 1.6 * math.Exp(r.NormFloat64()) },
	// Pareto with alpha 1.1: infinite variance, values up to ~1e4 seconds.
	"pareto": func(r *rand.Rand) float64 { return 0.01 / math.Pow(1-r.Float64(), 1/1.1) },
	// Fast chunks and 55 s stalls, the field data of docs/contract.md section 1.
	"bimodal": func(r *rand.Rand) float64 {
		if r.Float64() < 0.7 {
			return math.Abs(0.03 + 0.005*r.NormFloat64())
		}
		return 55 * math.Exp(0.3*r.NormFloat64())
	},
	// Many identical values, among them exact bucket bounds.
	"identical": func(r *rand.Rand) float64 { return []float64{1.5, 2, 0.25, 0.1}[r.IntN(4)] },
	"tiny_and_huge": func(r *rand.Rand) float64 {
		if r.Float64() < 0.5 {
			return 1e-9 * (1 + r.Float64())
		}
		return 1e6 * (1 + r.Float64())
	},
	"log_uniform_wide": func(r *rand.Rand) float64 { return math.Pow(10, -9+15*r.Float64()) },
	"with_zeros": func(r *rand.Rand) float64 {
		if r.Float64() < 0.2 {
			return 0
		}
		return 0.4 * math.Exp(r.NormFloat64())
	},
}

func TestQuantilesFromExportedBuckets(t *testing.T) {
	const relativeAccuracy = 0.01
	scale, err := ScaleForAccuracy(relativeAccuracy)
	require.NoError(t, err)
	for _, maxBuckets := range []int{160, 8192} {
		layout, err := NewLayout(scale, maxBuckets)
		require.NoError(t, err)
		for name, draw := range distributions {
			r := rand.New(rand.NewPCG(42, uint64(len(name))))
			values := make([]float64, 20_000)
			h := layout.NewHistogram()
			for i := range values {
				values[i] = draw(r)
				require.NoError(t, h.Record(values[i]))
			}
			slices.Sort(values)
			dp := pmetric.NewExponentialHistogramDataPoint()
			h.CopyTo(dp)

			require.Equal(t, uint64(len(values)), dp.Count(), name)
			require.LessOrEqual(t, dp.Positive().BucketCounts().Len(), maxBuckets, name)
			var inBuckets uint64
			for _, c := range dp.Positive().BucketCounts().AsRaw() {
				inBuckets += c
			}
			require.Equal(t, dp.Count(), inBuckets+dp.ZeroCount(), name)
			assert.Equal(t, values[0], dp.Min(), name)
			assert.Equal(t, values[len(values)-1], dp.Max(), name)

			// Within max_buckets the configured scale holds, and with it the
			// configured accuracy; past it the accuracy of the scale exported.
			accuracy := Accuracy(dp.Scale())
			if maxBuckets == 8192 {
				require.Equal(t, scale, dp.Scale(), name)
				require.LessOrEqual(t, accuracy, relativeAccuracy)
			}
			for _, q := range quantiles {
				exact := values[int(q*float64(len(values)-1))]
				got := Quantile(dp, q)
				if exact == 0 {
					assert.Zero(t, got, "%s p%v", name, q*100)
					continue
				}
				assert.LessOrEqual(t, math.Abs(got-exact)/exact, accuracy*(1+1e-9),
					"%s max_buckets %d scale %d p%v: exact %v, from buckets %v", name, maxBuckets, dp.Scale(), q*100, exact, got)
				// The exported buckets are the sketch's bins: both answer alike,
				// but for the reader's clamping to the exact min and max.
				fromSketch, err := h.Sketch().GetValueAtQuantile(q)
				require.NoError(t, err)
				assert.InEpsilon(t, min(max(fromSketch, dp.Min()), dp.Max()), got, 1e-9, "%s p%v", name, q*100)
			}
		}
	}
}

func TestRecordRefusesInvalidValues(t *testing.T) {
	layout, err := NewLayout(6, 160)
	require.NoError(t, err)
	h := layout.NewHistogram()
	for _, v := range []float64{-1, math.Copysign(0, -1) - 1e-300, math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64} {
		assert.ErrorIs(t, h.Record(v), ErrInvalidValue, v)
	}
	assert.Zero(t, h.Count())
	require.NoError(t, h.Record(math.Copysign(0, -1))) // -0 is zero
	require.NoError(t, h.Record(math.SmallestNonzeroFloat64))
	dp := pmetric.NewExponentialHistogramDataPoint()
	h.CopyTo(dp)
	assert.Equal(t, uint64(2), dp.ZeroCount())
	assert.Positive(t, dp.ZeroThreshold(), "a subnormal counted as zero widens the zero bucket")
	assert.Zero(t, dp.Positive().BucketCounts().Len())
}

func TestDownscaleKeepsBucketsTrue(t *testing.T) {
	layout, err := NewLayout(6, 16)
	require.NoError(t, err)
	h := layout.NewHistogram()
	values := []float64{1, 1.01, 1.5, 2, 2.5, 3.99, 4, 7, 100, 0.001, 0}
	for _, v := range values {
		require.NoError(t, h.Record(v))
	}
	dp := pmetric.NewExponentialHistogramDataPoint()
	h.CopyTo(dp)
	require.LessOrEqual(t, dp.Positive().BucketCounts().Len(), 16)
	require.Less(t, dp.Scale(), int32(6))
	// Every value must sit in the exported bucket that covers it.
	m, err := NewMapping(dp.Scale())
	require.NoError(t, err)
	want := make([]uint64, dp.Positive().BucketCounts().Len())
	for _, v := range values {
		if v > 0 {
			want[m.Index(v)-int(dp.Positive().Offset())]++
		}
	}
	assert.Equal(t, want, dp.Positive().BucketCounts().AsRaw())
	assert.Equal(t, uint64(1), dp.ZeroCount())
	assert.Equal(t, uint64(len(values)), dp.Count())
	assert.InDelta(t, 123.001, dp.Sum(), 1e-9)
}

func TestDownscaleStopsAtMinScale(t *testing.T) {
	layout, err := NewLayout(0, 2)
	require.NoError(t, err)
	h := layout.NewHistogram()
	for _, v := range []float64{1e-300, 1e300, 1} {
		require.NoError(t, h.Record(v))
	}
	assert.Equal(t, MinScale, h.Scale())
	dp := pmetric.NewExponentialHistogramDataPoint()
	h.CopyTo(dp)
	assert.Equal(t, uint64(3), dp.Count())
}

func TestEmptyHistogramExport(t *testing.T) {
	layout, err := NewLayout(6, 160)
	require.NoError(t, err)
	dp := pmetric.NewExponentialHistogramDataPoint()
	layout.NewHistogram().CopyTo(dp)
	assert.Zero(t, dp.Count())
	assert.False(t, dp.HasMin())
	assert.Zero(t, dp.Positive().BucketCounts().Len())
}

func TestRecordNIsNRecords(t *testing.T) {
	layout, err := NewLayout(6, 16)
	require.NoError(t, err)
	one, many := layout.NewHistogram(), layout.NewHistogram()
	for _, v := range []float64{0, 1.5, 0.01, 300} {
		for range 5 {
			require.NoError(t, one.Record(v))
		}
		require.NoError(t, many.RecordN(v, 5))
	}
	require.NoError(t, many.RecordN(7, 0))
	assert.ErrorIs(t, many.RecordN(-1, 3), ErrInvalidValue)
	a, b := pmetric.NewExponentialHistogramDataPoint(), pmetric.NewExponentialHistogramDataPoint()
	one.CopyTo(a)
	many.CopyTo(b)
	assert.Equal(t, a.Count(), b.Count())
	assert.InDelta(t, a.Sum(), b.Sum(), 1e-9)
	assert.Equal(t, a.Scale(), b.Scale())
	assert.Equal(t, a.ZeroCount(), b.ZeroCount())
	assert.Equal(t, a.Positive().Offset(), b.Positive().Offset())
	assert.Equal(t, a.Positive().BucketCounts().AsRaw(), b.Positive().BucketCounts().AsRaw())
	assert.Equal(t, a.Min(), b.Min())
	assert.Equal(t, a.Max(), b.Max())
}

func TestResetReturnsToTheLayoutScale(t *testing.T) {
	layout, err := NewLayout(6, 16)
	require.NoError(t, err)
	h := layout.NewHistogram()
	for _, v := range []float64{0, 0.001, 1000, math.SmallestNonzeroFloat64} {
		require.NoError(t, h.Record(v))
	}
	require.Less(t, h.Scale(), int32(6))
	h.Reset()
	assert.Equal(t, int32(6), h.Scale())
	assert.Zero(t, h.Count())
	dp := pmetric.NewExponentialHistogramDataPoint()
	h.CopyTo(dp)
	assert.Zero(t, dp.Count())
	assert.Zero(t, dp.ZeroCount())
	assert.Zero(t, dp.ZeroThreshold())
	assert.Zero(t, dp.Positive().BucketCounts().Len())

	require.NoError(t, h.Record(2))
	dp = pmetric.NewExponentialHistogramDataPoint()
	h.CopyTo(dp)
	assert.Equal(t, int32(6), dp.Scale())
	assert.Equal(t, int32(63), dp.Positive().Offset(), "2 ends bucket 63 at scale 6")
	assert.Equal(t, []uint64{1}, dp.Positive().BucketCounts().AsRaw())
	assert.Equal(t, 2.0, dp.Min())
}

// RecordAll leaves the histogram Record one by one leaves: the same scale,
// buckets, zero count, count, sum, min and max, across downscales and tiny
// values, onto an empty histogram or a filled one, with the buckets of a
// batch counted before they are stored or, past their counting range (many
// buckets), stored one by one.
func TestRecordAllIsRecordOneByOne(t *testing.T) {
	for _, maxBuckets := range []int{160, 4096} {
		layout, err := NewLayout(6, maxBuckets)
		require.NoError(t, err)
		recordAllIsRecordOneByOne(t, layout)
	}
}

func recordAllIsRecordOneByOne(t *testing.T, layout *Layout) {
	r := rand.New(rand.NewPCG(5, 6))
	batch := func(n int, spread float64) []float64 {
		vs := make([]float64, n)
		for i := range vs {
			switch r.IntN(20) {
			case 0:
				vs[i] = 0
			case 1:
				vs[i] = 1e-320 // below the smallest indexable value
			default:
				vs[i] = 0.02 * math.Exp(r.NormFloat64()*spread)
			}
		}
		return vs
	}
	for round := range 50 {
		one, all := layout.NewHistogram(), layout.NewHistogram()
		for range 3 {
			vs := batch(1+r.IntN(300), float64(1+round%6))
			for _, v := range vs {
				require.NoError(t, one.Record(v))
			}
			require.NoError(t, all.RecordAll(vs))
		}
		a, b := pmetric.NewExponentialHistogramDataPoint(), pmetric.NewExponentialHistogramDataPoint()
		one.CopyTo(a)
		all.CopyTo(b)
		require.Equal(t, a.Scale(), b.Scale(), "round %d", round)
		require.Equal(t, a.Positive().BucketCounts().AsRaw(), b.Positive().BucketCounts().AsRaw(), "round %d", round)
		require.Equal(t, a.Positive().Offset(), b.Positive().Offset(), "round %d", round)
		require.Equal(t, a.ZeroCount(), b.ZeroCount())
		require.Equal(t, a.ZeroThreshold(), b.ZeroThreshold())
		require.Equal(t, a.Count(), b.Count())
		require.Equal(t, a.Sum(), b.Sum())
		require.Equal(t, a.Min(), b.Min())
		require.Equal(t, a.Max(), b.Max())
	}
	h := layout.NewHistogram()
	require.ErrorIs(t, h.RecordAll([]float64{1, math.NaN()}), ErrInvalidValue)
	assert.Zero(t, h.Count(), "a refused batch records nothing")
}

// BenchmarkRecordAll is the cost per value of recording a stream's 199
// gaps between chunks in bulk, against recording them one by one, in
// turn in every iteration: the ratio is the figure.
func BenchmarkRecordAll(b *testing.B) {
	layout, err := NewLayout(6, 160)
	require.NoError(b, err)
	r := rand.New(rand.NewPCG(7, 8))
	gaps := make([]float64, 199)
	for i := range gaps {
		gaps[i] = float64(20_000+r.IntN(10_000)) / 1e6
	}
	gaps[100] = 3
	bulk, one := layout.NewHistogram(), layout.NewHistogram()
	var bulkTime, oneTime time.Duration
	for b.Loop() {
		start := time.Now()
		_ = bulk.RecordAll(gaps)
		bulkTime += time.Since(start)
		start = time.Now()
		for _, g := range gaps {
			_ = one.Record(g)
		}
		oneTime += time.Since(start)
	}
	b.ReportMetric(float64(bulkTime.Nanoseconds())/float64(b.N*len(gaps)), "bulk-ns/value")
	b.ReportMetric(float64(oneTime.Nanoseconds())/float64(b.N*len(gaps)), "one-ns/value")
	b.ReportMetric(float64(bulkTime)/float64(oneTime), "ratio")
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package exphist

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScaleForAccuracy(t *testing.T) {
	for _, tt := range []struct {
		accuracy float64
		scale    int32
	}{
		{0.01, 6},   // scale 5 gives 0.0108, scale 6 gives 0.0054
		{0.02, 5},   // scale 5 gives 0.0108, scale 4 gives 0.0217
		{0.0108, 6}, // just under Accuracy(5)
		{Accuracy(5), 5},
		{1.0 / 3, 0}, // gamma 2
		{0.99999, MinScale},
		{Accuracy(MaxScale), MaxScale},
	} {
		got, err := ScaleForAccuracy(tt.accuracy)
		require.NoError(t, err, tt.accuracy)
		assert.Equal(t, tt.scale, got, tt.accuracy)
		assert.LessOrEqual(t, Accuracy(got), tt.accuracy)
		if got > MinScale {
			assert.Greater(t, Accuracy(got-1), tt.accuracy, "a coarser scale would have done for %v", tt.accuracy)
		}
	}
	for _, bad := range []float64{0, -0.1, 1, 2, math.NaN(), Accuracy(MaxScale) / 2} {
		_, err := ScaleForAccuracy(bad)
		assert.Error(t, err, bad)
	}
}

func TestNewMappingGamma(t *testing.T) {
	for scale := MinScale; scale <= MaxScale; scale++ {
		m, err := NewMapping(scale)
		require.NoError(t, err)
		// LowerBound(i) of the embedded LogarithmicMapping is gamma^i: the OTLP
		// lower bound of bucket i, so index offset 0 is the right one.
		for _, log2 := range []float64{-304, -16, 0, 16, 96, 896} {
			// Indexes whose bound 2^log2 is a normal float at this scale.
			i := int(math.Ldexp(log2, int(scale)))
			// LowerBound goes through ln(gamma), whose rounding grows with the
			// index: 1e-6 covers index 10^9 at scale 20.
			assert.InEpsilon(t, math.Ldexp(1, int(log2)), m.LowerBound(i), 1e-6, "scale %d index %d", scale, i)
		}
		assert.InEpsilon(t, Accuracy(scale), m.RelativeAccuracy(), 1e-9)
		assert.True(t, m.Equals(m)) //nolint:gocritic // a mapping equals itself
	}
	_, err := NewMapping(MaxScale + 1)
	assert.Error(t, err)
	_, err = NewMapping(MinScale - 1)
	assert.Error(t, err)
}

// TestIndexExactPowersOfTwo checks the OTLP boundary convention on the only
// bucket bounds a float64 holds exactly: 2^k is the upper bound of bucket
// k*2^scale - 1, at every scale.
func TestIndexExactPowersOfTwo(t *testing.T) {
	for scale := MinScale; scale <= MaxScale; scale++ {
		m, err := NewMapping(scale)
		require.NoError(t, err)
		for k := -1022; k <= 1023; k++ {
			v := math.Ldexp(1, k)
			var want int
			if scale >= 0 {
				want = k<<scale - 1
			} else {
				// ceil(k / 2^-scale) - 1
				want = int(math.Ceil(float64(k)/math.Exp2(float64(-scale)))) - 1
			}
			require.Equal(t, want, m.Index(v), "scale %d, 2^%d", scale, k)
			// The next float above 2^k opens the next bucket when 2^k is a bound.
			if scale >= 0 || k%(1<<-scale) == 0 {
				require.Equal(t, want+1, m.Index(math.Nextafter(v, math.Inf(1))), "scale %d, above 2^%d", scale, k)
			}
		}
	}
}

// TestIndexAroundBounds checks values just inside each side of the bounds
// base^i that are not powers of two.
func TestIndexAroundBounds(t *testing.T) {
	for _, scale := range []int32{1, 3, 6, 10, 20} {
		m, err := NewMapping(scale)
		require.NoError(t, err)
		perOctave := 1 << scale
		for i := -1000 * perOctave; i <= 1000*perOctave; i += 7 * perOctave / 4 {
			bound := math.Exp2(float64(i) / float64(perOctave))
			assert.Equal(t, i, m.Index(bound*(1+1e-9)), "scale %d above bound %d", scale, i)
			assert.Equal(t, i-1, m.Index(bound*(1-1e-9)), "scale %d below bound %d", scale, i)
		}
	}
}

// TestIndexAgreesWithLogarithmicMapping shows that Index is sketches-go's
// LogarithmicMapping index away from bounds, and that the stock mapping puts
// an exact bound into the bucket above: the one place where it differs from
// OTLP, which is why Index is overridden.
func TestIndexAgreesWithLogarithmicMapping(t *testing.T) {
	for _, scale := range []int32{-2, 0, 2, 6, 12} {
		m, err := NewMapping(scale)
		require.NoError(t, err)
		stock, err := mapping.NewLogarithmicMappingWithGamma(math.Exp2(math.Exp2(-float64(scale))), 0)
		require.NoError(t, err)
		for v := 1.234e-6; v < 1e6; v *= 1.37 {
			assert.Equal(t, stock.Index(v), m.Index(v), "scale %d value %v", scale, v)
		}
		// 1 = base^0 ends OTLP bucket -1; the stock mapping opens bucket 0 with it.
		assert.Equal(t, -1, m.Index(1))
		assert.Equal(t, 0, stock.Index(1), "scale %d: stock mapping is lower-inclusive", scale)
	}
}

// The lookup gives the logarithm's index for every value: random ones,
// every bucket bound and its float neighbours, at every scale it serves.
func TestLookupIndexIsTheLogarithmIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for scale := int32(1); scale <= lookupMaxScale; scale++ {
		m, err := NewMapping(scale)
		require.NoError(t, err)
		require.NotNil(t, m.lookup, "scale %d", scale)
		logIndex := func(v float64) int {
			frac, exp := math.Frexp(v)
			return (exp-1)<<scale + m.logSubIndex(math.Float64bits(frac)&(1<<mantissaBits-1))
		}
		check := func(v float64) {
			if frac, _ := math.Frexp(v); frac == 0.5 {
				return // a power of two: not a sub-index
			}
			if got, want := m.Index(v), logIndex(v); got != want {
				t.Fatalf("scale %d: Index(%v) = %d, the logarithm says %d", scale, v, got, want)
			}
		}
		for range 20000 {
			check(math.Exp(r.Float64()*40 - 20))
		}
		for k := 1; k < 1<<scale; k++ {
			b := math.Float64frombits(1022<<mantissaBits | m.lookup.bound[k])
			for _, v := range []float64{b, math.Nextafter(b, 0), math.Nextafter(b, 2), b * 1024, math.Nextafter(b, 0) / 64} {
				check(v)
			}
		}
	}
}

func BenchmarkIndex(b *testing.B) {
	m, err := NewMapping(6)
	require.NoError(b, err)
	values := make([]float64, 1024)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range values {
		values[i] = 0.02 * math.Exp(r.NormFloat64())
	}
	b.Run("lookup", func(b *testing.B) {
		i := 0
		for b.Loop() {
			_ = m.Index(values[i&1023])
			i++
		}
	})
	b.Run("logarithm", func(b *testing.B) {
		i := 0
		for b.Loop() {
			v := values[i&1023]
			frac, exp := math.Frexp(v)
			_ = (exp-1)<<6 + m.logSubIndex(math.Float64bits(frac)&(1<<mantissaBits-1))
			i++
		}
	})
}

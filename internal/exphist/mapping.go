// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package exphist

import (
	"errors"
	"fmt"
	"math"

	"github.com/DataDog/sketches-go/ddsketch/mapping"
)

const (
	// MaxScale is the finest scale OTLP defines.
	MaxScale int32 = 20
	// MinScale is the coarsest scale used. OTLP goes down to -10, but the
	// Prometheus exporter refuses scales below -4, and at -4 the whole float64
	// range fits in 132 buckets anyway.
	MinScale int32 = -4
	// MinMaxBuckets is the smallest max_buckets accepted, as in the SDK.
	MinMaxBuckets = 2
)

var errAccuracy = errors.New("must be in (0, 1)")

// Accuracy is the relative accuracy (gamma-1)/(gamma+1) of the scale, where
// gamma = 2^(2^-scale) is the ratio of two consecutive bucket bounds.
func Accuracy(scale int32) float64 {
	gamma := base(scale)
	return (gamma - 1) / (gamma + 1)
}

// ScaleForAccuracy returns the coarsest scale whose relative accuracy is at
// most relativeAccuracy: every finer scale meets the target too, but costs
// more buckets for the same range.
func ScaleForAccuracy(relativeAccuracy float64) (int32, error) {
	if !(relativeAccuracy > 0 && relativeAccuracy < 1) {
		return 0, fmt.Errorf("%w, got %v", errAccuracy, relativeAccuracy)
	}
	for scale := MinScale; scale <= MaxScale; scale++ {
		if Accuracy(scale) <= relativeAccuracy {
			return scale, nil
		}
	}
	return 0, fmt.Errorf("%v is finer than scale %d allows (%.3g)", relativeAccuracy, MaxScale, Accuracy(MaxScale))
}

// Mapping is sketches-go's LogarithmicMapping at gamma = 2^(2^-scale) and
// index offset 0, so that its index i names the bucket whose lower bound is
// gamma^i, exactly the OTLP exponential bucket i. One thing differs and is
// overridden: LogarithmicMapping.Index puts a value on a bound into the bucket
// above ([gamma^i, gamma^(i+1)), floor of the logarithm), OTLP into the bucket
// below ((base^i, base^(i+1)]). No index offset can fix that, so Index
// follows the OTLP reference mapping, exact on powers of two, the only
// bounds a float64 can hold exactly.
type Mapping struct {
	*mapping.LogarithmicMapping
	scale int32
	// log2Scaled is 2^scale/ln(2): it turns a natural logarithm into an index.
	log2Scaled float64
	// lookup indexes without a logarithm at scales up to lookupMaxScale;
	// nil above.
	lookup *subIndexLookup
}

// lookupMaxScale is the finest scale indexed by table: 2^(scale+1) cells
// and 2^scale bounds, 24 KiB at scale 10 (accuracy 3.4e-4, finer than any
// latency needs).
const lookupMaxScale = 10

// subIndexLookup finds the sub-index of a value within its octave from the
// top scale+1 bits of its mantissa, then one comparison. The octave's
// mantissas are cut into 2^(scale+1) equal cells, each narrower than the
// narrowest bucket (the bucket at the octave's start spans ln(2)/2^scale
// of it, a cell 1/2^(scale+1)), so that a cell holds at most one bucket
// bound: cellStart is the sub-index where each cell starts, bound the
// lowest mantissa of each sub-index. The bounds are found with the
// logarithm they replace, so that both give the same index for every
// value.
type subIndexLookup struct {
	cellStart []uint16
	bound     []uint64
	cellShift uint
}

const mantissaBits = 52

// logSubIndex is the sub-index in [0, 2^scale) of the value whose Frexp
// fraction (in (0.5, 1)) has the mantissa bits mant, by the logarithm.
func (m *Mapping) logSubIndex(mant uint64) int {
	frac := math.Float64frombits(1022<<mantissaBits | mant)
	return int(math.Floor(math.Log(frac)*m.log2Scaled)) + 1<<m.scale
}

// newSubIndexLookup returns the lookup of m's scale, or nil when the
// logarithm does not keep the sub-indexes within [0, 2^scale) (it does at
// every scale in use; the check keeps Index exact if it ever did not).
func newSubIndexLookup(m *Mapping) *subIndexLookup {
	n := 1 << m.scale
	const mantMax = 1<<mantissaBits - 1
	if m.logSubIndex(1) != 0 || m.logSubIndex(mantMax) != n-1 {
		return nil
	}
	l := &subIndexLookup{bound: make([]uint64, n+1), cellShift: uint(mantissaBits - m.scale - 1)}
	l.bound[n] = 1 << mantissaBits
	for k := 1; k < n; k++ {
		// The lowest mantissa whose sub-index is at least k.
		lo, hi := l.bound[k-1], uint64(mantMax)
		for lo < hi {
			mid := lo + (hi-lo)/2
			if m.logSubIndex(mid) >= k {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		l.bound[k] = lo
	}
	cells := 1 << (m.scale + 1)
	l.cellStart = make([]uint16, cells)
	k := 0
	for c := range cells {
		first := uint64(c) << l.cellShift
		for l.bound[k+1] <= first {
			k++
		}
		l.cellStart[c] = uint16(k)
		if next := uint64(c+1) << l.cellShift; k+2 <= n && l.bound[k+2] < next {
			return nil // two bounds in one cell: cannot happen, see above
		}
	}
	return l
}

// index is Mapping.Index of a positive normal value at scale, by table.
func (l *subIndexLookup) index(value float64, scale int32) int {
	// A positive normal value is (1 + mant/2^52) * 2^(biased-1023).
	bits := math.Float64bits(value)
	exp, mant := int(bits>>mantissaBits)-1023, bits&(1<<mantissaBits-1)
	if mant == 0 {
		return exp<<scale - 1 // 2^exp is the upper bound of its bucket
	}
	return exp<<scale + l.subIndex(mant)
}

// subIndex is the sub-index of the mantissa bits mant.
func (l *subIndexLookup) subIndex(mant uint64) int {
	k := int(l.cellStart[mant>>l.cellShift])
	if mant >= l.bound[k+1] {
		k++
	}
	return k
}

var _ mapping.IndexMapping = (*Mapping)(nil)

// NewMapping returns the mapping of an OTLP scale in [MinScale, MaxScale].
func NewMapping(scale int32) (*Mapping, error) {
	if scale < MinScale || scale > MaxScale {
		return nil, fmt.Errorf("scale %d out of [%d, %d]", scale, MinScale, MaxScale)
	}
	lm, err := mapping.NewLogarithmicMappingWithGamma(base(scale), 0)
	if err != nil {
		return nil, fmt.Errorf("logarithmic mapping for scale %d: %w", scale, err)
	}
	m := &Mapping{LogarithmicMapping: lm, scale: scale, log2Scaled: math.Ldexp(1/math.Ln2, int(scale))}
	if scale > 0 && scale <= lookupMaxScale {
		m.lookup = newSubIndexLookup(m)
	}
	return m, nil
}

// base is the ratio 2^(2^-scale) of two consecutive bucket bounds at scale:
// OTLP's base, DDSketch's gamma.
func base(scale int32) float64 { return math.Exp2(math.Ldexp(1, -int(scale))) }

// Scale is the OTLP scale of the mapping.
func (m *Mapping) Scale() int32 { return m.scale }

// Index returns the OTLP bucket index of a positive normal value: the i with
// base^i < value <= base^(i+1).
func (m *Mapping) Index(value float64) int {
	if m.lookup != nil {
		return m.lookup.index(value, m.scale)
	}
	frac, exp := math.Frexp(value) // value = frac * 2^exp, frac in [0.5, 1)
	if frac == 0.5 {
		// value = 2^(exp-1) is the upper bound of its bucket.
		if m.scale >= 0 {
			return ((exp - 1) << m.scale) - 1
		}
		return (exp - 2) >> -m.scale
	}
	if m.scale <= 0 {
		// 2^(exp-1) < value < 2^exp: in the bucket ending at or above 2^exp.
		return (exp - 1) >> -m.scale
	}
	mant := math.Float64bits(frac) & (1<<mantissaBits - 1)
	// Splitting off the binary exponent keeps the logarithm small and exact
	// enough: log(frac) is in (-ln 2, 0), so the sub-index is in [-2^scale, -1].
	return (exp-1)<<m.scale + m.logSubIndex(mant)
}

// Equals reports whether other is a Mapping of the same scale.
func (m *Mapping) Equals(other mapping.IndexMapping) bool {
	o, ok := other.(*Mapping)
	return ok && o.scale == m.scale
}

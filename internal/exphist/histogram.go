// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package exphist

import (
	"errors"
	"fmt"
	"math"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/store"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// ErrInvalidValue reports a value no duration can have: negative, NaN,
// infinite or above MaxValue.
var ErrInvalidValue = errors.New("invalid histogram value")

// MaxValue is the largest value recorded: every scale down to MinScale can
// index it (at scale -4 the mapping ends near 4e307).
const MaxValue = 1e307

// Valid reports whether Record accepts v.
func Valid(v float64) bool { return v >= 0 && v <= MaxValue }

// Layout is what all histograms of one connector share: the configured
// scale, the bucket bound and the mappings of every scale they may be
// downscaled to.
type Layout struct {
	scale      int32
	maxBuckets int
	mappings   [MaxScale - MinScale + 1]*Mapping
}

// NewLayout returns the layout of histograms that start at scale and hold at
// most maxBuckets buckets.
func NewLayout(scale int32, maxBuckets int) (*Layout, error) {
	if maxBuckets < MinMaxBuckets {
		return nil, fmt.Errorf("max buckets %d below %d", maxBuckets, MinMaxBuckets)
	}
	l := &Layout{scale: scale, maxBuckets: maxBuckets}
	for s := MinScale; s <= scale; s++ {
		m, err := NewMapping(s)
		if err != nil {
			return nil, err
		}
		l.mappings[s-MinScale] = m
	}
	return l, nil
}

// Histogram is one exponential histogram data point under construction: a
// DDSketch over a Mapping, plus the exact count, sum, min and max. When a
// value would make the buckets span more than maxBuckets indexes, the
// histogram is downscaled (each bucket merged with its neighbours, as the
// OpenTelemetry SDK does) rather than collapsed like sketches-go's collapsing
// stores: a collapsed lowest bucket would hold values outside its bounds, and
// OTLP readers would compute wrong quantiles from it. Downscaling keeps every
// bucket true at the cost of accuracy, which is Accuracy(scale) of the scale
// exported. A Histogram is not safe for concurrent use.
type Histogram struct {
	layout  *Layout
	mapping *Mapping
	sketch  *ddsketch.DDSketch
	// positive is the sketch's positive value store, written directly so that
	// each value is indexed once (range check and store share the index).
	positive *store.DenseStore
	// minIndex and maxIndex bound the used indexes while positive is non-empty.
	minIndex, maxIndex int

	count         uint64
	sum, min, max float64
	// tinyAsZero records that a positive value below the smallest indexable
	// one went to the zero bucket, which the zero threshold must then cover.
	tinyAsZero bool
}

// NewHistogram returns an empty histogram at the layout's scale.
func (l *Layout) NewHistogram() *Histogram {
	h := &Histogram{layout: l}
	h.setMapping(l.mappings[l.scale-MinScale], store.NewDenseStore())
	return h
}

func (h *Histogram) setMapping(m *Mapping, positive *store.DenseStore) {
	h.mapping = m
	h.positive = positive
	// Durations are never negative: the negative store stays empty and costs
	// one small struct.
	h.sketch = ddsketch.NewDDSketch(m, positive, store.NewDenseStore())
}

// Record adds one value. Invalid values are refused with ErrInvalidValue and
// leave the histogram unchanged.
func (h *Histogram) Record(v float64) error { return h.RecordN(v, 1) }

// RecordN adds n times the same value at the cost of one. Invalid values are
// refused with ErrInvalidValue and leave the histogram unchanged.
func (h *Histogram) RecordN(v float64, n uint64) error {
	if !Valid(v) {
		return fmt.Errorf("%w: %v", ErrInvalidValue, v)
	}
	if n == 0 {
		return nil
	}
	if h.count == 0 {
		h.min, h.max = v, v
	} else {
		h.min, h.max = min(h.min, v), max(h.max, v)
	}
	h.count += n
	h.sum += v * float64(n)
	if v <= h.mapping.MinIndexableValue() {
		h.tinyAsZero = h.tinyAsZero || v > 0
		return h.sketch.AddWithCount(0, float64(n))
	}
	idx := h.mapping.Index(v)
	if h.positive.IsEmpty() {
		h.minIndex, h.maxIndex = idx, idx
	} else {
		lo, hi := min(h.minIndex, idx), max(h.maxIndex, idx)
		if shift := h.downscaleShift(lo, hi); shift > 0 {
			h.downscale(shift)
			idx >>= shift
			lo >>= shift
			hi >>= shift
		}
		h.minIndex, h.maxIndex = lo, hi
	}
	h.positive.AddWithCount(idx, float64(n))
	return nil
}

// RecordAll adds every value of vs, in order, as Record would one by one,
// at a lower cost: the values are checked first, then indexed once each
// (by table, no logarithm, at the scales in use) in blocks; a block is
// downscaled at most once for its range, and its values are counted per
// bucket before they reach the store. An invalid value refuses them all
// with ErrInvalidValue and leaves the histogram unchanged.
func (h *Histogram) RecordAll(vs []float64) error {
	if len(vs) == 0 {
		return nil
	}
	lo, hi := vs[0], vs[0]
	sum := h.sum // in a register; added in order, as one by one
	for _, v := range vs {
		if !Valid(v) {
			return fmt.Errorf("%w: %v", ErrInvalidValue, v)
		}
		// Plain comparisons: the values are numbers, and min and max
		// below settle the sign of a zero bound.
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
		sum += v
	}
	if lo == 0 || hi == 0 {
		for _, v := range vs {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if h.count == 0 {
		h.min, h.max = lo, hi
	} else {
		h.min, h.max = min(h.min, lo), max(h.max, hi)
	}
	h.count += uint64(len(vs))
	h.sum = sum
	var indexes [recordBlock]int
	for len(vs) > 0 {
		n := min(len(vs), recordBlock)
		h.recordBlock(vs[:n], indexes[:0])
		vs = vs[n:]
	}
	return nil
}

// recordBlock is the length of RecordAll's blocks, and countMax the widest
// range of indexes a block is counted over before it reaches the store.
const (
	recordBlock = 256
	countMax    = 256
)

// recordBlock indexes and stores valid values, counted already.
func (h *Histogram) recordBlock(vs []float64, indexes []int) {
	m := h.mapping
	tiny := m.MinIndexableValue()
	zeros := 0
	loIdx, hiIdx := math.MaxInt, math.MinInt
	for _, v := range vs {
		if v <= tiny {
			h.tinyAsZero = h.tinyAsZero || v > 0
			zeros++
			continue
		}
		var idx int
		if m.lookup != nil {
			idx = m.lookup.index(v, m.scale) // inlined: the scales in use
		} else {
			idx = m.Index(v)
		}
		loIdx, hiIdx = min(loIdx, idx), max(hiIdx, idx)
		indexes = append(indexes, idx)
	}
	if zeros > 0 {
		_ = h.sketch.AddWithCount(0, float64(zeros)) // zero is always trackable
	}
	if len(indexes) == 0 {
		return
	}
	if !h.positive.IsEmpty() {
		loIdx, hiIdx = min(h.minIndex, loIdx), max(h.maxIndex, hiIdx)
	}
	// Every bucket of a scale lies in one bucket of a coarser one: the
	// indexes of the block shift with the histogram.
	shift := h.downscaleShift(loIdx, hiIdx)
	if shift > 0 {
		h.downscale(shift)
		loIdx, hiIdx = loIdx>>shift, hiIdx>>shift
	}
	h.minIndex, h.maxIndex = loIdx, hiIdx
	if hiIdx-loIdx >= countMax {
		for _, idx := range indexes {
			h.positive.Add(idx >> shift)
		}
		return
	}
	var counts [countMax]uint32
	for _, idx := range indexes {
		counts[idx>>shift-loIdx]++
	}
	for k, n := range counts[:hiIdx-loIdx+1] {
		if n > 0 {
			h.positive.AddWithCount(loIdx+k, float64(n))
		}
	}
}

// downscaleShift is the smallest scale reduction that makes the indexes
// lo..hi fit into maxBuckets, bounded by MinScale.
func (h *Histogram) downscaleShift(lo, hi int) int {
	shift := 0
	for hi>>shift-lo>>shift+1 > h.layout.maxBuckets && h.mapping.scale-int32(shift) > MinScale {
		shift++
	}
	return shift
}

// downscale merges every 2^shift adjacent buckets into one: bucket i at
// scale s lies wholly inside bucket i>>shift at scale s-shift.
func (h *Histogram) downscale(shift int) {
	coarser := store.NewDenseStore()
	h.positive.ForEach(func(index int, count float64) bool {
		coarser.AddWithCount(index>>shift, count)
		return false
	})
	zeros := h.sketch.GetZeroCount()
	h.setMapping(h.layout.mappings[h.mapping.scale-int32(shift)-MinScale], coarser)
	if zeros > 0 {
		// Cannot fail: zero is always trackable.
		_ = h.sketch.AddWithCount(0, zeros)
	}
	h.minIndex >>= shift
	h.maxIndex >>= shift
}

// Reset empties the histogram and returns it to the layout's scale, keeping
// its store's memory.
func (h *Histogram) Reset() {
	h.positive.Clear()
	h.setMapping(h.layout.mappings[h.layout.scale-MinScale], h.positive)
	h.count, h.sum, h.min, h.max = 0, 0, 0, 0
	h.tinyAsZero = false
}

// Count is the number of values recorded.
func (h *Histogram) Count() uint64 { return h.count }

// Scale is the current scale (the configured one unless downscaled).
func (h *Histogram) Scale() int32 { return h.mapping.scale }

// Sketch exposes the underlying DDSketch, for quantile queries.
func (h *Histogram) Sketch() *ddsketch.DDSketch { return h.sketch }

// CopyTo writes the histogram into an OTLP data point: the sketch's bins
// become the positive buckets one for one (offset = lowest index).
func (h *Histogram) CopyTo(dp pmetric.ExponentialHistogramDataPoint) {
	dp.SetScale(h.mapping.scale)
	dp.SetCount(h.count)
	dp.SetSum(h.sum)
	if h.count > 0 {
		dp.SetMin(h.min)
		dp.SetMax(h.max)
	}
	dp.SetZeroCount(uint64(h.sketch.GetZeroCount()))
	if h.tinyAsZero {
		dp.SetZeroThreshold(h.mapping.MinIndexableValue())
	}
	if h.positive.IsEmpty() {
		return
	}
	counts := make([]uint64, h.maxIndex-h.minIndex+1)
	h.positive.ForEach(func(index int, count float64) bool {
		counts[index-h.minIndex] = uint64(math.Round(count))
		return false
	})
	dp.Positive().SetOffset(int32(h.minIndex))
	dp.Positive().BucketCounts().FromRaw(counts)
}

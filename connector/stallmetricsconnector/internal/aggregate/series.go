// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package aggregate holds the data points of the connector's metrics: one
// Series per metric, bounded, with an overflow data point past the bound.
package aggregate // import "github.com/streamstall/streamstall/connector/stallmetricsconnector/internal/aggregate"

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/streamstall/streamstall/internal/semconv"
)

// Point is one data point under construction: its attributes and its value.
type Point[V any] struct {
	Attributes pcommon.Map
	Value      V
	// LastExport is when the point was last exported, zero before. With
	// delta temporality the next point starts there, so that a series idle
	// for some intervals stays one uninterrupted run of deltas.
	LastExport pcommon.Timestamp
}

// Series are the data points of one metric, keyed by an encoding of their
// attributes (see Key). At most limit attribute sets get a point of their
// own; values of any further set go to a single overflow point whose only
// attribute is otel.metric.overflow = true, as in the OpenTelemetry SDK's
// cardinality limit. Series are not safe for concurrent use.
type Series[V any] struct {
	limit    int
	newValue func() V
	points   map[string]*Point[V]
	overflow *Point[V]
	key      []byte
	// overflowed counts the Point calls answered with the overflow point
	// since the last TakeOverflowed.
	overflowed int64
}

// NewSeries returns empty series of at most limit attribute sets; newValue
// makes the value of a new point.
func NewSeries[V any](limit int, newValue func() V) *Series[V] {
	return &Series[V]{limit: limit, newValue: newValue, points: make(map[string]*Point[V])}
}

// Point returns the point of an attribute set, creating it or, past the
// limit, returning the overflow point. Every call for one metric must list
// the same attribute names in the same order (see AppendKey).
func (s *Series[V]) Point(attrs []Attribute) *Point[V] {
	s.key = AppendKey(s.key[:0], attrs)
	return s.PointOfKey(s.key, attrs)
}

// PointOfKey is Point with the key of attrs already encoded
// (AppendKey(nil, attrs)): metrics of the same attribute set encode it once.
func (s *Series[V]) PointOfKey(key []byte, attrs []Attribute) *Point[V] {
	if p, ok := s.points[string(key)]; ok {
		return p
	}
	if len(s.points) >= s.limit {
		s.overflowed++
		if s.overflow == nil {
			s.overflow = &Point[V]{Attributes: pcommon.NewMap(), Value: s.newValue()}
			s.overflow.Attributes.PutBool(semconv.AttrMetricOverflow, true)
		}
		return s.overflow
	}
	p := &Point[V]{Attributes: pcommon.NewMap(), Value: s.newValue()}
	Fill(p.Attributes, attrs)
	s.points[string(key)] = p
	return p
}

// TakeOverflowed returns how many Point calls were answered with the
// overflow point since its previous call.
func (s *Series[V]) TakeOverflowed() int64 {
	n := s.overflowed
	s.overflowed = 0
	return n
}

// Len is the number of points, the overflow point included.
func (s *Series[V]) Len() int {
	if s.overflow != nil {
		return len(s.points) + 1
	}
	return len(s.points)
}

// All calls yield for every point in key order, then the overflow point, so
// that exports are deterministic.
func (s *Series[V]) All(yield func(*Point[V])) {
	keys := make([]string, 0, len(s.points))
	for k := range s.points {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		yield(s.points[k])
	}
	if s.overflow != nil {
		yield(s.overflow)
	}
}

// Reset drops every point.
func (s *Series[V]) Reset() {
	clear(s.points)
	s.overflow = nil
}

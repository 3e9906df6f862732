// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package advice estimates hedge delays from the attempts of a whole fleet:
// quantiles of time to first content that hedging cannot bias, because the
// attempts it cancels before their first content are kept as right-censored
// samples, and quantiles of the gaps between content chunks. The
// hedge_advisor exporter serves them, the hedging client decodes them, and
// cmd/hedgesim runs this very code in its fleet simulation.
package advice

import (
	"math"

	"github.com/DataDog/sketches-go/ddsketch"
)

// Censored is a sample of durations some of which are right-censored: an
// exact sample is a duration that was seen end to end (a time to first
// content); a censored one only says that the duration exceeded the time it
// was watched (an attempt cancelled before its first content). Both kinds
// go to DDSketches of one mapping, so the product-limit (Kaplan-Meier)
// estimator runs over their bins. Censored is not safe for concurrent use.
type Censored struct {
	events   *ddsketch.DDSketch
	censored *ddsketch.DDSketch
}

// NewCensored returns an empty sample.
func NewCensored() *Censored {
	return &Censored{events: NewSketch(), censored: NewSketch()}
}

// Add records an exact duration; values that are not positive and finite
// are ignored.
func (c *Censored) Add(v float64) {
	if valid(v) {
		// Add only fails on negative or NaN values, excluded above.
		_ = c.events.Add(v)
	}
}

// AddCensored records a duration only known to exceed v.
func (c *Censored) AddCensored(v float64) {
	if valid(v) {
		_ = c.censored.Add(v)
	}
}

func valid(v float64) bool { return v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

// Events is the number of exact samples, Censored the number of censored ones.
func (c *Censored) Events() float64   { return c.events.GetCount() }
func (c *Censored) Censored() float64 { return c.censored.GetCount() }

// Count is the number of samples of both kinds.
func (c *Censored) Count() float64 { return c.Events() + c.Censored() }

// MergeWith adds the samples of o.
func (c *Censored) MergeWith(o *Censored) {
	// Merging sketches of one mapping cannot fail.
	_ = c.events.MergeWith(o.events)
	_ = c.censored.MergeWith(o.censored)
}

// Clear empties the sample and keeps its memory.
func (c *Censored) Clear() {
	c.events.Clear()
	c.censored.Clear()
}

// Quantile returns the product-limit estimate of the q quantile: the
// smallest bin value t where the estimated F(t) = 1 - S(t) reaches q, with
//
//	S(t) = prod over bins t_i <= t of (1 - d_i / n_i)
//
// where d_i is the number of exact samples in bin i and n_i the number of
// samples of either kind in bins i and above (still "at risk"). A censored
// sample in the same bin as exact ones counts as at risk there, the usual
// convention for ties. ok is false when the sample is empty, q is outside
// (0, 1), or censoring leaves the quantile unidentified: S never falls to
// 1 - q because every sample above some point is censored.
func (c *Censored) Quantile(q float64) (float64, bool) {
	v, ok := c.Quantiles([]float64{q}, nil)
	if !ok[0] {
		return math.NaN(), false
	}
	return v[0], true
}

// Quantiles is Quantile for ascending qs in one pass over the bins; it
// appends to dst and returns, beside the values, whether each is defined.
func (c *Censored) Quantiles(qs []float64, dst []float64) ([]float64, []bool) {
	ok := make([]bool, len(qs))
	out := dst
	for range qs {
		out = append(out, math.NaN())
	}
	vals := out[len(dst):]
	total := c.Count()
	if total == 0 {
		return out, ok
	}
	ev := bins(c.events)
	ce := bins(c.censored)
	atRisk := total
	surv := 1.0
	next := 0 // the next quantile to settle
	for next < len(qs) && (len(ev) > 0 || len(ce) > 0) {
		if q := qs[next]; q <= 0 || q >= 1 {
			next++ // undefined, left NaN
			continue
		}
		// The lowest bin index present in either sketch.
		idx := math.MaxInt
		if len(ev) > 0 {
			idx = ev[0].index
		}
		if len(ce) > 0 && ce[0].index < idx {
			idx = ce[0].index
		}
		var d, cens float64
		if len(ev) > 0 && ev[0].index == idx {
			d = ev[0].count
			ev = ev[1:]
		}
		if len(ce) > 0 && ce[0].index == idx {
			cens = ce[0].count
			ce = ce[1:]
		}
		if d > 0 {
			surv *= 1 - d/atRisk // atRisk >= d: it counts this bin
		}
		atRisk -= d + cens
		// A slack of 1e-9 absorbs the rounding of the product.
		for next < len(qs) && qs[next] > 0 && qs[next] < 1 && 1-surv >= qs[next]-1e-9 {
			vals[next] = c.events.Value(idx)
			ok[next] = true
			next++
		}
	}
	return out, ok
}

// NaiveQuantile is the q quantile of the exact samples alone, as an
// estimator that sees only the winners of races would report it. It is
// biased low whenever censoring removes the slow samples; it is here to be
// shown beside Quantile.
func (c *Censored) NaiveQuantile(q float64) (float64, bool) {
	v, err := c.events.GetValueAtQuantile(q)
	if err != nil || math.IsNaN(v) {
		return math.NaN(), false
	}
	return v, true
}

type bin struct {
	index int
	count float64
}

// bins lists the positive bins of s in ascending index order (the dense
// stores iterate in index order; only positive values are ever added).
func bins(s *ddsketch.DDSketch) []bin {
	var out []bin
	s.GetPositiveValueStore().ForEach(func(index int, count float64) bool {
		out = append(out, bin{index: index, count: count})
		return false
	})
	return out
}

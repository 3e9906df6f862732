// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package advice

import (
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// The quantiles every entry reports, beside the configured ones.
var (
	ttftReport = []float64{0.5, 0.9, 0.95, 0.99}
	gapReport  = []float64{0.99, 0.999}
)

// Config sizes a Store; see the hedge_advisor README for the defaults.
type Config struct {
	// Window is the sliding window of every series, cut into Slots.
	Window time.Duration
	Slots  int
	// TTFTQuantile gives hedge_delay_ms, GapQuantile stall_after_ms.
	TTFTQuantile float64
	GapQuantile  float64
	// MinSamples is the number of TTFT samples (exact or censored) a series
	// needs for hedge_delay_ms, and of gaps for stall_after_ms.
	MinSamples int
	// MaxSeries bounds the series; samples of further keys are dropped and
	// counted until a series idle for a whole window frees its place.
	MaxSeries int
	// MaxLabelLength bounds the bytes of every key value; longer ones are
	// cut at a rune boundary.
	MaxLabelLength int
	// MaxClientShare bounds the share of a series' window one client may
	// hold (share.go); outside (0, 1): no bound. MaxClients bounds the
	// clients told apart per series; the others share one bucket.
	MaxClientShare float64
	MaxClients     int
	// HedgeDelay and StallAfter clamp hedge_delay_ms and stall_after_ms; a
	// zero bound is no bound.
	HedgeDelay Range
	StallAfter Range
}

// Range is a closed range of durations; a zero bound is no bound.
type Range struct {
	Min, Max time.Duration
}

// clampMs clamps v (milliseconds) to r.
func (r Range) clampMs(v float64) float64 {
	if r.Min > 0 {
		v = max(v, ms(float64(r.Min)))
	}
	if r.Max > 0 {
		v = min(v, ms(float64(r.Max)))
	}
	return v
}

// Key identifies a series: provider, requested model and the values of the
// configured dimensions, in configuration order.
type Key struct {
	Provider string
	Model    string
	Dims     []string
}

// Response is the JSON body of GET /v1/hedge/advice.
type Response struct {
	WindowS float64 `json:"window_s"`
	Advice  []Entry `json:"advice"`
}

// Entry is the advice of one series. Quantiles that are not identified
// (no sample, or a tail that censoring hides) are left out, and so are the
// recommendations of a series below min_samples.
type Entry struct {
	Provider   string             `json:"provider"`
	Model      string             `json:"model"`
	Attributes map[string]string  `json:"attributes,omitempty"`
	Samples    int64              `json:"samples"`
	Censored   int64              `json:"censored"`
	TTFTMs     map[string]float64 `json:"ttft_ms"`
	GapMs      map[string]float64 `json:"gap_ms"`
	// HedgeDelayMs is the TTFT at the configured quantile, clamped to
	// Config.HedgeDelay.
	HedgeDelayMs *float64 `json:"hedge_delay_ms,omitempty"`
	// StallAfterMs is the inter-chunk gap at the configured quantile,
	// clamped to Config.StallAfter.
	StallAfterMs *float64 `json:"stall_after_ms,omitempty"`
}

// Store holds the series of a fleet's attempts. It is safe for concurrent
// use: the exporter records under one lock per batch of spans and serves
// reads under the same lock.
type Store struct {
	cfg     Config
	dims    []string
	mu      sync.Mutex
	series  map[string]*series
	dropped int64
	key     []byte
	merged  *Merged
}

type series struct {
	key Key
	w   *Window
}

// NewStore returns an empty store; dims names the configured dimensions.
func NewStore(cfg Config, dims []string) *Store {
	return &Store{cfg: cfg, dims: dims, series: make(map[string]*series), merged: NewMerged()}
}

// Lock and Unlock bracket a batch of Record calls.
func (s *Store) Lock()   { s.mu.Lock() }
func (s *Store) Unlock() { s.mu.Unlock() }

// Sample is what one attempt tells: its TTFT (exact, or censored at its
// run time) and the gaps between its content chunks, all nanoseconds, and
// the client it came from (for the share cap).
type Sample struct {
	TTFT     int64
	Censored bool
	Gaps     []int64
	Client   string
}

// Outcome is what Record did with a sample.
type Outcome uint8

const (
	// Recorded: all of the sample counts.
	Recorded Outcome = iota
	// Capped: the client share cap refused some or all of it.
	Capped
	// Dropped: the series bound refused it.
	Dropped
)

// Record adds one attempt's sample at now; the caller holds the lock.
func (s *Store) Record(now int64, k Key, smp Sample) Outcome {
	sr := s.lookup(now, k)
	if sr == nil {
		s.dropped++
		return Dropped
	}
	out := Recorded
	if smp.TTFT > 0 {
		switch {
		case !sr.w.TakeTTFT(now, smp.Client):
			out = Capped
		case smp.Censored:
			sr.w.ObserveCensored(now, smp.TTFT)
		default:
			sr.w.ObserveTTFT(now, smp.TTFT)
		}
	}
	for _, g := range smp.Gaps {
		if g <= 0 {
			continue
		}
		if !sr.w.TakeGap(now, smp.Client) {
			out = Capped
			continue
		}
		sr.w.ObserveGap(now, g)
	}
	return out
}

// Dropped is the number of samples refused by the series bound.
func (s *Store) Dropped() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Len is the number of series.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.series)
}

func (s *Store) lookup(now int64, k Key) *series {
	k.Provider = truncate(k.Provider, s.cfg.MaxLabelLength)
	k.Model = truncate(k.Model, s.cfg.MaxLabelLength)
	s.appendKey(k)
	if sr, ok := s.series[string(s.key)]; ok {
		return sr
	}
	if len(s.series) >= s.cfg.MaxSeries && !s.evictIdle(now) {
		return nil
	}
	dims := make([]string, len(s.dims))
	for i := range dims {
		if i < len(k.Dims) {
			dims[i] = truncate(k.Dims[i], s.cfg.MaxLabelLength)
		}
	}
	sr := &series{key: Key{Provider: k.Provider, Model: k.Model, Dims: dims}, w: NewWindow(int64(s.cfg.Window), s.cfg.Slots)}
	sr.w.CapClients(s.cfg.MaxClientShare, s.cfg.MaxClients)
	s.series[string(s.key)] = sr
	return sr
}

// appendKey encodes k (provider and model already cut) into s.key.
func (s *Store) appendKey(k Key) []byte {
	s.key = appendString(s.key[:0], truncate(k.Provider, s.cfg.MaxLabelLength))
	s.key = appendString(s.key, truncate(k.Model, s.cfg.MaxLabelLength))
	for i := range s.dims {
		v := ""
		if i < len(k.Dims) {
			v = k.Dims[i]
		}
		s.key = appendString(s.key, truncate(v, s.cfg.MaxLabelLength))
	}
	return s.key
}

// evictIdle removes the series that saw nothing for a whole window and
// reports whether any place was freed.
func (s *Store) evictIdle(now int64) bool {
	freed := false
	for k, sr := range s.series {
		if now-sr.w.LastObserved() >= int64(s.cfg.Window) {
			delete(s.series, k)
			freed = true
		}
	}
	return freed
}

// appendString appends a length-prefixed string: no value can pose as two.
func appendString(dst []byte, v string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

// truncate cuts v to at most n bytes at a rune boundary; n <= 0: no bound.
func truncate(v string, n int) string {
	if n <= 0 || len(v) <= n {
		return v
	}
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return strings.Clone(v[:n])
}

// Read merges the window of the series of k, as current at now, into dst
// and reports whether the series exists; the caller holds the lock. It is
// the raw sample behind an entry (cmd/hedgesim compares estimators on it).
func (s *Store) Read(now int64, k Key, dst *Merged) bool {
	sr := s.series[string(s.appendKey(k))]
	if sr == nil {
		return false
	}
	sr.w.Merged(now, dst)
	return true
}

// Advice returns the advice at now of the series matching provider and
// model (empty: any), sorted by provider, model and dimensions. Series
// idle for a whole window are left out.
func (s *Store) Advice(now int64, provider, model string) Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := Response{WindowS: s.cfg.Window.Seconds(), Advice: []Entry{}}
	for _, sr := range s.series {
		if provider != "" && sr.key.Provider != provider || model != "" && sr.key.Model != model {
			continue
		}
		if now-sr.w.LastObserved() >= int64(s.cfg.Window) {
			continue
		}
		resp.Advice = append(resp.Advice, s.entry(now, sr))
	}
	slices.SortFunc(resp.Advice, compareEntries)
	return resp
}

func compareEntries(a, b Entry) int {
	if c := strings.Compare(a.Provider, b.Provider); c != 0 {
		return c
	}
	if c := strings.Compare(a.Model, b.Model); c != 0 {
		return c
	}
	ka, kb := sortedAttrs(a.Attributes), sortedAttrs(b.Attributes)
	return strings.Compare(ka, kb)
}

func sortedAttrs(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	return b.String()
}

func (s *Store) entry(now int64, sr *series) Entry {
	m := s.merged
	sr.w.Merged(now, m)
	e := Entry{
		Provider: sr.key.Provider,
		Model:    sr.key.Model,
		Samples:  int64(m.TTFT.Count()),
		Censored: int64(m.TTFT.Censored()),
		TTFTMs:   map[string]float64{},
		GapMs:    map[string]float64{},
	}
	if len(s.dims) > 0 {
		e.Attributes = make(map[string]string, len(s.dims))
		for i, d := range s.dims {
			e.Attributes[d] = sr.key.Dims[i]
		}
	}
	vals, oks := m.TTFT.Quantiles(ttftReport, nil)
	for i, q := range ttftReport {
		if oks[i] {
			e.TTFTMs[quantileName(q)] = ms(vals[i])
		}
	}
	for _, q := range gapReport {
		if v, err := m.Gap.GetValueAtQuantile(q); err == nil && !math.IsNaN(v) {
			e.GapMs[quantileName(q)] = ms(v)
		}
	}
	minSamples := float64(s.cfg.MinSamples)
	if m.TTFT.Count() >= minSamples {
		if v, ok := m.TTFT.Quantile(s.cfg.TTFTQuantile); ok {
			e.HedgeDelayMs = ptr(s.cfg.HedgeDelay.clampMs(ms(v)))
		}
	}
	if m.Gap.GetCount() >= minSamples && m.Gap.GetCount() > 0 {
		if v, err := m.Gap.GetValueAtQuantile(s.cfg.GapQuantile); err == nil && !math.IsNaN(v) {
			e.StallAfterMs = ptr(s.cfg.StallAfter.clampMs(ms(v)))
		}
	}
	return e
}

// quantileName is "p50", "p99", "p999": the digits of the percentile.
func quantileName(q float64) string {
	s := strings.TrimRight(strings.TrimRight(strconv.FormatFloat(100*q, 'f', 4, 64), "0"), ".")
	return "p" + strings.ReplaceAll(s, ".", "")
}

func ms(ns float64) float64 { return math.Round(ns/1e3) / 1e3 } // microsecond resolution

func ptr(v float64) *float64 { return &v }

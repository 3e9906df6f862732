// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallmetricsconnector // import "github.com/streamstall/streamstall/connector/stallmetricsconnector"

import (
	"context"
	"fmt"
	"sync"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/streamstall/streamstall/connector/stallmetricsconnector/internal/aggregate"
	"github.com/streamstall/streamstall/connector/stallmetricsconnector/internal/metadata"
	"github.com/streamstall/streamstall/internal/exphist"
	"github.com/streamstall/streamstall/internal/figures"
)

// stallMetrics turns streaming spans into the metrics of docs/contract.md section 6.
// ConsumeTraces records into in-memory series under mu; a goroutine driven
// by clock exports them every flush interval.
type stallMetrics struct {
	config    Config
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
	next      consumer.Metrics
	clock     clockwork.Clock
	version   string

	extra  []extraDimension
	chunks *figures.ChunkReader
	// handoff holds the evidence the stall processor of this process
	// judged; closeHandoff ends this connector's use of it.
	handoff      *figures.Handoff
	closeHandoff func()

	mu      sync.Mutex
	metrics seriesSet
	// start is the start time of cumulative points; intervalStart that of
	// delta points (the previous flush).
	start, intervalStart pcommon.Timestamp
	// Scratch reused across spans, guarded by mu.
	attrs []aggregate.Attribute
	// dimsKey is the encoding of a call's dimensions (aggregate.AppendKey).
	dimsKey  []byte
	evidence figures.Chunks
	sealer   *figures.Sealer
	stalls   []figures.Stall
	gapRuns  []figures.GapRun
	gapNanos []int64
	// gapSeconds are the gaps of a span without elision, for RecordAll.
	gapSeconds []float64
	// refused counts the spans of the current batch whose figures were
	// inconsistent or implausible; overflowLogged is set once max_series
	// was reported in the log since Start.
	refused        figures.Refusals
	overflowLogged bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// seriesSet are the data points of every metric.
type seriesSet struct {
	ttft, perChunk, ttfa, generation, active, stall, wastedTime *aggregate.Series[*exphist.Histogram]
	calls, attempts, wastedTokens                               *aggregate.Series[*int64]
}

type extraDimension struct {
	name     string
	fallback pcommon.Value
	hasValue bool
}

var _ connector.Traces = (*stallMetrics)(nil)

func newStallMetrics(set connector.Settings, cfg *Config, next consumer.Metrics, clock clockwork.Clock) (*stallMetrics, error) {
	scale, err := exphist.ScaleForAccuracy(cfg.Histogram.RelativeAccuracy)
	if err != nil {
		return nil, fmt.Errorf("histogram relative accuracy: %w", err)
	}
	layout, err := exphist.NewLayout(scale, cfg.Histogram.MaxBuckets)
	if err != nil {
		return nil, fmt.Errorf("histogram layout: %w", err)
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("creating the stall_metrics telemetry: %w", err)
	}
	c := &stallMetrics{
		config:    *cfg,
		logger:    set.Logger,
		telemetry: tb,
		next:      next,
		clock:     clock,
		version:   set.BuildInfo.Version,
		chunks:    figures.NewChunkReader(cfg.ChunkEvents),
		sealer:    figures.NewSealer(),
		handoff:   figures.ProcessHandoff(),
	}
	for _, d := range cfg.Dimensions {
		e := extraDimension{name: d.Name}
		if d.Default != nil {
			e.fallback, e.hasValue = pcommon.NewValueStr(*d.Default), true
		}
		c.extra = append(c.extra, e)
	}
	newHistogram := layout.NewHistogram
	newCounter := func() *int64 { return new(int64) }
	limit := cfg.MaxSeries
	c.metrics = seriesSet{
		ttft:         aggregate.NewSeries(limit, newHistogram),
		perChunk:     aggregate.NewSeries(limit, newHistogram),
		ttfa:         aggregate.NewSeries(limit, newHistogram),
		generation:   aggregate.NewSeries(limit, newHistogram),
		active:       aggregate.NewSeries(limit, newHistogram),
		stall:        aggregate.NewSeries(limit, newHistogram),
		wastedTime:   aggregate.NewSeries(limit, newHistogram),
		calls:        aggregate.NewSeries(limit, newCounter),
		attempts:     aggregate.NewSeries(limit, newCounter),
		wastedTokens: aggregate.NewSeries(limit, newCounter),
	}
	now := pcommon.NewTimestampFromTime(clock.Now())
	c.start, c.intervalStart = now, now
	return c, nil
}

// Start begins a fresh aggregation (a restarted connector does not carry
// cumulative values over from before its Shutdown, which exported them) and
// the flush loop.
func (c *stallMetrics) Start(context.Context, component.Host) error {
	c.mu.Lock()
	c.metrics.reset()
	c.overflowLogged = false
	now := pcommon.NewTimestampFromTime(c.clock.Now())
	c.start, c.intervalStart = now, now
	c.mu.Unlock()

	// Not the Start context: it may end as soon as Start returns.
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.closeHandoff = c.handoff.Open()
	ticker := c.clock.NewTicker(c.config.FlushInterval)
	c.wg.Add(1)
	go c.flushLoop(ctx, ticker)
	return nil
}

func (c *stallMetrics) flushLoop(ctx context.Context, ticker clockwork.Ticker) {
	defer c.wg.Done()
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.Chan():
			if err := c.flush(ctx); err != nil {
				c.logger.Error("Failed to export stall metrics", zap.Error(err))
			}
		}
	}
}

// Shutdown stops the flush loop, then exports once more so that nothing
// recorded since the last tick is lost.
func (c *stallMetrics) Shutdown(ctx context.Context) error {
	if c.cancel == nil {
		return nil
	}
	c.cancel()
	c.wg.Wait()
	c.cancel = nil
	c.closeHandoff()
	c.telemetry.Shutdown()
	return c.flush(ctx)
}

func (*stallMetrics) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// ConsumeTraces records every span of the batch. It never fails: a span
// whose figures are inconsistent or implausible records no streaming metric, and values
// past max_series go to the overflow points.
func (c *stallMetrics) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	c.mu.Lock()
	c.refused = figures.Refusals{}
	for _, rs := range td.ResourceSpans().All() {
		res := rs.Resource().Attributes()
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				c.recordSpan(res, span)
			}
		}
	}
	refused := c.refused
	overflowed := c.metrics.takeOverflowed()
	logOverflow := overflowed > 0 && !c.overflowLogged
	c.overflowLogged = c.overflowLogged || logOverflow
	c.mu.Unlock()

	if logOverflow {
		c.logger.Warn("max_series reached: values of further attribute sets go to the overflow data point (otel.metric.overflow = true) until the connector restarts; this is logged once, connector_stall_metrics_points.overflowed counts them",
			zap.Int("max_series", c.config.MaxSeries))
	}
	if overflowed > 0 {
		c.telemetry.ConnectorStallMetricsPointsOverflowed.Add(ctx, overflowed)
	}
	if refused.Inconsistent > 0 {
		c.telemetry.ConnectorStallMetricsSpansInconsistent.Add(ctx, refused.Inconsistent)
	}
	if refused.Implausible > 0 {
		c.telemetry.ConnectorStallMetricsSpansImplausible.Add(ctx, refused.Implausible)
	}
	return nil
}

// flush exports the points that hold values; with delta temporality it then
// empties them and starts a new interval. The points themselves are kept,
// like spanmetrics' timestamp cache: a series that comes back after idle
// intervals continues from its last export instead of looking like a reset
// to cumulative-only consumers (the prometheus exporter drops or resets
// misaligned deltas). A flush with no value exports nothing.
func (c *stallMetrics) flush(ctx context.Context) error {
	c.mu.Lock()
	now := pcommon.NewTimestampFromTime(c.clock.Now())
	md := c.buildMetrics(now)
	if c.config.Temporality == TemporalityDelta {
		c.metrics.emptyValues()
		c.intervalStart = now
	}
	c.mu.Unlock()

	if md.DataPointCount() == 0 {
		return nil
	}
	if err := c.next.ConsumeMetrics(ctx, md); err != nil {
		return fmt.Errorf("export stall metrics: %w", err)
	}
	return nil
}

func (s *seriesSet) histograms() []*aggregate.Series[*exphist.Histogram] {
	return []*aggregate.Series[*exphist.Histogram]{s.ttft, s.perChunk, s.ttfa, s.generation, s.active, s.stall, s.wastedTime}
}

func (s *seriesSet) counters() []*aggregate.Series[*int64] {
	return []*aggregate.Series[*int64]{s.calls, s.attempts, s.wastedTokens}
}

// takeOverflowed sums the overflowed lookups of every metric since the
// previous call.
func (s *seriesSet) takeOverflowed() int64 {
	// No histograms(): it allocates, and this runs once per batch.
	return s.ttft.TakeOverflowed() + s.perChunk.TakeOverflowed() + s.ttfa.TakeOverflowed() +
		s.generation.TakeOverflowed() + s.active.TakeOverflowed() + s.stall.TakeOverflowed() +
		s.wastedTime.TakeOverflowed() + s.calls.TakeOverflowed() + s.attempts.TakeOverflowed() +
		s.wastedTokens.TakeOverflowed()
}

// reset drops every point.
func (s *seriesSet) reset() {
	for _, h := range s.histograms() {
		h.Reset()
	}
	for _, c := range s.counters() {
		c.Reset()
	}
}

// emptyValues empties every point's value and keeps the point.
func (s *seriesSet) emptyValues() {
	for _, h := range s.histograms() {
		h.All(func(p *aggregate.Point[*exphist.Histogram]) { p.Value.Reset() })
	}
	for _, c := range s.counters() {
		c.All(func(p *aggregate.Point[*int64]) { *p.Value = 0 })
	}
}

// temporality is the aggregation temporality of the exported points.
func (c *stallMetrics) temporality() pmetric.AggregationTemporality {
	if c.config.Temporality == TemporalityDelta {
		return pmetric.AggregationTemporalityDelta
	}
	return pmetric.AggregationTemporalityCumulative
}

// pointStart is the start time of a point exported now: the connector start
// (cumulative), else the end of the point's previous export, else the end
// of the previous flush (delta). Callers hold mu.
func (c *stallMetrics) pointStart(lastExport pcommon.Timestamp) pcommon.Timestamp {
	switch {
	case c.config.Temporality != TemporalityDelta:
		return c.start
	case lastExport != 0:
		return lastExport
	default:
		return c.intervalStart
	}
}

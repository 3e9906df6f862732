// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallmetricsconnector // import "github.com/streamstall/streamstall/connector/stallmetricsconnector"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/streamstall/streamstall/internal/dimension"
	"github.com/streamstall/streamstall/internal/exphist"
	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
)

// Losers modes: what happens to the figures of hedge losers.
const (
	LosersExclude  = "exclude"
	LosersSeparate = "separate"
)

// Metric names modes: which names the two GenAI histograms are exported under.
const (
	// MetricNamesStable is the semantic conventions v1.41 names
	// (gen_ai.client.operation.*), what dashboards use today.
	MetricNamesStable = "stable"
	// MetricNamesLatest is the names of the GenAI conventions' main branch
	// (gen_ai.client.inference.*).
	MetricNamesLatest = "latest"
	// MetricNamesBoth exports each value under both names, for migrations.
	MetricNamesBoth = "both"
)

// Temporality modes of the emitted metrics.
const (
	TemporalityCumulative = "cumulative"
	TemporalityDelta      = "delta"
)

// HistogramConfig sizes the exponential histograms.
type HistogramConfig struct {
	// RelativeAccuracy is the largest relative error tolerated on any quantile;
	// it chooses the coarsest exponential scale that meets it.
	RelativeAccuracy float64 `mapstructure:"relative_accuracy"`
	// MaxBuckets bounds the buckets of one histogram data point; past it the
	// histogram is downscaled, as the OpenTelemetry SDK does.
	MaxBuckets int `mapstructure:"max_buckets"`
	// prevent unkeyed literal initialization
	_ struct{}
}

// Config is the configuration of the stall_metrics connector.
type Config struct {
	// Dimensions are added to the default ones: resource service.name,
	// gen_ai.provider.name, gen_ai.request.model and gen_ai.operation.name.
	// When a span and its resource both lack one, its default is used if
	// set; otherwise the dimension is left off the data point.
	Dimensions []dimension.Dimension `mapstructure:"dimensions"`
	// ChunkEvents selects the chunk events whose gaps and stalls are
	// recorded, as the stall processor's chunk_events does (the same
	// names, max_duration and defaults; set them alike).
	ChunkEvents figures.ChunkEventsConfig `mapstructure:"chunk_events"`
	// Losers is "exclude" (hedge losers reach only llm.hedge.attempts) or
	// "separate" (they are recorded under llm.hedge.outcome = loser).
	Losers string `mapstructure:"losers"`
	// Temporality is "cumulative" or "delta".
	Temporality string `mapstructure:"temporality"`
	// MetricNames chooses the names of the GenAI time-to-first-chunk and
	// time-per-output-chunk histograms: "stable", "latest" or "both".
	MetricNames string `mapstructure:"metric_names"`
	// FlushInterval is the time between two exports.
	FlushInterval time.Duration `mapstructure:"flush_interval"`
	// MaxSeries bounds the data points of each metric; values of further
	// attribute sets go to one overflow data point.
	MaxSeries int `mapstructure:"max_series"`
	// MaxDimensionValueLength bounds the bytes of each dimension value taken
	// from a span or its resource; a longer value is cut on a UTF-8
	// character boundary. Values that are not strings are cut in their
	// string form (and become strings).
	MaxDimensionValueLength int             `mapstructure:"max_dimension_value_length"`
	Histogram               HistogramConfig `mapstructure:"histogram"`
	// prevent unkeyed literal initialization
	_ struct{}
}

var (
	_ component.Config  = (*Config)(nil)
	_ confmap.Validator = (*Config)(nil)
)

// maxMaxSeries is the most attribute sets a connector may hold: measured with
// the whole collector and a Prometheus scrape (TestConnectorMemoryPerSeries),
// 10,000 sets raise its peak memory by about 1.3 GiB, and the cost per set
// grows with the count.
const maxMaxSeries = 10000

// reservedDimensions are set by the connector itself and cannot be configured.
var reservedDimensions = []string{
	semconv.AttrServiceName, semconv.AttrProviderName, semconv.AttrRequestModel, semconv.AttrOperationName,
	semconv.AttrStalled, semconv.AttrHedgeTrigger, semconv.AttrHedgeOutcome, semconv.AttrHedgeWastedSource,
	semconv.AttrMetricOverflow,
}

// Validate checks the configuration; all problems are reported at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Losers != LosersExclude && c.Losers != LosersSeparate {
		errs = append(errs, fmt.Errorf("losers must be %q or %q, got %q", LosersExclude, LosersSeparate, c.Losers))
	}
	if c.Temporality != TemporalityCumulative && c.Temporality != TemporalityDelta {
		errs = append(errs, fmt.Errorf("temporality must be %q or %q, got %q", TemporalityCumulative, TemporalityDelta, c.Temporality))
	}
	switch c.MetricNames {
	case MetricNamesStable, MetricNamesLatest, MetricNamesBoth:
	default:
		errs = append(errs, fmt.Errorf("metric_names must be %q, %q or %q, got %q", MetricNamesStable, MetricNamesLatest, MetricNamesBoth, c.MetricNames))
	}
	if c.FlushInterval <= 0 {
		errs = append(errs, fmt.Errorf("flush_interval must be positive, got %v", c.FlushInterval))
	}
	switch {
	case c.MaxSeries < 1:
		errs = append(errs, fmt.Errorf("max_series must be at least 1, got %d", c.MaxSeries))
	case c.MaxSeries > maxMaxSeries:
		errs = append(errs, fmt.Errorf("max_series must be at most %d (about 1.3 GiB of collector memory with a Prometheus scrape: docs/deployment.md), got %d", maxMaxSeries, c.MaxSeries))
	}
	if c.MaxDimensionValueLength < 1 {
		errs = append(errs, fmt.Errorf("max_dimension_value_length must be at least 1, got %d", c.MaxDimensionValueLength))
	}
	if _, err := exphist.ScaleForAccuracy(c.Histogram.RelativeAccuracy); err != nil {
		errs = append(errs, fmt.Errorf("histogram::relative_accuracy: %w", err))
	}
	if c.Histogram.MaxBuckets < exphist.MinMaxBuckets {
		errs = append(errs, fmt.Errorf("histogram::max_buckets must be at least %d, got %d", exphist.MinMaxBuckets, c.Histogram.MaxBuckets))
	}
	errs = append(errs, c.ChunkEvents.Check()...)
	errs = append(errs, dimension.Check(c.Dimensions, reservedDimensions...)...)
	return errors.Join(errs...)
}

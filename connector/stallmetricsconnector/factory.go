// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallmetricsconnector // import "github.com/streamstall/streamstall/connector/stallmetricsconnector"

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/streamstall/streamstall/connector/stallmetricsconnector/internal/metadata"
	"github.com/streamstall/streamstall/internal/figures"
)

const (
	defaultFlushInterval = 15 * time.Second
	defaultMaxSeries     = 2000
	// defaultMaxDimensionValueLength holds any model, provider or service
	// name in use (the longest are under 100 bytes) and bounds a point's
	// attributes to about 1 KB with the default dimensions.
	defaultMaxDimensionValueLength = 256
	defaultRelativeAccuracy        = 0.01
	defaultMaxBuckets              = 160
)

// NewFactory returns the factory of the stall_metrics connector.
func NewFactory() connector.Factory {
	return connector.NewFactory(
		metadata.Type,
		createDefaultConfig,
		connector.WithTracesToMetrics(createTracesToMetrics, metadata.TracesToMetricsStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		Losers:                  LosersExclude,
		Temporality:             TemporalityCumulative,
		MetricNames:             MetricNamesStable,
		FlushInterval:           defaultFlushInterval,
		MaxSeries:               defaultMaxSeries,
		MaxDimensionValueLength: defaultMaxDimensionValueLength,
		ChunkEvents:             figures.DefaultChunkEventsConfig(),
		Histogram: HistogramConfig{
			RelativeAccuracy: defaultRelativeAccuracy,
			MaxBuckets:       defaultMaxBuckets,
		},
	}
}

// createTracesToMetrics takes the clock from the context, as spanmetrics
// does, so that tests can run the flush loop on a fake clock.
func createTracesToMetrics(ctx context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	return newStallMetrics(set, cfg.(*Config), next, clockwork.FromContext(ctx))
}

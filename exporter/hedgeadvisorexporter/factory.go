// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgeadvisorexporter // import "github.com/streamstall/streamstall/exporter/hedgeadvisorexporter"

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/streamstall/streamstall/exporter/hedgeadvisorexporter/internal/metadata"
	"github.com/streamstall/streamstall/internal/figures"
)

const (
	defaultEndpoint       = "localhost:4320"
	defaultTTFTQuantile   = 0.95
	defaultGapQuantile    = 0.999
	defaultMinSamples     = 50
	defaultWindow         = 10 * time.Minute
	defaultMaxSeries      = 1000
	defaultMaxLabelLength = 256
	// defaultMaxClientShare: at the default ttft_quantile of 0.95 the tail
	// holds 5 % of a window; a client held below that cannot set the p95.
	defaultMaxClientShare      = 0.04
	defaultMaxClientsPerSeries = 128
	// The clamp: no LLM answers in under 10 ms, and a delay or silence of
	// two minutes is past any hedge worth making.
	defaultMinAdvised = 10 * time.Millisecond
	defaultMaxAdvised = 2 * time.Minute
	// The listener's bounds, those of sse_capture's listeners.
	defaultReadTimeout           = 30 * time.Second
	defaultReadHeaderTimeout     = 10 * time.Second
	defaultMaxRequestHeaderBytes = 64 << 10
)

// NewFactory returns the factory of the hedge_advisor exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(
		metadata.Type,
		createDefaultConfig,
		exporter.WithTraces(createTraces, metadata.TracesStability),
	)
}

func createDefaultConfig() component.Config {
	server := confighttp.NewDefaultServerConfig()
	server.NetAddr.Endpoint = defaultEndpoint
	server.ReadTimeout = defaultReadTimeout
	server.ReadHeaderTimeout = defaultReadHeaderTimeout
	return &Config{
		ServerConfig:          server,
		TTFTQuantile:          defaultTTFTQuantile,
		GapQuantile:           defaultGapQuantile,
		MinSamples:            defaultMinSamples,
		Window:                defaultWindow,
		MaxSeries:             defaultMaxSeries,
		MaxLabelLength:        defaultMaxLabelLength,
		MaxClientShare:        defaultMaxClientShare,
		MaxClientsPerSeries:   defaultMaxClientsPerSeries,
		HedgeDelayRange:       RangeConfig{Min: defaultMinAdvised, Max: defaultMaxAdvised},
		StallAfterRange:       RangeConfig{Min: defaultMinAdvised, Max: defaultMaxAdvised},
		MaxRequestHeaderBytes: defaultMaxRequestHeaderBytes,
		ChunkEvents:           figures.DefaultChunkEventsConfig(),
	}
}

// createTraces takes the clock from the context, as spanmetrics does, so
// that tests can rotate the windows on a fake clock. The exporter keeps no
// queue: it only aggregates, like the prometheus exporter.
func createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	a, err := newAdvisor(set, cfg.(*Config), clockwork.FromContext(ctx))
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewTraces(ctx, set, cfg, a.consumeTraces,
		exporterhelper.WithStart(a.start),
		exporterhelper.WithShutdown(a.shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
	)
}

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
	return &Config{
		ServerConfig:   server,
		TTFTQuantile:   defaultTTFTQuantile,
		GapQuantile:    defaultGapQuantile,
		MinSamples:     defaultMinSamples,
		Window:         defaultWindow,
		MaxSeries:      defaultMaxSeries,
		MaxLabelLength: defaultMaxLabelLength,
		ChunkEvents:    figures.DefaultChunkEventsConfig(),
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

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallprocessor // import "github.com/streamstall/streamstall/processor/stallprocessor"

import (
	"context"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/processor/stallprocessor/internal/metadata"
)

const (
	defaultStallThreshold = 2 * time.Second
	defaultMaxStallEvents = 32
)

var processorCapabilities = consumer.Capabilities{MutatesData: true}

// NewFactory returns the factory of the stall processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithTraces(createTracesProcessor, metadata.TracesStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		StallThreshold: defaultStallThreshold,
		ChunkEvents:    ChunkEventsConfig{ChunkEventsConfig: figures.DefaultChunkEventsConfig()},
		MarkerEvents:   figures.DefaultMarkerEventsConfig(),
		MaxStallEvents: defaultMaxStallEvents,
		ErrorMode:      ottl.IgnoreError,
	}
}

func createTracesProcessor(
	ctx context.Context,
	set processor.Settings,
	cfg component.Config,
	nextConsumer consumer.Traces,
) (processor.Traces, error) {
	sp, err := newStallProcessor(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return processorhelper.NewTraces(
		ctx,
		set,
		cfg,
		nextConsumer,
		sp.processTraces,
		processorhelper.WithCapabilities(processorCapabilities),
		processorhelper.WithShutdown(sp.shutdown),
	)
}

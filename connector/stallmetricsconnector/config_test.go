// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallmetricsconnector

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/streamstall/streamstall/connector/stallmetricsconnector/internal/metadata"
	"github.com/streamstall/streamstall/internal/dimension"
	"github.com/streamstall/streamstall/internal/figures"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	unknown := "unknown"
	tests := []struct {
		name     string
		expected *Config
		errs     []string
	}{
		{name: "default", expected: createDefaultConfig().(*Config)},
		{
			name: "full",
			expected: &Config{
				Dimensions:              []dimension.Dimension{{Name: "server.address"}, {Name: "deployment.environment.name", Default: &unknown}},
				Losers:                  LosersSeparate,
				Temporality:             TemporalityDelta,
				MetricNames:             MetricNamesBoth,
				FlushInterval:           30 * time.Second,
				MaxSeries:               500,
				MaxDimensionValueLength: 64,
				ChunkEvents:             figures.ChunkEventsConfig{Names: []string{"my.chunk"}, MaxDuration: 2 * time.Hour},
				Histogram:               HistogramConfig{RelativeAccuracy: 0.02, MaxBuckets: 320},
			},
		},
		{name: "bad_losers", errs: []string{`losers must be "exclude" or "separate", got "drop"`}},
		{name: "bad_metric_names", errs: []string{`metric_names must be "stable", "latest" or "both", got "v1.41"`}},
		{name: "reserved_wasted_source", errs: []string{`dimensions[0]: duplicate or reserved dimension "llm.hedge.wasted.source"`}},
		{name: "bad_temporality", errs: []string{`temporality must be "cumulative" or "delta", got "AGGREGATION_TEMPORALITY_DELTA"`}},
		{name: "bad_numbers", errs: []string{
			"flush_interval must be positive, got 0s",
			"max_series must be at least 1, got 0",
			"max_dimension_value_length must be at least 1, got 0",
			"histogram::relative_accuracy: must be in (0, 1), got 1.5",
			"histogram::max_buckets must be at least 2, got 1",
		}},
		{name: "too_many_series", errs: []string{"max_series must be at most 10000 (about 1.3 GiB of collector memory with a Prometheus scrape: docs/deployment.md), got 100000"}},
		{name: "too_fine", errs: []string{"histogram::relative_accuracy: 1e-07 is finer than scale 20 allows"}},
		{name: "duplicate_dimension", errs: []string{
			`dimensions[0]: duplicate or reserved dimension "gen_ai.request.model"`,
			`dimensions[2]: duplicate or reserved dimension "team"`,
		}},
		{name: "empty_dimension", errs: []string{"dimensions[0]: name must not be empty"}},
		{name: "bad_chunk_events", errs: []string{
			`chunk_events::names[0]: "llm.stream.keepalive" is never a content chunk`,
			"chunk_events::max_duration: must be positive, got 0s",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(component.NewIDWithName(metadata.Type, tt.name).String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			err = confmap.Validate(cfg)
			if len(tt.errs) == 0 {
				require.NoError(t, err)
				assert.Equal(t, tt.expected, cfg)
				return
			}
			require.Error(t, err)
			for _, want := range tt.errs {
				assert.ErrorContains(t, err, want)
			}
		})
	}
}

func TestCreateRefusesInvalidConfig(t *testing.T) {
	cfg := defaultConfig()
	cfg.Histogram.RelativeAccuracy = 0
	_, err := newStallMetrics(connectorSettings(), cfg, nil, nil)
	require.ErrorContains(t, err, "histogram relative accuracy")
}

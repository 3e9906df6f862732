// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgeadvisorexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/streamstall/streamstall/exporter/hedgeadvisorexporter/internal/metadata"
	"github.com/streamstall/streamstall/internal/dimension"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	unknown := "unknown"
	full := createDefaultConfig().(*Config)
	full.ServerConfig.NetAddr.Endpoint = "0.0.0.0:9400"
	full.TTFTQuantile, full.GapQuantile = 0.9, 0.99
	full.MinSamples, full.Window, full.MaxSeries, full.MaxLabelLength = 200, 5*time.Minute, 50, 64
	full.Dimensions = []dimension.Dimension{{Name: "service.name"}, {Name: "deployment.environment.name", Default: &unknown}}
	full.Trust = TrustConfig{
		Ingest: true, RequireAuth: true,
		ResourceAttributes: map[string][]string{"deployment.environment.name": {"production", "staging"}},
	}
	full.MaxClientShare, full.MaxClientsPerSeries = 0.02, 64
	full.HedgeDelayRange = RangeConfig{Min: 50 * time.Millisecond, Max: 30 * time.Second}
	full.StallAfterRange = RangeConfig{}
	full.MaxRequestHeaderBytes = 8192
	full.ChunkEvents.Names = []string{"my.chunk"}
	full.ChunkEvents.MaxDuration = 2 * time.Hour
	tests := []struct {
		name     string
		expected *Config
		errs     []string
	}{
		{name: "default", expected: createDefaultConfig().(*Config)},
		{name: "full", expected: full},
		{name: "bad_numbers", errs: []string{
			"endpoint must not be empty",
			"ttft_quantile must be in (0, 1), got 1",
			"gap_quantile must be in (0, 1), got 0",
			"min_samples must be at least 1, got 0",
			"window must be at least 1s, got 100ms",
			"max_series must be in [1, 100000], got 0",
			"max_label_length must be at least 1, got 0",
			"max_client_share must be in (0, 1], got 0",
			"max_clients_per_series must be in [1, 10000], got 0",
			"hedge_delay_range: min 1m0s is above max 1s",
			"stall_after_range: bounds must not be negative, got [-1s, 2m0s]",
			"max_request_header_bytes must be in [1024, 1048576], got 100",
		}},
		{name: "bad_trust", errs: []string{
			"trust.resource_attributes.deployment.environment.name: list at least one allowed value",
		}},
		{name: "duplicate_dimension", errs: []string{
			`dimensions[0]: duplicate or reserved dimension "gen_ai.request.model"`,
			`dimensions[2]: duplicate or reserved dimension "team"`,
			"dimensions[3]: name must not be empty",
		}},
		{name: "bad_chunk_events", errs: []string{
			"chunk_events::names: must name at least one chunk event",
			"chunk_events::max_duration: must be positive, got -1s",
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

func TestDefaultConfig(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, cfg.Validate())
	assert.Equal(t, "localhost:4320", cfg.ServerConfig.NetAddr.Endpoint, "loopback by default")
	assert.Equal(t, 0.95, cfg.TTFTQuantile)
	assert.Equal(t, 0.999, cfg.GapQuantile)
	assert.Equal(t, 10*time.Minute, cfg.Window)
	assert.Equal(t, TrustConfig{}, cfg.Trust, "ingest spans are not learned from by default")
	assert.Equal(t, 0.04, cfg.MaxClientShare, "below the 5 %% tail of the default ttft_quantile")
	assert.Equal(t, 128, cfg.MaxClientsPerSeries)
	assert.Equal(t, RangeConfig{Min: 10 * time.Millisecond, Max: 2 * time.Minute}, cfg.HedgeDelayRange)
	assert.Equal(t, RangeConfig{Min: 10 * time.Millisecond, Max: 2 * time.Minute}, cfg.StallAfterRange)
	assert.Equal(t, 30*time.Second, cfg.ServerConfig.ReadTimeout, "as sse_capture's listeners")
	assert.Equal(t, 10*time.Second, cfg.ServerConfig.ReadHeaderTimeout, "as sse_capture's listeners")
	assert.Equal(t, 64<<10, cfg.MaxRequestHeaderBytes)
}

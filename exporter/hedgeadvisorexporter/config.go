// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgeadvisorexporter // import "github.com/streamstall/streamstall/exporter/hedgeadvisorexporter"

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/confmap"

	"github.com/streamstall/streamstall/internal/dimension"
	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
)

// Config is the configuration of the hedge_advisor exporter.
type Config struct {
	// ServerConfig is the listener of GET /v1/hedge/advice (endpoint, TLS,
	// auth, CORS...).
	ServerConfig confighttp.ServerConfig `mapstructure:",squash"`
	// TTFTQuantile is the quantile of time to first content advised as the
	// hedge delay (hedge_delay_ms).
	TTFTQuantile float64 `mapstructure:"ttft_quantile"`
	// GapQuantile is the quantile of the inter-chunk gap advised as the
	// mid-stream hedge trigger (stall_after_ms).
	GapQuantile float64 `mapstructure:"gap_quantile"`
	// MinSamples is the number of attempts (gaps for stall_after_ms) a series
	// needs in its window before it gets a recommendation.
	MinSamples int `mapstructure:"min_samples"`
	// Window is the sliding window every series covers.
	Window time.Duration `mapstructure:"window"`
	// MaxSeries bounds the series (provider, model, dimensions); attempts of
	// further series are dropped until a series idle for a window frees its
	// place.
	MaxSeries int `mapstructure:"max_series"`
	// Dimensions split the series beyond provider and model. When a span
	// and its resource both lack one, its default is used if set, the empty
	// string otherwise.
	Dimensions []dimension.Dimension `mapstructure:"dimensions"`
	// MaxLabelLength bounds the bytes of every provider, model and dimension
	// value; longer values are cut.
	MaxLabelLength int `mapstructure:"max_label_length"`
	// Trust says which spans the advice is learned from.
	Trust TrustConfig `mapstructure:"trust"`
	// MaxClientShare bounds the share of a series' window one client may
	// hold (or an even share, when fewer clients share it); 1: no bound.
	MaxClientShare float64 `mapstructure:"max_client_share"`
	// MaxClientsPerSeries bounds the clients the share cap tells apart in a
	// series; the others share one bucket, capped as one client.
	MaxClientsPerSeries int `mapstructure:"max_clients_per_series"`
	// HedgeDelayRange and StallAfterRange clamp the advised hedge_delay_ms
	// and stall_after_ms.
	HedgeDelayRange RangeConfig `mapstructure:"hedge_delay_range"`
	StallAfterRange RangeConfig `mapstructure:"stall_after_range"`
	// MaxRequestHeaderBytes bounds the request headers of the advice
	// listener (http.Server.MaxHeaderBytes): larger ones get 431 before any
	// authenticator runs.
	MaxRequestHeaderBytes int `mapstructure:"max_request_header_bytes"`
	// ChunkEvents selects the chunk events whose times are learned, as the
	// stall processor's chunk_events does (the same names, max_duration and
	// defaults; set them alike).
	ChunkEvents figures.ChunkEventsConfig `mapstructure:"chunk_events"`
	// prevent unkeyed literal initialization
	_ struct{}
}

// TrustConfig says which of the spans the pipeline hands the advisor it
// learns from. The pipeline is the first line: feed the advisor only from
// receivers you trust (docs/security.md).
type TrustConfig struct {
	// Ingest also learns from the spans of sse_capture's ingest endpoint
	// (llm.stream.capture = ingest), which any client that can reach it
	// writes. Off by default; the proxy's own spans always count.
	Ingest bool `mapstructure:"ingest"`
	// RequireAuth learns only from spans that arrived on an authenticated
	// request (a receiver with an auth extension).
	RequireAuth bool `mapstructure:"require_auth"`
	// ResourceAttributes, when set, learns only from spans whose resource
	// has, for every key, one of the listed values.
	ResourceAttributes map[string][]string `mapstructure:"resource_attributes"`
	// prevent unkeyed literal initialization
	_ struct{}
}

// RangeConfig is a closed range of durations; 0 is no bound.
type RangeConfig struct {
	Min time.Duration `mapstructure:"min"`
	Max time.Duration `mapstructure:"max"`
	// prevent unkeyed literal initialization
	_ struct{}
}

func (r RangeConfig) validate(name string) error {
	if r.Min < 0 || r.Max < 0 {
		return fmt.Errorf("%s: bounds must not be negative, got [%s, %s]", name, r.Min, r.Max)
	}
	if r.Max > 0 && r.Min > r.Max {
		return fmt.Errorf("%s: min %s is above max %s", name, r.Min, r.Max)
	}
	return nil
}

var (
	_ component.Config  = (*Config)(nil)
	_ confmap.Validator = (*Config)(nil)
)

// Bounds of the configuration.
const (
	maxMaxSeries     = 100_000
	maxMaxClients    = 10_000
	minWindow        = time.Second
	minHeaderBytes   = 1 << 10
	maxHeaderBytes   = 1 << 20
	maxTrustedValues = 1000
)

// Validate checks the configuration; all problems are reported at once.
func (c *Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.ServerConfig.NetAddr.Endpoint) == "" {
		errs = append(errs, errors.New("endpoint must not be empty"))
	}
	if !(c.TTFTQuantile > 0 && c.TTFTQuantile < 1) {
		errs = append(errs, fmt.Errorf("ttft_quantile must be in (0, 1), got %v", c.TTFTQuantile))
	}
	if !(c.GapQuantile > 0 && c.GapQuantile < 1) {
		errs = append(errs, fmt.Errorf("gap_quantile must be in (0, 1), got %v", c.GapQuantile))
	}
	if c.MinSamples < 1 {
		errs = append(errs, fmt.Errorf("min_samples must be at least 1, got %d", c.MinSamples))
	}
	if c.Window < minWindow {
		errs = append(errs, fmt.Errorf("window must be at least %s, got %s", minWindow, c.Window))
	}
	if c.MaxSeries < 1 || c.MaxSeries > maxMaxSeries {
		errs = append(errs, fmt.Errorf("max_series must be in [1, %d], got %d", maxMaxSeries, c.MaxSeries))
	}
	if c.MaxLabelLength < 1 {
		errs = append(errs, fmt.Errorf("max_label_length must be at least 1, got %d", c.MaxLabelLength))
	}
	if !(c.MaxClientShare > 0 && c.MaxClientShare <= 1) {
		errs = append(errs, fmt.Errorf("max_client_share must be in (0, 1], got %v", c.MaxClientShare))
	}
	if c.MaxClientsPerSeries < 1 || c.MaxClientsPerSeries > maxMaxClients {
		errs = append(errs, fmt.Errorf("max_clients_per_series must be in [1, %d], got %d", maxMaxClients, c.MaxClientsPerSeries))
	}
	if err := c.HedgeDelayRange.validate("hedge_delay_range"); err != nil {
		errs = append(errs, err)
	}
	if err := c.StallAfterRange.validate("stall_after_range"); err != nil {
		errs = append(errs, err)
	}
	if c.MaxRequestHeaderBytes < minHeaderBytes || c.MaxRequestHeaderBytes > maxHeaderBytes {
		errs = append(errs, fmt.Errorf("max_request_header_bytes must be in [%d, %d], got %d", minHeaderBytes, maxHeaderBytes, c.MaxRequestHeaderBytes))
	}
	for _, k := range slices.Sorted(maps.Keys(c.Trust.ResourceAttributes)) {
		switch vs := c.Trust.ResourceAttributes[k]; {
		case strings.TrimSpace(k) == "":
			errs = append(errs, errors.New("trust.resource_attributes: keys must not be empty"))
		case len(vs) == 0:
			errs = append(errs, fmt.Errorf("trust.resource_attributes.%s: list at least one allowed value", k))
		case len(vs) > maxTrustedValues:
			errs = append(errs, fmt.Errorf("trust.resource_attributes.%s: at most %d values, got %d", k, maxTrustedValues, len(vs)))
		}
	}
	errs = append(errs, c.ChunkEvents.Check()...)
	errs = append(errs, dimension.Check(c.Dimensions, semconv.AttrProviderName, semconv.AttrRequestModel)...)
	return errors.Join(errs...)
}

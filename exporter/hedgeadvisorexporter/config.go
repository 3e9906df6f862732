package hedgeadvisorexporter // import "github.com/streamstall/streamstall/exporter/hedgeadvisorexporter"

import (
	"errors"
	"fmt"
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
	// ChunkEvents selects the chunk events whose times are learned, as the
	// stall processor's chunk_events does (the same names, max_duration and
	// defaults; set them alike).
	ChunkEvents figures.ChunkEventsConfig `mapstructure:"chunk_events"`
	// prevent unkeyed literal initialization
	_ struct{}
}

var (
	_ component.Config  = (*Config)(nil)
	_ confmap.Validator = (*Config)(nil)
)

// Bounds of the configuration.
const (
	maxMaxSeries = 100_000
	minWindow    = time.Second
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
	errs = append(errs, c.ChunkEvents.Check()...)
	errs = append(errs, dimension.Check(c.Dimensions, semconv.AttrProviderName, semconv.AttrRequestModel)...)
	return errors.Join(errs...)
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.opentelemetry.io/collector/config/confighttp"

	"github.com/streamstall/streamstall/internal/advice"
)

// AdvisorConfig takes the guard's learned values from a hedge_advisor: the
// auto hedge delay and the auto stall timeouts come from the fleet's
// advice for the call's provider and model, the proxy's own learning when
// the advice is stale or has too few samples, then the floor
// (docs/hedging.md, "Proxies that learn as a fleet").
type AdvisorConfig struct {
	// ClientConfig is how the advice is fetched: endpoint is the advisor's
	// base URL (http://collector:4320; the advice path is appended) or its
	// full advice URL; timeout bounds one fetch.
	confighttp.ClientConfig `mapstructure:",squash"`
	// Interval is the time between two fetches.
	Interval time.Duration `mapstructure:"interval"`
	// MaxAge is how long a fetched advice is used when later fetches fail.
	MaxAge time.Duration `mapstructure:"max_age"`

	_ struct{}
}

// Defaults of the advisor block, as the hedging client's advice.
const (
	defaultAdvisorInterval = 30 * time.Second
	defaultAdvisorTimeout  = 250 * time.Millisecond
	defaultAdvisorMaxAge   = 5 * time.Minute
)

func defaultAdvisorConfig() AdvisorConfig {
	cc := confighttp.NewDefaultClientConfig()
	cc.Timeout = defaultAdvisorTimeout
	return AdvisorConfig{ClientConfig: cc, Interval: defaultAdvisorInterval, MaxAge: defaultAdvisorMaxAge}
}

var errAdvisorEndpoint = errors.New("endpoint must be the http(s) URL of a hedge_advisor")

func (a *AdvisorConfig) validate() error {
	var errs []error
	if _, err := a.adviceURL(); err != nil {
		errs = append(errs, fmt.Errorf("proxy: guard: advisor: %w", err))
	}
	if a.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("proxy: guard: advisor: timeout %w", errPositive))
	}
	if a.Interval <= 0 {
		errs = append(errs, fmt.Errorf("proxy: guard: advisor: interval %w", errPositive))
	}
	if a.MaxAge < a.Interval {
		errs = append(errs, fmt.Errorf("proxy: guard: advisor: max_age %v must be at least interval %v", a.MaxAge, a.Interval))
	}
	return errors.Join(errs...)
}

// adviceURL is the URL the advice is fetched from: the endpoint with the
// advice path when it names none.
func (a *AdvisorConfig) adviceURL() (string, error) {
	u, err := url.Parse(a.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errAdvisorEndpoint
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = advice.Path
	}
	return u.String(), nil
}

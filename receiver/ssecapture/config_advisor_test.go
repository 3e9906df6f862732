// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/advice"
)

func TestGuardAdvisorIsOffWithoutItsBlock(t *testing.T) {
	cfg, err := loadGuardConfig(t, "guard_full")
	require.NoError(t, err)
	assert.False(t, cfg.Proxy.Get().Guard.Get().Advisor.HasValue())
}

func TestGuardAdvisorDefaults(t *testing.T) {
	cfg, err := loadGuardConfig(t, "guard_advisor")
	require.NoError(t, err)
	a := cfg.Proxy.Get().Guard.Get().Advisor
	require.True(t, a.HasValue())
	assert.Equal(t, 250*time.Millisecond, a.Get().Timeout)
	assert.Equal(t, 30*time.Second, a.Get().Interval)
	assert.Equal(t, 5*time.Minute, a.Get().MaxAge)
	u, err := a.Get().adviceURL()
	require.NoError(t, err)
	assert.Equal(t, "http://advisor.internal:4320"+advice.Path, u, "a base URL gets the advice path")
}

func TestGuardAdvisorFull(t *testing.T) {
	cfg, err := loadGuardConfig(t, "guard_advisor_full")
	require.NoError(t, err)
	a := cfg.Proxy.Get().Guard.Get().Advisor.Get()
	assert.Equal(t, time.Second, a.Timeout)
	assert.Equal(t, 10*time.Second, a.Interval)
	assert.Equal(t, time.Minute, a.MaxAge)
	u, err := a.adviceURL()
	require.NoError(t, err)
	assert.Equal(t, "https://advisor.internal:4320/v1/hedge/advice", u, "a full advice URL is used as given")
}

func TestGuardAdvisorValidate(t *testing.T) {
	_, err := loadGuardConfig(t, "guard_advisor_bad")
	require.Error(t, err)
	for _, want := range []string{
		"proxy: guard: advisor: endpoint must be the http(s) URL of a hedge_advisor",
		"proxy: guard: advisor: timeout must be positive",
		"proxy: guard: advisor: max_age 30s must be at least interval 1m0s",
	} {
		assert.ErrorContains(t, err, want)
	}
}

// TestDocsHedgingFleetExample: the fleet configuration of docs/hedging.md
// is valid and takes both auto values from an advisor.
func TestDocsHedgingFleetExample(t *testing.T) {
	g := hedgingDocConfig(t, "Proxies that learn as a fleet").Proxy.Get().Guard.Get()
	assert.True(t, g.StallTimeout.Auto())
	assert.True(t, g.Hedge.Delay.Auto())
	require.True(t, g.Advisor.HasValue())
	assert.Equal(t, 5*time.Minute, g.Advisor.Get().MaxAge)
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/streamstall/streamstall/internal/testbed/mdcode"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

func loadGuardConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "guard.yaml"))
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig()
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	if err := sub.Unmarshal(cfg); err != nil {
		return nil, err
	}
	return cfg.(*Config), confmap.Validate(cfg)
}

func TestGuardIsOffWithoutItsBlock(t *testing.T) {
	cfg, err := loadConfig(t, "")
	require.NoError(t, err)
	assert.False(t, cfg.Proxy.Get().Guard.HasValue())
}

func TestGuardDefaults(t *testing.T) {
	cfg, err := loadGuardConfig(t, "guard_empty")
	require.NoError(t, err)
	require.True(t, cfg.Proxy.Get().Guard.HasValue(), "an empty guard block turns the guard on with its defaults")
	g := cfg.Proxy.Get().Guard.Get()
	assert.Equal(t, AutoDuration(0), g.StallTimeout, "the watchdog is off by default")
	assert.Equal(t, AutoDuration(0), g.ReasoningStallTimeout)
	assert.Zero(t, g.TTFTTimeout)
	assert.Equal(t, AutoDuration(0), g.Hedge.Delay, "no TTFT hedge by default")
	assert.Equal(t, 0.95, g.Hedge.Quantile)
	assert.Equal(t, 2*time.Second, g.Hedge.FallbackDelay)
	assert.Equal(t, 20, g.Hedge.MinSamples)
	assert.Equal(t, 2, g.Hedge.MaxAttempts)
	assert.Equal(t, 100.0, g.Hedge.Budget.MaxTokens)
	assert.Equal(t, 0.1, g.Hedge.Budget.TokenRatio)
	assert.Empty(t, g.Hedge.Alternates)
	assert.Equal(t, 10.0, g.AutoStall.Multiple)
	assert.Equal(t, 30*time.Second, g.AutoStall.Floor)
	assert.Equal(t, 10*time.Minute, g.AutoStall.Ceiling, "the OpenAI SDKs' request timeout")
	assert.Empty(t, g.Models)
}

func TestGuardFull(t *testing.T) {
	cfg, err := loadGuardConfig(t, "guard_full")
	require.NoError(t, err)
	g := cfg.Proxy.Get().Guard.Get()
	assert.Equal(t, AutoDuration(time.Minute), g.StallTimeout)
	assert.Equal(t, AutoDuration(5*time.Minute), g.ReasoningStallTimeout)
	assert.Equal(t, 30*time.Second, g.TTFTTimeout)
	assert.Equal(t, AutoDuration(2*time.Second), g.Hedge.Delay)
	assert.Equal(t, 0.9, g.Hedge.Quantile)
	assert.Equal(t, 3*time.Second, g.Hedge.FallbackDelay)
	assert.Equal(t, 50, g.Hedge.MinSamples)
	assert.Equal(t, 3, g.Hedge.MaxAttempts)
	assert.Equal(t, BudgetConfig{MaxTokens: 20, TokenRatio: 0.5}, g.Hedge.Budget)
	require.Len(t, g.Hedge.Alternates, 1)
	assert.Equal(t, "https://backup.example/v1", g.Hedge.Alternates[0].Endpoint)
	assert.Equal(t, 5*time.Second, g.Hedge.Alternates[0].Timeout)
	assert.Equal(t, AutoStallConfig{Multiple: 8, Floor: 45 * time.Second, Ceiling: 10 * time.Minute, MinSamples: 10}, g.AutoStall, "the ceiling left at its default")
	require.Len(t, g.Models, 2)

	o3 := g.Models[0].over(g.rule())
	assert.Equal(t, AutoDuration(0), o3.StallTimeout, "an override may turn a key off")
	assert.True(t, o3.ReasoningStallTimeout.Auto())
	assert.Equal(t, 30*time.Second, o3.TTFTTimeout, "keys the entry does not set are inherited")
	assert.True(t, o3.Delay.Auto())
	assert.True(t, o3.OwnBudget)
	assert.Equal(t, BudgetConfig{MaxTokens: 10, TokenRatio: 0.2}, o3.Budget)
	assert.Len(t, o3.Alternates, 1)

	thinking := g.Models[1].over(g.rule())
	assert.Equal(t, 2*time.Minute, thinking.TTFTTimeout)
	assert.Equal(t, 1, thinking.MaxAttempts)
	assert.Empty(t, thinking.Alternates, "an empty list overrides the alternates")
	assert.False(t, thinking.OwnBudget)
	assert.Equal(t, AutoDuration(time.Minute), thinking.StallTimeout)
}

func TestGuardValidate(t *testing.T) {
	_, err := loadGuardConfig(t, "guard_bad")
	require.Error(t, err)
	for _, msg := range []string{
		"proxy: guard: stall_timeout must not be negative",
		"proxy: guard: ttft_timeout must not be negative",
		"proxy: guard: hedge.quantile 1.5 must be in (0, 1)",
		"proxy: guard: hedge.fallback_delay must be positive",
		"proxy: guard: hedge.min_samples must be positive",
		"proxy: guard: hedge.max_attempts 6 must be between 1 and 5",
		"proxy: guard: hedge.budget.max_tokens 2000 must be between 0 (no budget) and 1000",
		"proxy: guard: hedge.budget.token_ratio 0 must be positive and at most max_tokens",
		"proxy: guard: hedge.alternates[0]: endpoint must be set",
		"proxy: guard: hedge.alternates[1]: endpoint must be an absolute http or https URL",
		"proxy: guard: hedge.alternates[2]: serve_credential_failures needs a credential of the alternate's own",
		"proxy: guard: auto_stall.multiple 0.5 must be a finite number of at least 1",
		"proxy: guard: auto_stall.floor must be positive",
		"proxy: guard: auto_stall.ceiling -1s must be at least auto_stall.floor 0s",
		"proxy: guard: auto_stall.min_samples must be positive",
		"proxy: guard: models[0]: model must be a glob on gen_ai.request.model",
		`proxy: guard: models[1]: model "[o3": syntax error in pattern`,
		"proxy: guard: models[1]: hedge.max_attempts 0 must be between 1 and 5",
	} {
		assert.ErrorContains(t, err, msg)
	}
	assert.ErrorIs(t, err, errGuardNegative)
	assert.ErrorIs(t, err, errEndpointNotAbsURL)
	assert.ErrorIs(t, err, errServeWithoutCredential)

	_, err = loadGuardConfig(t, "guard_bad_duration")
	assert.ErrorContains(t, err, "not auto nor a duration")
}

func TestAutoDuration(t *testing.T) {
	var d AutoDuration
	require.NoError(t, d.UnmarshalText([]byte("auto")))
	assert.True(t, d.Auto())
	assert.Zero(t, d.Duration())
	assert.Equal(t, "auto", d.String())
	require.NoError(t, d.UnmarshalText([]byte("1m30s")))
	assert.False(t, d.Auto())
	assert.Equal(t, 90*time.Second, d.Duration())
	assert.Equal(t, "1m30s", d.String())
	require.Error(t, d.UnmarshalText([]byte("")))
}

// TestExampleProxyGuard: the guard example's receiver section is valid and
// says what its comments say.
func TestExampleProxyGuard(t *testing.T) {
	t.Setenv("BACKUP_OPENAI_KEY", "sk-backup")
	cm, err := confmaptest.LoadConf(filepath.Join("..", "..", "examples", "proxy-guard.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub("receivers::sse_capture")
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig()
	require.NoError(t, sub.Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))
	g := cfg.(*Config).Proxy.Get().Guard.Get()
	assert.True(t, g.Hedge.Delay.Auto())
	require.Len(t, g.Hedge.Alternates, 1)
	require.Len(t, g.Models, 2)
	assert.True(t, g.Models[0].over(g.rule()).ReasoningStallTimeout.Auto())
}

// TestGuardAlternatesKeepConnectionsAlive: every alternate starts from the
// primary upstream's client defaults, keep-alive among them; without them a
// list element is the zero ClientConfig, which sends Connection: close.
func TestGuardAlternatesKeepConnectionsAlive(t *testing.T) {
	cfg, err := loadGuardConfig(t, "guard_credentials")
	require.NoError(t, err)
	g := cfg.Proxy.Get().Guard.Get()
	require.Len(t, g.Hedge.Alternates, 2)
	for i, a := range append(g.Hedge.Alternates, *g.Models[0].Hedge.Alternates...) {
		require.True(t, a.Keepalive.HasValue(), "alternate %d has keep-alive off", i)
		assert.True(t, a.ForceAttemptHTTP2, "alternate %d", i)
		assert.Equal(t, 90*time.Second, a.Keepalive.Get().IdleConnTimeout, "alternate %d", i)
	}
	assert.Equal(t, defaultUpstreamIdleConns, g.Hedge.Alternates[0].Keepalive.Get().MaxIdleConnsPerHost)
	assert.Equal(t, 10, g.Hedge.Alternates[1].Keepalive.Get().MaxIdleConnsPerHost, "the configured keys are laid over")
	assert.Equal(t, "https://my-resource.openai.azure.com/openai", g.Hedge.Alternates[0].Endpoint)
}

// TestGuardAlternateCredentials: the credential keys of an alternate, and
// what counts as a credential of its own.
func TestGuardAlternateCredentials(t *testing.T) {
	cfg, err := loadGuardConfig(t, "guard_credentials")
	require.NoError(t, err)
	g := cfg.Proxy.Get().Guard.Get()
	azure, eu := g.Hedge.Alternates[0], g.Hedge.Alternates[1]
	assert.False(t, azure.ForwardClientCredentials, "client credentials reach the primary only by default")
	assert.False(t, azure.ServeCredentialFailures)
	assert.True(t, azure.ownCredential(), "an api-key header is a credential")
	assert.True(t, eu.ForwardClientCredentials)
	assert.False(t, eu.ownCredential())
	backup := (*g.Models[0].Hedge.Alternates)[0]
	assert.True(t, backup.ownCredential(), "an authenticator is a credential")
	assert.True(t, backup.ServeCredentialFailures)

	var a AlternateConfig
	for _, h := range []string{"Authorization", "x-api-key", "X-Goog-Api-Key", "Cookie", "OpenAI-Organization", "x-portkey-api-key", "cf-aig-authorization"} {
		a.Headers = nil
		a.Headers.Set(h, "v")
		assert.True(t, a.ownCredential(), "header %s", h)
	}
	a.Headers = nil
	a.Headers.Set("X-Fakellm-Script", "{}")
	assert.False(t, a.ownCredential(), "a header that is no credential")
	a.TLS.CertFile = "client.pem"
	a.Endpoint = "http://fallback.internal"
	assert.False(t, a.ownCredential(), "a TLS client certificate an http:// alternate never presents")
	a.Endpoint = "https://fallback.internal"
	assert.True(t, a.ownCredential(), "a TLS client certificate is a credential")
}

// hedgingDocConfig is the sse_capture configuration of the one YAML block
// in a section of docs/hedging.md, loaded and validated.
func hedgingDocConfig(t *testing.T, section string) *Config {
	t.Helper()
	blocks, err := mdcode.File(filepath.Join("..", "..", "docs", "hedging.md"))
	require.NoError(t, err)
	var yamls []mdcode.Block
	for _, b := range mdcode.In(blocks, section) {
		if b.Info == "yaml" {
			yamls = append(yamls, b)
		}
	}
	require.Len(t, yamls, 1)
	r, err := confmap.NewRetrievedFromYAML([]byte(yamls[0].Text))
	require.NoError(t, err)
	cm, err := r.AsConf()
	require.NoError(t, err)
	sub, err := cm.Sub("receivers::sse_capture")
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig()
	require.NoError(t, sub.Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))
	return cfg.(*Config)
}

// TestDocsHedgingGuardExample: the guard configuration of docs/hedging.md
// is valid and its alternate, another provider, has a credential of its
// own and gets none of the client's: what the worked example says of it.
func TestDocsHedgingGuardExample(t *testing.T) {
	p := hedgingDocConfig(t, "Guarding streams").Proxy.Get()
	g := p.Guard.Get()
	assert.Equal(t, AutoDuration(time.Minute), g.StallTimeout)
	assert.Equal(t, AutoDuration(2*time.Second), g.Hedge.Delay)
	assert.Equal(t, 30*time.Second, p.Upstream.Timeout)
	require.Len(t, g.Hedge.Alternates, 1)
	azure := g.Hedge.Alternates[0]
	primary, err := parseUpstream(p.Upstream.Endpoint)
	require.NoError(t, err)
	alt, err := parseEndpoint(azure.Endpoint)
	require.NoError(t, err)
	assert.NotEqual(t, primary.Host, alt.Host, "another provider")
	assert.True(t, azure.ownCredential(), "the alternate has the operator's key")
	assert.False(t, azure.ForwardClientCredentials, "the clients' keys reach the primary only")
	assert.False(t, azure.ServeCredentialFailures, "a spent client key is not served on the operator's")
	assert.True(t, azure.Keepalive.HasValue())
	require.Len(t, g.Models, 1)
}

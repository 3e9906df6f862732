// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgeadvisorexporter

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/bearertokenauthextension"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/extension"

	"github.com/streamstall/streamstall/exporter/hedgeadvisorexporter/internal/metadata"
)

// hostWithExtensions offers extensions, as the collector's service does.
type hostWithExtensions struct {
	component.Host
	extensions map[component.ID]component.Component
}

func (h hostWithExtensions) GetExtensions() map[component.ID]component.Component { return h.extensions }

func freeEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

// startGuarded starts the exporter of cfg on a free loopback port behind
// the contrib bearertokenauth extension (token "advisor-token") and returns
// the endpoint.
func startGuarded(t *testing.T, cfg *Config) string {
	t.Helper()
	factory := bearertokenauthextension.NewFactory()
	extCfg := factory.CreateDefaultConfig().(*bearertokenauthextension.Config)
	extCfg.BearerToken = configopaque.String("advisor-token")
	id := component.NewID(factory.Type())
	ext, err := factory.Create(context.Background(), extension.Settings{
		ID: id, TelemetrySettings: componenttest.NewNopTelemetrySettings(), BuildInfo: component.NewDefaultBuildInfo(),
	}, extCfg)
	require.NoError(t, err)
	host := hostWithExtensions{Host: componenttest.NewNopHost(), extensions: map[component.ID]component.Component{id: ext}}
	require.NoError(t, ext.Start(context.Background(), host))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })

	endpoint := freeEndpoint(t)
	cfg.ServerConfig.NetAddr.Endpoint = endpoint
	cfg.ServerConfig.Auth = configoptional.Some(confighttp.AuthConfig{Config: configauth.Config{AuthenticatorID: id}})
	exp, err := NewFactory().CreateTraces(context.Background(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), host))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })
	return endpoint
}

// TestBearerTokenAuthGuardsTheAdvice: the listener takes the standard
// confighttp auth setting; the contrib bearertokenauth extension guards it.
func TestBearerTokenAuthGuardsTheAdvice(t *testing.T) {
	endpoint := startGuarded(t, testConfig())

	get := func(token string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+endpoint+AdvicePath, http.NoBody)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, get(""))
	assert.Equal(t, http.StatusUnauthorized, get("wrong"))
	assert.Equal(t, http.StatusOK, get("advisor-token"))
}

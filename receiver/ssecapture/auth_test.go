// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/bearertokenauthextension"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension"

	"github.com/streamstall/streamstall/internal/testbed/fakellm"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/ingest"
)

// hostWithExtensions is a component host that offers extensions, as the
// collector's service does.
type hostWithExtensions struct {
	component.Host
	extensions map[component.ID]component.Component
}

func (h hostWithExtensions) GetExtensions() map[component.ID]component.Component { return h.extensions }

// startBearerAuth starts the contrib bearertokenauth extension expecting
// token in header.
func startBearerAuth(t *testing.T, header, token string) (component.ID, component.Host) {
	t.Helper()
	factory := bearertokenauthextension.NewFactory()
	cfg := factory.CreateDefaultConfig().(*bearertokenauthextension.Config)
	cfg.Header = header
	cfg.BearerToken = configopaque.String(token)
	id := component.NewID(factory.Type())
	ext, err := factory.Create(context.Background(), extension.Settings{
		ID: id, TelemetrySettings: componenttest.NewNopTelemetrySettings(), BuildInfo: component.NewDefaultBuildInfo(),
	}, cfg)
	require.NoError(t, err)
	host := hostWithExtensions{Host: componenttest.NewNopHost(), extensions: map[component.ID]component.Component{id: ext}}
	require.NoError(t, ext.Start(context.Background(), host))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	return id, host
}

func authConfig(id component.ID) configoptional.Optional[confighttp.AuthConfig] {
	return configoptional.Some(confighttp.AuthConfig{Config: configauth.Config{AuthenticatorID: id}})
}

// authedProxy returns a config whose proxy, in front of a fakellm that logs
// what it gets, is guarded by a bearertokenauth extension (its ID and the
// host that holds it) reading token from header.
func authedProxy(t *testing.T, header, token string) (*Config, component.ID, component.Host, *upstreamLog) {
	t.Helper()
	id, host := startBearerAuth(t, header, token)
	fake, err := fakellm.New(fakellm.Config{TimeFactor: fastFactor, Chunks: 4})
	require.NoError(t, err)
	log := &upstreamLog{next: fake}
	upstream := httptest.NewServer(log)
	t.Cleanup(upstream.Close)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	p := cfg.Proxy.GetOrInsertDefault()
	p.NetAddr.Endpoint = "127.0.0.1:0"
	p.Upstream.Endpoint = upstream.URL
	p.Auth = authConfig(id)
	return cfg, id, host, log
}

// TestBearerTokenAuthGuardsListeners: the contrib bearertokenauth extension
// guards either listener through the standard confighttp auth setting.
func TestBearerTokenAuthGuardsListeners(t *testing.T) {
	// The proxy's Authorization header carries the provider's key, so the
	// collector's own token travels in a header of its own.
	cfg, id, host, log := authedProxy(t, "X-Collector-Token", "collector-token")
	p := cfg.Proxy.Get()
	p.AuthHeader = "x-collector-token" // any case: header names are case-insensitive
	require.NoError(t, cfg.Validate())
	i := cfg.Ingest.GetOrInsertDefault()
	i.NetAddr.Endpoint = "127.0.0.1:0"
	i.Auth = authConfig(id)
	sink := new(consumertest.TracesSink)
	rcv := startReceiver(t, cfg, sink, host, nil)
	proxyURL := "http://" + rcv.addrs["proxy"].String() + shapes[0].path
	ingestURL := "http://" + rcv.addrs["ingest"].String() + ingest.Path
	record := fmt.Sprintf(`{"name":"chat x","start_time_unix_nano":%d,"chunk_offsets_ms":[1,2]}`, time.Now().UnixNano())
	client := testClient(t)

	for _, tc := range []struct {
		name, url, body string
		header          http.Header
		want            int
	}{
		{"proxy without token", proxyURL, shapes[0].body, nil, http.StatusUnauthorized},
		{"proxy with a wrong token", proxyURL, shapes[0].body, http.Header{"X-Collector-Token": {"Bearer nope"}}, http.StatusUnauthorized},
		{"proxy with the token", proxyURL, shapes[0].body, http.Header{
			"X-Collector-Token": {"Bearer collector-token"},
			"Authorization":     {"Bearer sk-provider-key"},
			"X-Api-Key":         {"sk-ant-provider-key"},
		}, http.StatusOK},
		{"ingest without token", ingestURL, record, nil, http.StatusUnauthorized},
		{"ingest with the token", ingestURL, record, http.Header{"X-Collector-Token": {"Bearer collector-token"}}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, client, tc.url, tc.body, tc.header)
			assert.Equal(t, tc.want, resp.StatusCode, string(body))
		})
	}
	assert.Equal(t, 1, log.count(), "only the authenticated proxy request reached the upstream")
	seen, _ := log.last(t)
	assert.Empty(t, seen.Values("X-Collector-Token"), "the collector's token never reaches the upstream")
	for k, vs := range seen {
		for _, v := range vs {
			assert.NotContains(t, v, "collector-token", "header %s", k)
		}
	}
	assert.Equal(t, "Bearer sk-provider-key", seen.Get("Authorization"), "the client's provider key goes upstream unchanged")
	assert.Equal(t, "sk-ant-provider-key", seen.Get("X-Api-Key"))
	require.Eventually(t, func() bool { return sink.SpanCount() == 2 }, 5*time.Second, 5*time.Millisecond,
		"one proxy span and one ingested span")
}

// TestProxyAuthHeaderIsCentral: when the authenticator reads Authorization
// itself, Authorization is not forwarded; the provider key can then come
// from the upstream client's own headers.
func TestProxyAuthHeaderIsCentral(t *testing.T) {
	id, host := startBearerAuth(t, "Authorization", "collector-token")
	fake, err := fakellm.New(fakellm.Config{TimeFactor: fastFactor, Chunks: 4})
	require.NoError(t, err)
	log := &upstreamLog{next: fake}
	upstream := httptest.NewServer(log)
	t.Cleanup(upstream.Close)

	cfg := NewFactory().CreateDefaultConfig().(*Config)
	p := cfg.Proxy.GetOrInsertDefault()
	p.NetAddr.Endpoint = "127.0.0.1:0"
	p.Upstream.Endpoint = upstream.URL
	p.Upstream.Headers = configopaque.MapList{{Name: "X-Api-Key", Value: "sk-central-key"}}
	p.Auth = authConfig(id)
	p.AuthHeader = "Authorization"
	require.NoError(t, cfg.Validate())
	rcv := startReceiver(t, cfg, new(consumertest.TracesSink), host, nil)
	resp, body := post(t, testClient(t), "http://"+rcv.addrs["proxy"].String()+shapes[3].path, shapes[3].body,
		http.Header{"Authorization": {"Bearer collector-token"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	seen, _ := log.last(t)
	assert.Empty(t, seen.Values("Authorization"))
	assert.Equal(t, "sk-central-key", seen.Get("X-Api-Key"))
}

func TestConfigAuthHeader(t *testing.T) {
	id := component.MustNewID("bearertokenauth")
	base := func() *Config {
		cfg := NewFactory().CreateDefaultConfig().(*Config)
		cfg.Proxy.GetOrInsertDefault().Upstream.Endpoint = "http://127.0.0.1:1"
		return cfg
	}
	cfg := base()
	cfg.Proxy.Get().Auth = authConfig(id)
	require.ErrorIs(t, cfg.Validate(), errAuthHeaderRequired, "auth without auth_header would forward the collector's credential")

	cfg = base()
	cfg.Proxy.Get().AuthHeader = "X-Collector-Token"
	require.ErrorIs(t, cfg.Validate(), errAuthHeaderWithoutAuth)

	cfg = base()
	cfg.Proxy.Get().Auth = authConfig(id)
	cfg.Proxy.Get().AuthHeader = "X-Collector Token"
	require.ErrorIs(t, cfg.Validate(), errAuthHeaderInvalid)

	cfg = base()
	cfg.Proxy.Get().Auth = authConfig(id)
	cfg.Proxy.Get().AuthHeader = "X-Collector-Token"
	require.NoError(t, cfg.Validate())
}

// TestProxyRemovesTheAuthRequestParams: confighttp's auth.request_params
// hands the listener's authenticator a query parameter (and copies it into
// the request's header map under the parameter's own spelling). The
// collector's token, read there, never reaches the provider, as auth_header
// promises for the header it names: neither in the query string nor as a
// header; the rest of the query goes on byte for byte.
func TestProxyRemovesTheAuthRequestParams(t *testing.T) {
	const token = "collector-token-7f3a"
	for _, tc := range []struct{ name, param string }{
		{"canonical name", "X-Collector-Token"},
		{"lower-case name", "collector_token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, id, host, log := authedProxy(t, tc.param, token)
			p := cfg.Proxy.Get()
			p.Auth = configoptional.Some(confighttp.AuthConfig{
				Config:            configauth.Config{AuthenticatorID: id},
				RequestParameters: []string{tc.param},
			})
			p.AuthHeader = tc.param
			require.NoError(t, cfg.Validate())
			rcv := startReceiver(t, cfg, new(consumertest.TracesSink), host, nil)

			target := "http://" + rcv.addrs["proxy"].String() + shapes[0].path + "?keep=a%2Fb&" + url.QueryEscape(tc.param) + "=" + url.QueryEscape("Bearer "+token) + "&also=1"
			resp, body := post(t, testClient(t), target, shapes[0].body, http.Header{"Authorization": {"Bearer sk-provider"}})
			require.Equal(t, http.StatusOK, resp.StatusCode, string(body))

			log.mu.Lock()
			defer log.mu.Unlock()
			require.Len(t, log.uris, 1)
			assert.NotContains(t, log.uris[0], "collector-token", "the collector's token reached the upstream in the query: %s", log.uris[0])
			for k, vs := range log.headers[0] {
				for _, v := range vs {
					assert.NotContains(t, v, token, "the collector's token reached the upstream in header %q", k)
				}
			}
			assert.Equal(t, shapes[0].path+"?keep=a%2Fb&also=1", log.uris[0], "the rest of the query goes on as it was sent")
		})
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

func sreGuardedConfig(t *testing.T) (*Config, *ProxyConfig, *GuardConfig) {
	t.Helper()
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	p := cfg.Proxy.GetOrInsertDefault()
	p.Upstream.Endpoint = "https://api.openai.com"
	g := p.Guard.GetOrInsertDefault()
	g.TTFTTimeout = 10 * time.Second
	g.Hedge.Delay = AutoDuration(2 * time.Second)
	require.NoError(t, cfg.Validate(), "the base configuration is valid")
	return cfg, p, g
}

func sreAlternate(endpoint string) AlternateConfig {
	a := AlternateConfig{ClientConfig: defaultUpstreamClientConfig()}
	a.Endpoint = endpoint
	return a
}

// TestConfigContradictionsAreRefused: each configuration below cannot do
// what it says (a setting accepted and never applied, an entry that could
// never match, a budget that could never allow a hedge or never refill), and
// Validate refuses it at startup with an error naming the key.
func TestConfigContradictionsAreRefused(t *testing.T) {
	cases := map[string]struct {
		key  string
		edit func(*ProxyConfig, *GuardConfig)
	}{
		// "the first match wins": the second entry for the same glob can
		// never match, its keys are silently ignored.
		"duplicate model globs": {"models[1]", func(_ *ProxyConfig, g *GuardConfig) {
			ttft := 30 * time.Second
			g.Models = []ModelGuardConfig{{Model: "o3*"}, {Model: "o3*", TTFTTimeout: &ttft}}
		}},
		// max_tokens 0.0004 is held as 0 thousandths: take() needs tokens
		// above max/2 = 0, so no hedge or failover is ever allowed.
		"budget that can never allow a hedge": {"hedge.budget.max_tokens", func(_ *ProxyConfig, g *GuardConfig) {
			g.Hedge.Budget = BudgetConfig{MaxTokens: 0.0004, TokenRatio: 0.0004}
		}},
		// token_ratio 0.0004 rounds to 0 thousandths: successes never
		// refill the bucket, so once half of it is spent hedging is off
		// until the collector restarts.
		"budget that never refills": {"hedge.budget.token_ratio", func(_ *ProxyConfig, g *GuardConfig) {
			g.Hedge.Budget = BudgetConfig{MaxTokens: 100, TokenRatio: 0.0004}
		}},
		// TLS settings on an http:// upstream are silently ignored: the
		// operator believes the upstream is verified against ca_file and
		// receives their client certificate.
		"tls on an http upstream": {"upstream.tls", func(p *ProxyConfig, _ *GuardConfig) {
			p.Upstream.Endpoint = "http://llm.internal:8080"
			p.Upstream.TLS.CAFile = "/etc/ssl/internal-ca.pem"
			p.Upstream.TLS.CertFile = "/etc/ssl/client.pem"
			p.Upstream.TLS.KeyFile = "/etc/ssl/client.key"
		}},
		// ownCredential() counts a TLS client certificate, which an
		// http:// alternate never presents: serve_credential_failures is
		// accepted for an alternate with no credential at all.
		"serve_credential_failures with a client cert on http": {"hedge.alternates[0]", func(_ *ProxyConfig, g *GuardConfig) {
			a := sreAlternate("http://fallback.internal:8080")
			a.TLS.CertFile, a.TLS.KeyFile = "/etc/ssl/client.pem", "/etc/ssl/client.key"
			a.ServeCredentialFailures = true
			g.Hedge.Alternates = []AlternateConfig{a}
		}},
		// A negative upstream.timeout is accepted (every other duration is
		// checked for sign).
		"negative upstream.timeout": {"upstream.timeout", func(p *ProxyConfig, _ *GuardConfig) {
			p.Upstream.Timeout = -time.Second
		}},
		"negative alternate timeout": {"hedge.alternates[0]", func(_ *ProxyConfig, g *GuardConfig) {
			a := sreAlternate("https://fallback.example")
			a.Timeout = -time.Second
			g.Hedge.Alternates = []AlternateConfig{a}
		}},
		// The proxy uses only the upstream client's Transport
		// (receiver.go newProxy), so the client's cookie jar is never
		// used: upstream.cookies is accepted and silently ignored.
		"upstream.cookies": {"upstream.cookies", func(p *ProxyConfig, _ *GuardConfig) {
			p.Upstream.Cookies = configoptional.Some(confighttp.CookiesConfig{})
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, p, g := sreGuardedConfig(t)
			tc.edit(p, g)
			err := cfg.Validate()
			require.Error(t, err, "Validate accepted a contradictory configuration")
			assert.Contains(t, err.Error(), tc.key)
		})
	}
}

func selfSignedCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	return certFile, keyFile
}

// TestUpstreamFailuresAreCounted: the upstream down (502
// upstream_unreachable) and slow to its headers (504 upstream_timeout) are
// the commonest pages: each call counts in
// otelcol_receiver_sse_capture_upstream.failures by its reason, apart from
// its span, which a full queue may drop.
func TestUpstreamFailuresAreCounted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	slow := newTestServer(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}))
	for _, tc := range []struct {
		errType string
		status  int
		edit    func(*ProxyConfig)
	}{
		{"upstream_unreachable", http.StatusBadGateway, func(p *ProxyConfig) { p.Upstream.Endpoint = closed }},
		{"upstream_timeout", http.StatusGatewayTimeout, func(p *ProxyConfig) { p.Upstream.Endpoint, p.Upstream.Timeout = slow, 200*time.Millisecond }},
	} {
		t.Run(tc.errType, func(t *testing.T) {
			f := newFixture(t, nil, withProxy(tc.edit))
			resp, _ := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, nil)
			require.Equal(t, tc.status, resp.StatusCode)
			require.Equal(t, tc.errType, attr(t, f.spans(t, 1)[0], semconv.AttrErrorType).Str())
			m, err := f.tel.GetMetric("otelcol_receiver_sse_capture_upstream.failures")
			require.NoError(t, err, "the failure is counted")
			got := map[string]int64{}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				reason, _ := dp.Attributes.Value("reason")
				got[reason.AsString()] += dp.Value
			}
			assert.Equal(t, map[string]int64{tc.errType: 1}, got)
		})
	}
}

// TestMaxRequestBodySizeBelowTheListenersBound: the listeners squash
// confighttp's server settings, so max_request_body_size, the key every
// collector operator knows, is accepted; the listener raises it to its own
// max_request_body (its JSON 413), so a lower one would not apply: Validate
// refuses it and names the key to set.
func TestMaxRequestBodySizeBelowTheListenersBound(t *testing.T) {
	cfg, p, _ := sreGuardedConfig(t)
	p.MaxRequestBodySize = 1024
	err := cfg.Validate()
	require.Error(t, err, "a max_request_body_size the listener would not apply")
	assert.Contains(t, err.Error(), "max_request_body_size 1024 is below max_request_body")
	p.MaxRequestBodySize = 64 << 20
	require.NoError(t, cfg.Validate(), "one above max_request_body is harmless: the listener's own bound comes first")
}

// TestShutdownAnswersAWaitingRequest503: a request still waiting for the
// upstream's headers when shutdown_timeout runs out gets the documented 503
// with a JSON error, guard or not: the handlers get a moment to write it
// before the connections close.
func TestShutdownAnswersAWaitingRequest503(t *testing.T) {
	release := make(chan struct{})
	upstream := newTestServer(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release) })
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	p := cfg.Proxy.GetOrInsertDefault()
	p.NetAddr.Endpoint = "127.0.0.1:0"
	p.Upstream.Endpoint = upstream
	p.ShutdownTimeout = 100 * time.Millisecond
	require.NoError(t, cfg.Validate())
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	sink := new(consumertest.TracesSink)
	r, err := NewFactory().CreateTraces(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	rcv := r.(*sseCaptureReceiver)
	require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))
	type result struct {
		status int
		body   string
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+rcv.addrs["proxy"].String()+shapes[0].path, strings.NewReader(shapes[0].body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err != nil {
			done <- result{0, err.Error()}
			return
		}
		defer func() { _ = resp.Body.Close() }()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		done <- result{resp.StatusCode, b.String()}
	}()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, rcv.Shutdown(context.Background()))
	got := <-done
	assert.Equal(t, map[string]int64{"shutdown": 1}, cutsByReasonOrEmpty(t, tel), "the cut is counted")
	assert.Equal(t, http.StatusServiceUnavailable, got.status, "the client gets the documented 503, got %q", got.body)
	assert.Contains(t, got.body, `"shutdown"`)
}

func cutsByReasonOrEmpty(t *testing.T, tel *componenttest.Telemetry) map[string]int64 {
	if _, err := tel.GetMetric("otelcol_receiver_sse_capture_streams.cut"); err != nil {
		return map[string]int64{}
	}
	return cutsByReason(t, tel)
}

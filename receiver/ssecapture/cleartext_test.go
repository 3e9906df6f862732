// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

const clearSecret = "s3cr3t-in-the-clear"

// TestUpstreamCredentialsInTheEndpointAreRefused: an upstream or alternate
// endpoint with credentials in it (https://user:password@host) is refused
// with an error that says where to put them, and no configuration error
// quotes the endpoint: url.Parse's does, password and all. The proxy never
// sent them (ReverseProxy's SetURL keeps the scheme, host and path), so
// such a configuration failed every call with the provider's 401.
func TestUpstreamCredentialsInTheEndpointAreRefused(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		want     error
	}{
		{"https://user:" + clearSecret + "@api.openai.com", errUpstreamHasUserinfo},
		{"https://" + clearSecret + "@api.openai.com/openai", errUpstreamHasUserinfo},
		{"https://user:" + clearSecret + "@api.openai.com:4x3", nil}, // does not parse
		{"https://user:" + clearSecret + "@[::1", nil},
	} {
		t.Run(tc.endpoint, func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			cfg.Proxy.GetOrInsertDefault().Upstream.Endpoint = tc.endpoint
			err := cfg.Validate()
			require.Error(t, err)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
			assert.NotContains(t, err.Error(), clearSecret)

			cfg = NewFactory().CreateDefaultConfig().(*Config)
			p := cfg.Proxy.GetOrInsertDefault()
			p.Upstream.Endpoint = "https://api.openai.com"
			alt := confighttp.NewDefaultClientConfig()
			alt.Endpoint = tc.endpoint
			p.Guard.GetOrInsertDefault().Hedge.Alternates = []AlternateConfig{{ClientConfig: alt}}
			err = cfg.Validate()
			require.Error(t, err)
			if tc.want != nil {
				require.ErrorIs(t, err, errEndpointHasUserinfo)
			}
			assert.NotContains(t, err.Error(), clearSecret)
		})
	}
}

// TestProxyRecordsNoQueryCredential: a key in the query string (Gemini's
// ?key=) and in a header reaches the upstream, and no span attribute nor
// log line (at debug level) carries it, for a call that succeeds and for
// one whose upstream cannot be reached.
func TestProxyRecordsNoQueryCredential(t *testing.T) {
	seen := make(chan string, 1)
	upstream := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.URL.Query().Get("key") + " " + r.Header.Get("X-Goog-Api-Key")
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(`data: {"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"STOP"}]}` + "\n\n"))
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	unreachable := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	for name, endpoint := range map[string]string{"served": upstream, "unreachable": unreachable} {
		t.Run(name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			p := cfg.Proxy.GetOrInsertDefault()
			p.NetAddr.Endpoint = "127.0.0.1:0"
			p.Upstream.Endpoint = endpoint
			require.NoError(t, cfg.Validate())
			set := receivertest.NewNopSettings(metadata.Type)
			set.Logger = zap.New(core)
			sink := new(consumertest.TracesSink)
			r, err := NewFactory().CreateTraces(context.Background(), set, cfg, sink)
			require.NoError(t, err)
			require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
			rcv := r.(*sseCaptureReceiver)
			target := "http://" + rcv.addrs["proxy"].String() + "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=" + url.QueryEscape(clearSecret)
			resp, _ := post(t, testClient(t), target, `{"contents":[{"parts":[{"text":"secret prompt text"}]}]}`,
				http.Header{"X-Goog-Api-Key": {clearSecret}})
			if name == "served" {
				require.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Equal(t, clearSecret+" "+clearSecret, <-seen, "the key reached the upstream")
			} else {
				require.Equal(t, http.StatusBadGateway, resp.StatusCode)
			}
			span := (&fixture{sink: sink}).spans(t, 1)[0]
			assertNoSecrets(t, span, "", clearSecret, "secret prompt text")
			require.NoError(t, r.Shutdown(context.Background()))
			require.NotZero(t, logs.Len())
			for _, e := range logs.All() {
				line := e.Message
				for k, v := range e.ContextMap() {
					line += fmt.Sprintf(" %s=%v", k, v)
				}
				assert.NotContains(t, line, clearSecret, "a log line carries the key")
			}
		})
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

// TestListenersLogNoPeerFailureAboveDebug: with tls on either listener, a
// peer that opens a TCP connection and closes it, sends bytes that are no
// TLS record, or speaks plain HTTP (a port scan, an L4 load balancer's TCP
// health check, a misconfigured client) makes net/http write "http: TLS
// handshake error from ..." to the server's ErrorLog: one line per
// connection, before any authenticator. At confighttp's error level that is
// a log flood anyone who can open a connection triggers, filling the disk
// and paging on "error" logs; the listeners log it at debug, as the proxy's
// own ErrorLog does.
func TestListenersLogNoPeerFailureAboveDebug(t *testing.T) {
	certFile, keyFile := selfSignedCert(t)
	tls := configoptional.Some(configtls.ServerConfig{Config: configtls.Config{CertFile: certFile, KeyFile: keyFile}})
	for _, listener := range []string{"ingest", "proxy"} {
		t.Run(listener, func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			if listener == "ingest" {
				i := cfg.Ingest.GetOrInsertDefault()
				i.NetAddr.Endpoint, i.TLS = "127.0.0.1:0", tls
			} else {
				p := cfg.Proxy.GetOrInsertDefault()
				p.NetAddr.Endpoint, p.TLS = "127.0.0.1:0", tls
				p.Upstream.Endpoint = newTestServer(t, http.NotFoundHandler())
			}
			require.NoError(t, cfg.Validate())
			core, logs := observer.New(zapcore.InfoLevel)
			set := receivertest.NewNopSettings(metadata.Type)
			set.Logger = zap.New(core)
			r, err := NewFactory().CreateTraces(context.Background(), set, cfg, new(consumertest.TracesSink))
			require.NoError(t, err)
			require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
			t.Cleanup(func() { require.NoError(t, r.Shutdown(context.Background())) })
			addr := r.(*sseCaptureReceiver).addrs[listener].String()

			before := logs.Len() // "Starting ... server"
			probes := [][]byte{nil, {0, 1, 2, 3, 4, 5, 6, 7}, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")}
			const conns = 21
			for n := range conns {
				c, err := net.Dial("tcp", addr)
				require.NoError(t, err)
				if probe := probes[n%len(probes)]; probe != nil {
					_, _ = c.Write(probe)
					_ = c.SetReadDeadline(time.Now().Add(time.Second))
					_, _ = c.Read(make([]byte, 512))
				}
				_ = c.Close()
			}
			time.Sleep(200 * time.Millisecond)
			var lines []string
			for _, e := range logs.All()[before:] {
				lines = append(lines, e.Level.String()+": "+e.Message)
			}
			assert.Empty(t, lines, "%d connections logged %d lines at info or above", conns, len(lines))
		})
	}
}

// TestProxyHedgeBaggageDelayIsADouble: a client's baggage llm.hedge.delay_ms
// is recorded as the double of milliseconds docs/contract.md section 5
// types it as, and a value that is no finite, non-negative number is
// dropped, as a non-integer llm.hedge.attempt is.
func TestProxyHedgeBaggageDelayIsADouble(t *testing.T) {
	f := newFixture(t, nil)
	resp, _ := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, http.Header{
		"Baggage": {"llm.hedge.delay_ms=soon,llm.hedge.attempt=1"},
	})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	span := f.spans(t, 1)[0]
	if v, ok := span.Attributes().Get(semconv.AttrHedgeDelayMs); ok {
		assert.Equal(t, pcommon.ValueTypeDouble, v.Type(), "llm.hedge.delay_ms is %s %q", v.Type(), v.AsString())
	}
}

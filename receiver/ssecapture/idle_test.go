// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer/consumertest"
)

// TestDefaultIdleTimeout: a proxy configured in YAML closes a keep-alive
// connection idle between requests after keepalive.idle_timeout, 1 minute
// by default (confighttp's), also when read_timeout is 0.
func TestDefaultIdleTimeout(t *testing.T) {
	for name, proxy := range map[string]map[string]any{
		"defaults":       {},
		"no readtimeout": {"read_timeout": "0s"},
	} {
		t.Run(name, func(t *testing.T) {
			proxy["endpoint"] = "127.0.0.1:0"
			proxy["upstream"] = map[string]any{"endpoint": "http://127.0.0.1:1"}
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			require.NoError(t, confmap.NewFromStringMap(map[string]any{"proxy": proxy}).Unmarshal(cfg))
			require.NoError(t, cfg.Validate())
			rcv := startReceiver(t, cfg, new(consumertest.TracesSink), componenttest.NewNopHost(), nil)
			assert.Equal(t, time.Minute, rcv.proxySrv.IdleTimeout)
		})
	}
}

// TestProxyClosesIdleConnections: a connection that sends nothing is
// closed at read_header_timeout, and a keep-alive connection idle after a
// request at keepalive.idle_timeout, so that neither holds the proxy's
// buffers and goroutine for as long as the client likes.
func TestProxyClosesIdleConnections(t *testing.T) {
	const readHeader, idle = 300 * time.Millisecond, 600 * time.Millisecond
	up := newRawUpstream(t, rawStep{data: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"})
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"proxy": map[string]any{
		"endpoint":            "127.0.0.1:0",
		"read_header_timeout": readHeader.String(),
		"keepalive":           map[string]any{"idle_timeout": idle.String()},
		"upstream":            map[string]any{"endpoint": up.URL},
	}}).Unmarshal(cfg))
	require.NoError(t, cfg.Validate())
	rcv := startReceiver(t, cfg, new(consumertest.TracesSink), componenttest.NewNopHost(), nil)
	addr := rcv.addrs["proxy"].String()

	silent, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer func() { _ = silent.Close() }()
	start := time.Now()
	require.NoError(t, silent.SetReadDeadline(time.Now().Add(testTimeout)))
	_, err = io.Copy(io.Discard, silent)
	require.NoError(t, err, "the server closed the silent connection")
	assert.GreaterOrEqual(t, time.Since(start), readHeader-50*time.Millisecond)

	kept, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer func() { _ = kept.Close() }()
	require.NoError(t, kept.SetDeadline(time.Now().Add(testTimeout)))
	_, err = io.WriteString(kept, "GET /v1/models HTTP/1.1\r\nHost: proxy\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(kept)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	start = time.Now()
	_, err = io.Copy(io.Discard, br)
	require.NoError(t, err, "the server closed the idle keep-alive connection")
	assert.GreaterOrEqual(t, time.Since(start), idle-50*time.Millisecond)
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/streamstall/streamstall/internal/testbed/fakellm"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/ingest"
)

// TestDefaultReadTimeouts: both listeners bound the reading of a request
// by default.
func TestDefaultReadTimeouts(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	p, i := cfg.Proxy.GetOrInsertDefault(), cfg.Ingest.GetOrInsertDefault()
	for _, sc := range []*time.Duration{&p.ReadTimeout, &i.ReadTimeout} {
		assert.Equal(t, defaultReadTimeout, *sc)
	}
	assert.Equal(t, defaultReadHeaderTimeout, p.ReadHeaderTimeout)
	assert.Equal(t, defaultReadHeaderTimeout, i.ReadHeaderTimeout)
	assert.Positive(t, defaultReadTimeout)
}

// TestProxyReadTimeoutSparesLongStreams: read_timeout bounds the request,
// not the streamed response: a stream lasting several times read_timeout
// reaches the client whole.
func TestProxyReadTimeoutSparesLongStreams(t *testing.T) {
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.ReadTimeout = 200 * time.Millisecond }))
	resp, body := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body,
		scriptHeader(t, fakellm.Script{TTFTMillis: 5, GapsMillis: []float64{500, 500, 500}}))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, sentWhole(t, f.fake), body)
	assert.True(t, f.waitRequest(t, 0).Completed)
	assert.Len(t, chunkTimes(f.spans(t, 1)[0]), 4)
}

// slowBody sends a request whose body trickles in at one byte per 300 ms
// and reports how long the server kept the connection open.
func slowBody(t *testing.T, addr, path string) time.Duration {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	start := time.Now()
	_, err = io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
	require.NoError(t, err)
	go func() {
		for range 1000 {
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
			time.Sleep(300 * time.Millisecond)
		}
	}()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, _ = io.Copy(io.Discard, conn) // until the server closes
	return time.Since(start)
}

// TestReadTimeoutCutsSlowBodies: a request body sent a byte at a time is
// cut at read_timeout, on both listeners.
func TestReadTimeoutCutsSlowBodies(t *testing.T) {
	const rt = 500 * time.Millisecond
	t.Run("proxy", func(t *testing.T) {
		f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.ReadTimeout = rt }))
		addr := strings.TrimPrefix(f.proxyURL, "http://")
		took := slowBody(t, addr, shapes[0].path)
		assert.GreaterOrEqual(t, took, rt-50*time.Millisecond, "the server starts its clock as it reads, a little before the client does")
		assert.Less(t, took, 5*time.Second)
		assert.Empty(t, f.fake.Requests(), "nothing forwarded")
	})
	t.Run("ingest", func(t *testing.T) {
		sink := new(consumertest.TracesSink)
		base := startIngest(t, sink, func(i *IngestConfig) { i.ReadTimeout = rt })
		took := slowBody(t, strings.TrimPrefix(base, "http://"), ingest.Path)
		assert.GreaterOrEqual(t, took, rt-50*time.Millisecond, "the server starts its clock as it reads, a little before the client does")
		assert.Less(t, took, 5*time.Second)
		assert.Zero(t, sink.SpanCount())
	})
}

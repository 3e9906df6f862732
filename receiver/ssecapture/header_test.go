// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/streamstall/streamstall/internal/testbed/fakellm"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/ingest"
)

// manyHeaders returns n header lines of about 16 bytes each.
func manyHeaders(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "X-H-%d: v\r\n", i)
	}
	return b.String()
}

// rawPost is a POST of body to path with the given header lines.
func rawPost(addr, path, headers, body string) []byte {
	return fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s",
		path, addr, len(body), headers, body)
}

// headerRequest sends a request to addr, writing while it reads (the
// server may answer, and close, before it has read everything), and
// returns the status.
func headerRequest(t *testing.T, addr string, request []byte) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, testTimeout)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	require.NoError(t, conn.SetDeadline(time.Now().Add(testTimeout)))
	written := make(chan struct{})
	go func() {
		defer close(written)
		// A write error is the server hanging up on a refused request.
		_, _ = conn.Write(request)
	}()
	defer func() { <-written }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestMaxRequestHeaderBytes: both listeners answer 431 to a request whose
// headers pass max_request_header_bytes (64 KiB by default) before any
// handler or authenticator runs, having read no more than the limit; a
// request of a few thousand headers under it is served.
func TestMaxRequestHeaderBytes(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	assert.Equal(t, 64<<10, cfg.Proxy.GetOrInsertDefault().MaxRequestHeaderBytes)
	assert.Equal(t, 64<<10, cfg.Ingest.GetOrInsertDefault().MaxRequestHeaderBytes)

	id, host := startBearerAuth(t, "X-Collector-Token", "collector-token")
	fake, err := fakellm.New(fakellm.Config{TimeFactor: fastFactor, Chunks: 4})
	require.NoError(t, err)
	log := &upstreamLog{next: fake}
	upstream := httptest.NewServer(log)
	t.Cleanup(upstream.Close)
	p := cfg.Proxy.Get()
	p.NetAddr.Endpoint = "127.0.0.1:0"
	p.Upstream.Endpoint = upstream.URL
	p.Auth = authConfig(id)
	p.AuthHeader = "X-Collector-Token"
	i := cfg.Ingest.Get()
	i.NetAddr.Endpoint = "127.0.0.1:0"
	require.NoError(t, cfg.Validate())
	rcv := startReceiver(t, cfg, consumertest.NewNop(), host, nil)

	token := "X-Collector-Token: Bearer collector-token\r\n"
	record := fmt.Sprintf(`{"name":"chat x","start_time_unix_nano":%d,"chunk_offsets_ms":[1,2]}`, time.Now().UnixNano())
	listeners := []struct{ name, addr, path, body string }{
		{"proxy", rcv.addrs["proxy"].String(), shapes[0].path, shapes[0].body},
		{"ingest", rcv.addrs["ingest"].String(), ingest.Path, record},
	}
	for _, l := range listeners {
		t.Run(l.name, func(t *testing.T) {
			// About 40 KiB of headers: more than any SDK sends, under the limit.
			assert.Equal(t, http.StatusOK, headerRequest(t, l.addr, rawPost(l.addr, l.path, token+manyHeaders(2500), l.body)))

			// About 900 KiB of headers, under net/http's own limit of 1 MiB.
			huge := rawPost(l.addr, l.path, manyHeaders(60_000), l.body)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			status := headerRequest(t, l.addr, huge)
			runtime.ReadMemStats(&after)
			assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, status, "431, not the authenticator's 401")
			// Parsing 60,000 headers allocates megabytes; reading 64 KiB of
			// them and hanging up, under one (14 MiB and 1 MiB here).
			t.Logf("%d bytes allocated", after.TotalAlloc-before.TotalAlloc)
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(2<<20), "bytes allocated while refusing the request")
		})
	}
	assert.Equal(t, 1, log.count(), "only the request under the limit reached the upstream")
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgeadvisorexporter

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOversizedHeadersGet431BeforeAuth: headers past max_request_header_bytes
// are refused by the server itself, before the authenticator (which would
// answer 401) sees the request.
func TestOversizedHeadersGet431BeforeAuth(t *testing.T) {
	cfg := testConfig()
	cfg.MaxRequestHeaderBytes = 4 << 10
	endpoint := startGuarded(t, cfg)
	get := func(header string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+endpoint+AdvicePath, http.NoBody)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer advisor-token")
		req.Header.Set("X-Padding", header)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, get(strings.Repeat("x", 3<<10)), "under the bound")
	// Go's server reads 4 KiB of slack beyond MaxHeaderBytes.
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, get(strings.Repeat("x", 9<<10)))
}

// TestSlowHeadersAreCut: a client that trickles its headers is cut at
// read_header_timeout.
func TestSlowHeadersAreCut(t *testing.T) {
	cfg := testConfig()
	cfg.ServerConfig.ReadHeaderTimeout = 200 * time.Millisecond
	endpoint := startGuarded(t, cfg)
	conn, err := net.Dial("tcp", endpoint)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	_, err = conn.Write([]byte("GET " + AdvicePath + " HTTP/1.1\r\nHost: x\r\n"))
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = bufio.NewReader(conn).ReadByte()
	require.Error(t, err, "the server closes the connection without an answer")
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "closed by the server (%v), not by our deadline", err)
	assert.Less(t, time.Since(start), 5*time.Second)
}

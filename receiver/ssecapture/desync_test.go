// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProxyClosesAfterAChunkedRequest: a request with both Content-Length
// and Transfer-Encoding: chunked is read by its chunks (net/http drops the
// Content-Length), forwarded with the Content-Length of its body, and its
// connection is closed after the answer, so that bytes after the chunked
// body, a request a server in front framing by Content-Length would take
// for its next client's, are never served. net/http kept the connection and
// served them: the upstream got the smuggled request.
func TestProxyClosesAfterAChunkedRequest(t *testing.T) {
	up := newRawUpstream(t, rawStep{data: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"})
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = up.URL }))
	addr := f.rcv.addrs["proxy"].String()
	body := shapes[0].body
	smuggled := "GET /v1/smuggled HTTP/1.1\r\nHost: proxy\r\n\r\n"
	for name, head := range map[string]string{
		"Content-Length and chunked": "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
		"chunked":                    "Transfer-Encoding: chunked\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			before := len(up.requests())
			got := rawExchange(t, addr, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n%s",
				shapes[0].path, head, len(body), body, smuggled))
			assert.Equal(t, 1, strings.Count(got, "HTTP/1.1 200 OK"), "one answer, for the request as chunked: %q", got)
			assert.Contains(t, got, "Connection: close")
			reqs := up.requests()[before:]
			require.Len(t, reqs, 1, "the bytes after the chunked body were not served")
			assert.Contains(t, reqs[0], fmt.Sprintf("Content-Length: %d\r\n", len(body)))
			assert.NotContains(t, strings.ToLower(reqs[0]), "transfer-encoding")
		})
	}
}

// TestProxyRequestFraming: requests whose framing is ambiguous are refused
// by net/http before the proxy sees them (two Content-Lengths that differ,
// a Transfer-Encoding other than chunked); an HTTP/1.0 request, a
// Max-Forwards and an absolute-form target are served as any other, the
// target's host ignored and its path checked against the upstream's
// prefix.
func TestProxyRequestFraming(t *testing.T) {
	up := newRawUpstream(t, rawStep{data: sseHeadClose + chatEvent + doneEvent})
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = up.URL + "/openai" }))
	addr := f.rcv.addrs["proxy"].String()
	body := shapes[0].body
	for _, tc := range []struct {
		name, request, status string
		forwarded             string // the upstream's request line, "" if none
	}{
		{
			"two Content-Lengths", fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nContent-Length: %d\r\nContent-Length: 5\r\nConnection: close\r\n\r\n%s", len(body), body),
			"400 Bad Request", "",
		},
		{
			"chunked, identity", fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nTransfer-Encoding: chunked, identity\r\nConnection: close\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body), body),
			"501 Not Implemented", "",
		},
		{
			"HTTP/1.0", fmt.Sprintf("POST /v1/chat/completions HTTP/1.0\r\nHost: proxy\r\nContent-Length: %d\r\n\r\n%s", len(body), body),
			"200 OK", "POST /openai/v1/chat/completions HTTP/1.1",
		},
		{"Max-Forwards", rawChat("Max-Forwards: 0\r\n"), "200 OK", "POST /openai/v1/chat/completions HTTP/1.1"},
		{
			"absolute-form", fmt.Sprintf("POST http://other.example/v1/chat/completions HTTP/1.1\r\nHost: other.example\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body),
			"200 OK", "POST /openai/v1/chat/completions HTTP/1.1",
		},
		{
			"absolute-form leaving the prefix", fmt.Sprintf("POST http://other.example/../admin/v1/chat/completions HTTP/1.1\r\nHost: other.example\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body),
			"400 Bad Request", "",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(up.requests())
			got := rawExchange(t, addr, tc.request)
			status, _ := readResponses(got)
			require.Equal(t, []string{tc.status}, status, got)
			reqs := up.requests()[before:]
			if tc.forwarded == "" {
				assert.Empty(t, reqs)
				return
			}
			require.Len(t, reqs, 1)
			assert.True(t, strings.HasPrefix(reqs[0], tc.forwarded+"\r\n"), reqs[0])
			assert.Contains(t, reqs[0], "Host: "+strings.TrimPrefix(up.URL, "http://")+"\r\n", "the configured upstream, whatever the target named")
		})
	}
}

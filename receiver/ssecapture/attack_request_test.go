// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

// What a hostile client sends on the request side, and what reaches the
// upstreams of a guarded proxy.

// TestProxyDropsTheClientsForwardingHeaders: the headers a proxy in front
// uses to tell a server where a request came from, or which path it was
// for, are the client's invention here, and reach no upstream, guarded or
// not: every X-Forwarded-* (net/http's Rewrite drops four of them),
// X-Real-Ip, and the path overrides X-Original-Url and X-Rewrite-Url, with
// which a server that honours them routes the request to a path the
// prefix check never saw.
func TestProxyDropsTheClientsForwardingHeaders(t *testing.T) {
	f := newGuardFixture(t, fakellm.Script{Status: http.StatusServiceUnavailable}, fakellm.Script{TTFTMillis: 1, GapsMillis: []float64{1}},
		func(*GuardConfig) {})
	forwarding := http.Header{
		"X-Forwarded-For":    {"10.9.8.7"},
		"X-Forwarded-Prefix": {"/admin"},
		"X-Forwarded-Port":   {"8443"},
		"X-Forwarded-Server": {"evil.example"},
		"X-Forwarded-Ssl":    {"on"},
		"X-Forwarded-Uri":    {"/admin/keys"},
		"X-Forwarded_Prefix": {"/admin"}, // CGI and WSGI read it as X-Forwarded-Prefix
		"X-Real-Ip":          {"10.9.8.7"},
		"X-Original-Url":     {"/admin/keys"},
		"X-Rewrite-Url":      {"/admin/keys"},
	}
	resp, body := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, forwarding)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	for name, up := range map[string]*fakellm.Server{"primary": f.primary, "alternate": f.alternate} {
		reqs := up.Requests()
		require.Len(t, reqs, 1, name)
		for h := range forwarding {
			assert.Empty(t, reqs[0].Header.Values(h), "%s reached the %s", h, name)
		}
	}
}

// TestProxyPathParametersCannotLeaveThePrefix: a dot segment with a path
// parameter (`..;`, `..;x`, and encoded) is a dot segment to the servers
// that cut path parameters before resolving dots (Tomcat, Jetty, Spring
// and the gateways built on them): it gets the prefix check's 400 and is
// not forwarded, as `..` does. A parameter elsewhere stays under.
func TestProxyPathParametersCannotLeaveThePrefix(t *testing.T) {
	up := newRawUpstream(t, rawStep{data: sseHeadClose + chatEvent + doneEvent})
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = up.URL + "/openai" }))
	addr := f.rcv.addrs["proxy"].String()
	body := shapes[0].body
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/..;/admin/v1/chat/completions", http.StatusBadRequest},
		{"/v1/..;/..;/admin/v1/chat/completions", http.StatusBadRequest},
		{"/v1/..;x=1/..;/admin/v1/chat/completions", http.StatusBadRequest},
		{"/v1/%2e%2e%3b/%2e%2e;/admin/v1/chat/completions", http.StatusBadRequest},
		{"/v1/%252e%252e%253b/%252e%252e%253b/admin/v1/chat/completions", http.StatusBadRequest},
		{"/v1/.;/chat/completions", http.StatusOK},
		{"/v1;v=2/chat/completions", http.StatusOK},
	} {
		t.Run(tc.path, func(t *testing.T) {
			before := len(up.requests())
			status := headerRequest(t, addr, rawPost(addr, tc.path, "Connection: close\r\n", body))
			assert.Equal(t, tc.status, status)
			if tc.status == http.StatusBadRequest {
				assert.Empty(t, up.requests()[before:], "the upstream got a path out of its prefix")
			}
		})
	}
}

// TestGuardKeepsCredentialsByNameFromAlternates: a header whose name says
// it holds an authorization, a token or a secret is a credential, as one
// that says it holds an API key: the gateways' own (Cloudflare AI
// Gateway's cf-aig-authorization, Helicone-Auth, X-Auth-Token) reach the
// primary and no alternate without forward_client_credentials. The
// headers that merely name something else (Idempotency-Key,
// Anthropic-Beta) still go.
func TestGuardKeepsCredentialsByNameFromAlternates(t *testing.T) {
	f := newGuardFixture(t, fakellm.Script{Status: http.StatusServiceUnavailable}, fakellm.Script{TTFTMillis: 1, GapsMillis: []float64{1}},
		func(*GuardConfig) {})
	credentials := http.Header{
		"Cf-Aig-Authorization": {"Bearer CFSECRET"},
		"Helicone-Auth":        {"Bearer sk-helicone-SECRET"},
		"X-Auth-Token":         {"TOKENSECRET"},
		"X-Amz-Security-Token": {"SESSIONSECRET"},
		"X-Client-Secret":      {"CLIENTSECRET"},
	}
	others := http.Header{"Idempotency-Key": {"call-1"}, "Anthropic-Beta": {"tools-2024"}}
	sent := credentials.Clone()
	for k, v := range others {
		sent[k] = v
	}
	resp, body := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, sent)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	primary, alternate := f.primary.Requests(), f.alternate.Requests()
	require.Len(t, primary, 1)
	require.Len(t, alternate, 1)
	for h, v := range credentials {
		assert.Equal(t, v, primary[0].Header.Values(h), "the primary gets the client's %s", h)
		assert.Empty(t, alternate[0].Header.Values(h), "%s reached the alternate", h)
	}
	for h, v := range others {
		assert.Equal(t, v, alternate[0].Header.Values(h), "%s is no credential", h)
	}
}

// TestProxyRefusesAnOversizedBodyBeforeReadingIt: a request whose
// Content-Length passes max_request_body gets its 413 at once, before a
// byte of its body is read: with Expect: 100-continue the client is never
// told to send it (RFC 9110 section 10.1.1), and without it the proxy does
// not wait for a body it would refuse (until read_timeout) nor read up to
// the limit of it. Its connection is closed: the rest of the body is not
// a request.
func TestProxyRefusesAnOversizedBodyBeforeReadingIt(t *testing.T) {
	const limit = 1024
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.MaxRequestBody = limit }))
	addr := f.rcv.addrs["proxy"].String()
	for name, expect := range map[string]string{"Expect: 100-continue": "Expect: 100-continue\r\n", "no Expect": ""} {
		t.Run(name, func(t *testing.T) {
			conn, err := net.DialTimeout("tcp", addr, testTimeout)
			require.NoError(t, err)
			defer func() { _ = conn.Close() }()
			// The head alone: a proxy that reads the body waits for it.
			_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n",
				shapes[0].path, 4*limit, expect)
			require.NoError(t, err)
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(2*time.Second)))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err, "no answer before the body came")
			b, _ := io.ReadAll(resp.Body)
			require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "the first answer: %s", b)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			assert.Contains(t, string(b), "request_too_large")
			assert.True(t, resp.Close, "the connection is closed after the 413")
		})
	}
	assert.Zero(t, f.log.count(), "nothing was forwarded")
}

// TestProxyRefusesAnOversizedBodyKeepingAnHTTP2Connection: over HTTP/2
// the rest of a refused body is the refused stream's alone, so the 413
// ends that stream and leaves the connection, and the client's other
// streams on it, alone (Connection: close would make Go's HTTP/2 server
// close it, sending GOAWAY).
func TestProxyRefusesAnOversizedBodyKeepingAnHTTP2Connection(t *testing.T) {
	const limit = 1024
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.MaxRequestBody = limit }))
	srv := httptest.NewUnstartedServer(f.rcv.proxy)
	srv.EnableHTTP2 = true
	var conns atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	client := srv.Client()
	for _, size := range []int{4 * limit, 10} {
		body := `{"model":"gpt-4o","stream":true,"x":"` + strings.Repeat("a", size) + `"}`
		resp, err := client.Post(srv.URL+shapes[0].path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, 2, resp.ProtoMajor)
		if size > limit {
			require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
		} else {
			require.Equal(t, http.StatusOK, resp.StatusCode)
		}
	}
	assert.Equal(t, int64(1), conns.Load(), "the call after the 413 went on the same connection")
}

// TestProxyReleasesTheRequestBodyOnceSent: a request body (up to
// max_request_body, 4 MiB) is held while it is sent, and, on a guarded
// call, until an attempt is committed (an alternate may still need it),
// not for the length of the stream that follows: 10,000 streams
// (max_concurrent_requests) of 4 MiB prompts would otherwise hold 40 GiB.
// The upstream reads each body into nothing and holds its stream open; the
// heap the test process gains with the streams open is the proxy's.
func TestProxyReleasesTheRequestBodyOnceSent(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 2 x 16 streams of 2 MiB requests")
	}
	const n, size = 16, 2 << 20
	body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("p", size) + `"}]}`
	up := newRawUpstream(t, rawStep{data: sseHeadClose + chatEvent}, rawStep{after: 1500 * time.Millisecond, data: doneEvent})
	for name, guarded := range map[string]bool{"unguarded": false, "guarded": true} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
				p.Upstream.Endpoint = up.URL
				if guarded {
					p.Guard.GetOrInsertDefault().StallTimeout = AutoDuration(time.Minute)
				}
			}))
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			before := ms.HeapAlloc
			release := openStreamsOf(t, f.proxyURL, n, body)
			runtime.GC()
			runtime.ReadMemStats(&ms)
			perStream := (float64(ms.HeapAlloc) - float64(before)) / n / 1024
			release()
			t.Logf("an open stream of a %d KiB request holds %.0f KiB of the heap", size>>10, perStream)
			assert.Less(t, perStream, float64(size>>10)/4, "the proxy holds the request body of an open stream")
		})
	}
}

// TestProxyRequestCodings: a request body in a coding confighttp decodes
// (gzip) reaches every attempt decoded, with the Content-Length of what it
// decoded to and no Content-Encoding, and the call is guarded as any
// other; one in a coding it does not decode (br), or that does not decode,
// gets a 400 with the proxy's JSON error, and nothing is forwarded.
func TestProxyRequestCodings(t *testing.T) {
	f := newGuardFixture(t, fakellm.Script{Status: http.StatusServiceUnavailable}, fakellm.Script{TTFTMillis: 1, GapsMillis: []float64{1}},
		func(*GuardConfig) {})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(shapes[0].body))
	require.NoError(t, zw.Close())
	send := func(coding string, body []byte) (*http.Response, []byte) {
		req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, f.proxyURL+shapes[0].path, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", coding)
		resp, err := testClient(t).Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, b
	}
	resp, body := send("gzip", gz.Bytes())
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	for name, up := range map[string]*fakellm.Server{"primary": f.primary, "alternate": f.alternate} {
		reqs := up.Requests()
		require.Len(t, reqs, 1, name)
		assert.Empty(t, reqs[0].Header.Get("Content-Encoding"), name)
		assert.Equal(t, strconv.Itoa(len(shapes[0].body)), reqs[0].Header.Get("Content-Length"), name)
		assert.Equal(t, "gpt-4o", reqs[0].Model, name)
	}
	spans := f.spans(t, 2)
	assert.Len(t, spans, 2, "a guarded call: the failed attempt's span and the alternate's")

	for coding, b := range map[string][]byte{"br": []byte("not brotli"), "gzip": []byte("not gzip")} {
		resp, body := send(coding, b)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", coding, body)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), "%s: %s", coding, body)
	}
	assert.Len(t, f.primary.Requests(), 1, "nothing more was forwarded")
}

// TestProxyRefusesAnUnauthenticatedClientInJSON: the listener's
// authenticator refuses a client (401) in the proxy's JSON error, as every
// other refusal of the proxy, before anything is forwarded.
func TestProxyRefusesAnUnauthenticatedClientInJSON(t *testing.T) {
	id, host := startBearerAuth(t, "X-Collector-Token", "collector-token")
	f := newFixture(t, nil)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	p := cfg.Proxy.GetOrInsertDefault()
	p.NetAddr.Endpoint = "127.0.0.1:0"
	p.Upstream.Endpoint = f.upstream.URL
	p.Auth = authConfig(id)
	p.AuthHeader = "X-Collector-Token"
	require.NoError(t, cfg.Validate())
	rcv := startReceiver(t, cfg, consumertest.NewNop(), host, nil)
	resp, body := post(t, testClient(t), "http://"+rcv.addrs["proxy"].String()+shapes[0].path, shapes[0].body,
		http.Header{"X-Collector-Token": {"Bearer nope"}})
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), "%s", body)
	var e struct {
		Error struct{ Type string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body, &e), "%s", body)
	assert.Equal(t, "unauthorized", e.Error.Type)
	assert.Zero(t, f.log.count(), "nothing was forwarded")
}

// TestProxyReadsTheEndpointAsTheUpstreamMay: a path that servers read as
// an API's endpoint after cleaning it (an empty or dot segment, a trailing
// slash or dot, a path parameter: nginx, Envoy and the Java servers do) is
// that endpoint to the proxy too, so a client cannot send a call past its
// span and its guard by spelling the path another way.
func TestProxyReadsTheEndpointAsTheUpstreamMay(t *testing.T) {
	up := newRawUpstream(t, rawStep{data: sseHeadClose + chatEvent + doneEvent})
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = up.URL }))
	addr := f.rcv.addrs["proxy"].String()
	paths := []string{
		"/v1/chat/completions/.",
		"/v1/chat/completions/./",
		"/v1/chat//completions",
		"/v1/./chat/completions",
		"/v1/chat/completions;x=1",
		"/v1/chat;v=2/completions",
		"/v1/chat/%63ompletions",
	}
	for _, p := range paths {
		require.Equal(t, http.StatusOK, headerRequest(t, addr, rawPost(addr, p, "Connection: close\r\n", shapes[0].body)), p)
	}
	for _, s := range f.spans(t, len(paths)) {
		assert.Equal(t, "chat gpt-4o", s.Name())
	}
}

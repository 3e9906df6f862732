// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// The attacks on the guard of docs/security.md ("The guard under attack")
// against the ocb-built collector, each upstream a hostile one of the
// test's own: what every upstream received, and what the client got.

// attackUpstream is an HTTP/1 upstream that records every request it read
// (path, headers, trailers), counts the connections made to it, and
// answers each request as the test scripted its model.
type attackUpstream struct {
	srv     *httptest.Server
	conns   atomic.Int64
	mu      sync.Mutex
	seen    []attackRequest
	answers map[string]func(w http.ResponseWriter, r *http.Request)
}

type attackRequest struct {
	path    string // as received, escaped
	model   string
	header  http.Header
	trailer http.Header
	close   bool // Connection: close
}

func startAttackUpstream(t *testing.T) *attackUpstream {
	t.Helper()
	u := &attackUpstream{answers: map[string]func(http.ResponseWriter, *http.Request){}}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	u.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}
	u.srv.Start()
	t.Cleanup(u.srv.Close)
	return u
}

func (u *attackUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body) // to its end: the trailers come after it
	var req struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &req)
	model := req.Model
	if model == "" {
		model = r.Method + " " + r.URL.Path
	}
	u.mu.Lock()
	u.seen = append(u.seen, attackRequest{path: r.URL.EscapedPath(), model: model, header: r.Header.Clone(), trailer: r.Trailer.Clone(), close: r.Close})
	answer := u.answers[model]
	u.mu.Unlock()
	if answer == nil {
		http.Error(w, `{"error":{"message":"no such model","type":"invalid_request_error","code":"model_not_found"}}`, http.StatusNotFound)
		return
	}
	answer(w, r)
}

func (u *attackUpstream) answer(model string, f func(w http.ResponseWriter, r *http.Request)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.answers[model] = f
}

// requests returns the requests of model received so far.
func (u *attackUpstream) requests(model string) []attackRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []attackRequest
	for _, r := range u.seen {
		if r.model == model {
			out = append(out, r)
		}
	}
	return out
}

func (u *attackUpstream) total() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen)
}

// attackStream answers with a short, whole chat stream.
func attackStream(model string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		flushed(w, chunkFrame(model, "hi"))
		flushed(w, "data: [DONE]\n\n")
	}
}

func attackStatus(status int, body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// attackReset resets the connection once the request has been read: the
// request reached the upstream, the answer never comes.
func attackReset(w http.ResponseWriter, _ *http.Request) {
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close with RST, not FIN
	}
	_ = c.Close()
}

// OpenAI's answer to a key whose quota is spent.
const attackQuotaBody = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.",` +
	`"type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`

const attackSinkOnly = `exporters:
` + sinkExporter

// The same upstream behind an unguarded proxy and a guarded one.
const attackReplayConfig = `
receivers:
  sse_capture/plain:
    proxy:
      endpoint: 127.0.0.1:${PLAIN}
      upstream:
        endpoint: ${UPSTREAM}
  sse_capture/guarded:
    proxy:
      endpoint: 127.0.0.1:${GUARDED}
      upstream:
        endpoint: ${UPSTREAM}
      guard:
        hedge:
          max_attempts: 2
` + attackSinkOnly + `service:
  pipelines:
    traces:
      receivers: [sse_capture/plain, sse_capture/guarded]
      exporters: [otlp_http]
`

// warmConnections makes the proxy at proxy hold n idle connections to the
// upstream: n requests at once, held by the upstream until all n arrived.
func warmConnections(t *testing.T, u *attackUpstream, proxy string, n int) {
	t.Helper()
	var arrived atomic.Int64
	all := make(chan struct{})
	path := fmt.Sprintf("/v1/models/warm-%d", time.Now().UnixNano())
	u.answer("GET "+path, func(w http.ResponseWriter, _ *http.Request) {
		if arrived.Add(1) == int64(n) {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(30 * time.Second):
		}
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
	})
	before := u.conns.Load()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := client.Get(proxy + path)
			if assert.NoError(t, err) {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, n, u.conns.Load()-before, "the proxy opened one upstream connection per request in flight")
}

// attemptSpans counts the spans of model at the sink once they stop coming.
func attemptSpans(t *testing.T, sink *harness.Sink, model string, atLeast int) int {
	t.Helper()
	count := func() int {
		n := 0
		for _, sp := range sink.Spans() {
			if v, ok := sp.Attributes().Get(semconv.AttrRequestModel); ok && v.Str() == model {
				n++
			}
		}
		return n
	}
	eventually(t, 20*time.Second, fmt.Sprintf("%d spans of %s", atLeast, model), func() error {
		if count() < atLeast {
			return errNotYet
		}
		return nil
	})
	time.Sleep(time.Second) // one more export round: nothing else may come
	return count()
}

// TestGuardUpstreamRequestIsAnAttempt (row 2 of docs/security.md's guard
// attacks): with 300 warm idle connections that the upstream resets once it
// has read a request, one call with Idempotency-Key is one upstream request
// unguarded, and as many as the guard's attempts (at most max_attempts)
// guarded. net/http used to replay the POST on every dead connection: 301
// upstream requests for one call.
func TestGuardUpstreamRequestIsAnAttempt(t *testing.T) {
	const warm = 300
	up, sink := startAttackUpstream(t), startSink(t)
	plain, guarded := freePort(t), freePort(t)
	collector(t, fill(attackReplayConfig, "PLAIN", plain, "GUARDED", guarded, "UPSTREAM", up.srv.URL, "SINK", sink.URL))
	for name, port := range map[string]int{"plain": plain, "guarded": guarded} {
		t.Run(name, func(t *testing.T) {
			proxy := fmt.Sprintf("http://127.0.0.1:%d", port)
			warmConnections(t, up, proxy, warm)
			model := "replay-" + name
			up.answer(model, attackReset)
			r := send(t, http.MethodPost, proxy+"/v1/chat/completions", map[string]string{
				"Content-Type": "application/json", "Idempotency-Key": "call-" + name, "Authorization": "Bearer sk-client",
			}, strings.NewReader(fmt.Sprintf(`{"model":%q,"stream":true}`, model)))
			assert.Equal(t, http.StatusBadGateway, r.status, "%s", r.body)
			attempts := attemptSpans(t, sink, model, 1)
			sent := len(up.requests(model))
			t.Logf("%s: %d upstream requests, %d attempt spans", name, sent, attempts)
			assert.Equal(t, attempts, sent, "every upstream request is an attempt the proxy counted")
			if name == "plain" {
				assert.Equal(t, 1, sent, "one call, one upstream request")
			} else {
				assert.Equal(t, 2, sent, "max_attempts: 2, both failed")
			}
		})
	}
}

// The primary at the root, alternates under /openai of a second upstream;
// the listener's authenticator reads X-Collector-Token. Model entries give
// the alternates' credential settings: the default one has the operator's
// key, forward-* forwards the client's, serve-* serves refused clients,
// hedge-* hedges after 100 ms.
const attackConfig = `
extensions:
  bearertokenauth/proxy:
    header: X-Collector-Token
    token: collector-secret
receivers:
  sse_capture:
    proxy:
      endpoint: 127.0.0.1:${PROXY}
      auth:
        authenticator: bearertokenauth/proxy
      auth_header: X-Collector-Token
      upstream:
        endpoint: ${PRIMARY}
      guard:
        hedge:
          max_attempts: 2
          budget: {max_tokens: 0}
          alternates:
            - endpoint: ${ALTERNATE}/openai
              headers: {Authorization: "Bearer operator-key"}
        models:
          - model: "forward-*"
            hedge:
              alternates:
                - endpoint: ${ALTERNATE}/openai
                  forward_client_credentials: true
          - model: "serve-*"
            hedge:
              alternates:
                - endpoint: ${ALTERNATE}/openai
                  headers: {Authorization: "Bearer operator-key"}
                  serve_credential_failures: true
          - model: "hedge-*"
            hedge:
              delay: 100ms
` + attackSinkOnly + `service:
  pipelines:
    traces:
      receivers: [sse_capture]
      exporters: [otlp_http]
`

type attackStack struct {
	primary, alternate *attackUpstream
	sink               *harness.Sink
	proxy              string // host:port
}

func startAttackStack(t *testing.T) *attackStack {
	t.Helper()
	s := &attackStack{primary: startAttackUpstream(t), alternate: startAttackUpstream(t), sink: startSink(t)}
	port := freePort(t)
	collector(t, fill(attackConfig, "PROXY", port, "PRIMARY", s.primary.srv.URL, "ALTERNATE", s.alternate.srv.URL, "SINK", s.sink.URL),
		"bearertokenauth/proxy")
	s.proxy = fmt.Sprintf("127.0.0.1:%d", port)
	return s
}

// call posts a streaming chat call for model with the collector's token
// and the given headers.
func (s *attackStack) call(t *testing.T, model string, header map[string]string) reply {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json", "X-Collector-Token": "Bearer collector-secret"}
	for k, v := range header {
		h[k] = v
	}
	return send(t, http.MethodPost, "http://"+s.proxy+"/v1/chat/completions", h, strings.NewReader(fmt.Sprintf(`{"model":%q,"stream":true}`, model)))
}

const attackUnavailable = `{"error":{"message":"overloaded","type":"server_error","code":null}}`

// TestGuardAlternatePathStaysUnderItsPrefix (row 3): a path that the
// primary at the root would take but that leaves an alternate's /openai
// prefix is refused with 400 before any attempt, however it is spelled;
// a path under every prefix still fails over.
func TestGuardAlternatePathStaysUnderItsPrefix(t *testing.T) {
	s := startAttackStack(t)
	const model = "gpt-escape"
	s.primary.answer(model, attackStatus(http.StatusServiceUnavailable, attackUnavailable))
	s.alternate.answer(model, attackStream(model))
	body := fmt.Sprintf(`{"model":%q,"stream":true}`, model)
	for _, path := range []string{
		"/../admin/v1/chat/completions",
		"/%2e%2e/admin/v1/chat/completions",
		"/v1/%2E%2E/%2e%2e/admin/v1/chat/completions",
		"/v1/../../../admin/v1/chat/completions",
		"/v1/..%2f..%2fadmin/v1/chat/completions",
		"/v1/%252e%252e/%252e%252e/admin/v1/chat/completions",
	} {
		status := rawRequest(t, s.proxy, "POST "+path+" HTTP/1.1\r\nHost: x\r\nX-Collector-Token: Bearer collector-secret\r\n"+
			fmt.Sprintf("Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body))
		assert.Equal(t, http.StatusBadRequest, status, "path %s", path)
	}
	assert.Zero(t, s.primary.total(), "a refused call reached the primary")
	assert.Zero(t, s.alternate.total(), "a path out of the alternate's prefix reached it")

	r := s.call(t, model, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	got := s.alternate.requests(model)
	require.Len(t, got, 1)
	assert.Equal(t, "/openai/v1/chat/completions", got[0].path)
}

// attackClientCredentials are the credential headers of every SDK.
var attackClientCredentials = map[string]string{
	"Authorization": "Bearer sk-client", "X-Api-Key": "sk-ant-client", "Api-Key": "azure-client",
	"X-Goog-Api-Key": "goog-client", "X-Goog-User-Project": "client-project", "Cookie": "session=client",
	"Openai-Organization": "org-client", "Openai-Project": "proj-client", "Anthropic-Workspace-Id": "wrk-client",
}

// TestGuardCredentialsFollowTheUpstream (row 6): the client's credential
// headers reach the primary, and an alternate only when it forwards them;
// an alternate with its own key gets that key alone. Proxy-Authorization
// reaches no upstream.
func TestGuardCredentialsFollowTheUpstream(t *testing.T) {
	s := startAttackStack(t)
	header := map[string]string{"Proxy-Authorization": "Basic c2VjcmV0"}
	for k, v := range attackClientCredentials {
		header[k] = v
	}
	for _, model := range []string{"gpt-own-key", "forward-gpt"} {
		s.primary.answer(model, attackStatus(http.StatusServiceUnavailable, attackUnavailable))
		s.alternate.answer(model, attackStream(model))
		r := s.call(t, model, header)
		require.Equal(t, http.StatusOK, r.status, "%s: %s", model, r.body)
		p, a := s.primary.requests(model), s.alternate.requests(model)
		require.Len(t, p, 1)
		require.Len(t, a, 1)
		for k, v := range attackClientCredentials {
			assert.Equal(t, v, p[0].header.Get(k), "%s: the primary gets the client's %s", model, k)
		}
		for _, got := range []attackRequest{p[0], a[0]} {
			assert.Empty(t, got.header.Values("Proxy-Authorization"), "%s: Proxy-Authorization went upstream", model)
			assert.Empty(t, got.header.Values("X-Collector-Token"), "%s: the collector's token went upstream", model)
		}
		if model == "forward-gpt" {
			for k, v := range attackClientCredentials {
				assert.Equal(t, v, a[0].header.Get(k), "forward_client_credentials: the alternate gets the client's %s", k)
			}
			continue
		}
		assert.Equal(t, []string{"Bearer operator-key"}, a[0].header.Values("Authorization"), "the alternate's own key, alone")
		for k := range attackClientCredentials {
			if k != "Authorization" {
				assert.Empty(t, a[0].header.Values(k), "the alternate with its own key got the client's %s", k)
			}
		}
	}

	// An unguarded call (not streaming) goes to the primary alone, with the
	// client's credentials and without Proxy-Authorization.
	const plain = "gpt-unguarded"
	s.primary.answer(plain, attackStatus(http.StatusOK, `{"id":"c1","object":"chat.completion","choices":[]}`))
	h := map[string]string{"Content-Type": "application/json", "X-Collector-Token": "Bearer collector-secret"}
	for k, v := range header {
		h[k] = v
	}
	r := send(t, http.MethodPost, "http://"+s.proxy+"/v1/chat/completions", h, strings.NewReader(fmt.Sprintf(`{"model":%q}`, plain)))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	p := s.primary.requests(plain)
	require.Len(t, p, 1)
	for k, v := range attackClientCredentials {
		assert.Equal(t, v, p[0].header.Get(k), "unguarded: the primary gets the client's %s", k)
	}
	assert.Empty(t, p[0].header.Values("Proxy-Authorization"), "unguarded: Proxy-Authorization went upstream")
	assert.Empty(t, s.alternate.requests(plain))
}

// TestGuardRefusedKeyIsNotServedOnTheOperators (row 5): a client whose own
// key is out of quota (or refused) gets the primary's answer as it came and
// never a stream on the alternate's key, also when a hedge on it already
// has content; an alternate configured to serve such calls does.
func TestGuardRefusedKeyIsNotServedOnTheOperators(t *testing.T) {
	s := startAttackStack(t)
	client := map[string]string{"Authorization": "Bearer sk-spent"}
	for _, tc := range []struct {
		model, body string
		status      int
	}{
		{"gpt-quota", attackQuotaBody, http.StatusTooManyRequests},
		{"gpt-revoked", `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, http.StatusUnauthorized},
		{"gpt-forbidden", `{"error":{"message":"Project does not have access to model","type":"invalid_request_error","code":"model_not_found"}}`, http.StatusForbidden},
	} {
		s.primary.answer(tc.model, attackStatus(tc.status, tc.body))
		s.alternate.answer(tc.model, attackStream(tc.model))
		r := s.call(t, tc.model, client)
		assert.Equal(t, tc.status, r.status, tc.model)
		assert.Equal(t, tc.body, string(r.body), "%s: the primary's own answer, as it came", tc.model)
		assert.Empty(t, s.alternate.requests(tc.model), "%s went to the operator's key", tc.model)
	}

	// A hedge on the operator's key already streaming when the primary
	// refuses the client's: dropped, and the client gets the refusal.
	const hedged = "hedge-quota"
	s.primary.answer(hedged, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(500 * time.Millisecond)
		attackStatus(http.StatusTooManyRequests, attackQuotaBody)(w, r)
	})
	s.alternate.answer(hedged, attackStream(hedged))
	r := s.call(t, hedged, client)
	assert.Equal(t, http.StatusTooManyRequests, r.status, "%s", r.body)
	assert.Equal(t, attackQuotaBody, string(r.body))
	assert.Len(t, s.alternate.requests(hedged), 1, "the hedge went out at 100 ms")

	// The operator chose to serve them.
	const served = "serve-quota"
	s.primary.answer(served, attackStatus(http.StatusTooManyRequests, attackQuotaBody))
	s.alternate.answer(served, attackStream(served))
	r = s.call(t, served, client)
	assert.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), "data: [DONE]")
	require.Len(t, s.alternate.requests(served), 1)
	assert.Equal(t, "Bearer operator-key", s.alternate.requests(served)[0].header.Get("Authorization"))
}

// TestGuardFailoversReuseConnections (row 7): 200 failovers to an
// alternate open one connection to it, not one each with Connection: close.
func TestGuardFailoversReuseConnections(t *testing.T) {
	s := startAttackStack(t)
	const model, calls = "gpt-failover", 200
	s.primary.answer(model, attackStatus(http.StatusServiceUnavailable, attackUnavailable))
	s.alternate.answer(model, attackStream(model))
	for range calls {
		r := s.call(t, model, nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	}
	got := s.alternate.requests(model)
	require.Len(t, got, calls)
	for _, r := range got {
		require.False(t, r.close, "an alternate request carried Connection: close")
	}
	t.Logf("%d failovers: %d connections to the alternate, %d to the primary", calls, s.alternate.conns.Load(), s.primary.conns.Load())
	assert.LessOrEqual(t, s.alternate.conns.Load(), int64(2), "connections to the alternate")
	assert.LessOrEqual(t, s.primary.conns.Load(), int64(2), "connections to the primary")
}

// TestGuardRequestTrailersGoNowhere (row 11): a chunked request whose
// trailers carry the collector's token and another secret reaches neither
// the primary nor the alternate with them (the header form of the token
// is removed as always).
func TestGuardRequestTrailersGoNowhere(t *testing.T) {
	s := startAttackStack(t)
	const model = "gpt-trailer"
	s.primary.answer(model, attackStatus(http.StatusServiceUnavailable, attackUnavailable))
	s.alternate.answer(model, attackStream(model))
	body := fmt.Sprintf(`{"model":%q,"stream":true}`, model)
	c, err := net.DialTimeout("tcp", s.proxy, 10*time.Second)
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	_, err = fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Collector-Token: Bearer collector-secret\r\n"+
		"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nTrailer: X-Collector-Token, X-Other-Secret\r\n\r\n"+
		"%x\r\n%s\r\n0\r\nX-Collector-Token: Bearer collector-secret\r\nX-Other-Secret: hunter2\r\n\r\n", len(body), body)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", got)
	p, a := s.primary.requests(model), s.alternate.requests(model)
	require.Len(t, p, 1)
	require.Len(t, a, 1)
	for name, r := range map[string]attackRequest{"primary": p[0], "alternate": a[0]} {
		assert.Empty(t, r.trailer, "the %s got trailers", name)
		assert.Empty(t, r.header.Values("Trailer"), "the %s got a Trailer header", name)
		assert.Empty(t, r.header.Values("X-Collector-Token"), "the %s got the collector's token", name)
		assert.Empty(t, r.header.Values("X-Other-Secret"), "the %s got the trailer as a header", name)
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/streamstall/streamstall/internal/semconv"
)

// The request side read as an attacker reads it: codings decoded before
// any check, and members or paths that the proxy and the upstream could
// read differently.

// snappyRequest is a raw HTTP/1.1 request to path whose body is decoded
// (a chat call padded to about decodedSize bytes) in snappy's block format.
func snappyRequest(path string, decodedSize int) []byte {
	decoded := `{"model":"gpt-4o","stream":true,"x":"` + strings.Repeat("a", decodedSize) + `"}`
	body := snappy.Encode(nil, []byte(decoded))
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\nContent-Encoding: snappy\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
		path, len(body))
	return append([]byte(head), body...)
}

// sendMeasured writes request to addr and returns the status of the answer
// and the bytes the whole process allocated from the write to the answer.
func sendMeasured(t *testing.T, addr string, request []byte) (int, uint64) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, testTimeout)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	require.NoError(t, conn.SetDeadline(time.Now().Add(testTimeout)))
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	_, err = conn.Write(request)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	runtime.ReadMemStats(&ms)
	return resp.StatusCode, ms.TotalAlloc - before
}

// TestProxyDecodesNoBlockCodingBeforeItsChecks: confighttp's "snappy" (block
// format) decoder reads a whole coded body and allocates its whole declared
// decoded length (up to max_request_body) before any handler runs, so a
// request the proxy sheds (max_concurrent_requests) would cost 20 times its
// bytes on the wire, exactly when the proxy is full. The proxy's default
// compression_algorithms keep to streaming decoders: the snappy request is
// refused, and costs no decoding.
func TestProxyDecodesNoBlockCodingBeforeItsChecks(t *testing.T) {
	const decodedSize = 4<<20 - 1<<10
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.MaxConcurrentRequests = 1 }))
	addr := f.rcv.addrs["proxy"].String()
	release := openStreams(t, f.proxyURL, 1)
	defer release()
	request := snappyRequest(shapes[0].path, decodedSize)
	status, allocated := sendMeasured(t, addr, request)
	t.Logf("snappy while full: %d, the process allocated %d KiB", status, allocated>>10)
	assert.Equal(t, http.StatusBadRequest, status, "snappy is not a coding the proxy decodes by default")
	assert.Less(t, allocated, uint64(2<<20), "a refused request cost its whole decoded body")
}

// exactKeys reads the top-level members of a JSON object as a
// case-sensitive parser does (Python's json and pydantic, JavaScript's
// JSON.parse, serde, Jackson by default): the last member named exactly
// name wins, and "Model" is not "model".
func exactKeys(t *testing.T, body []byte) map[string]json.RawMessage {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	out := map[string]json.RawMessage{}
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok)
	for dec.More() {
		k, err := dec.Token()
		require.NoError(t, err)
		var v json.RawMessage
		require.NoError(t, dec.Decode(&v))
		out[k.(string)] = v // a map keeps the exact spelling: no folding
	}
	return out
}

// recordingUpstream answers every request with answer after delay and
// records each request's body.
type recordingUpstream struct {
	URL    string
	mu     sync.Mutex
	bodies [][]byte
}

func newRecordingUpstream(t *testing.T, delay time.Duration, status int, contentType, answer string) *recordingUpstream {
	t.Helper()
	u := &recordingUpstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.bodies = append(u.bodies, b)
		u.mu.Unlock()
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	u.URL = srv.URL
	return u
}

func (u *recordingUpstream) requests() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([][]byte(nil), u.bodies...)
}

// startGuarded starts a guarded proxy in front of primary, its guard
// configured by g.
func startGuarded(t *testing.T, primary string, g func(*GuardConfig)) (string, *consumertest.TracesSink) {
	t.Helper()
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	pc := cfg.Proxy.GetOrInsertDefault()
	pc.NetAddr.Endpoint = "127.0.0.1:0"
	pc.Upstream.Endpoint = primary
	g(pc.Guard.GetOrInsertDefault())
	require.NoError(t, cfg.Validate())
	sink := new(consumertest.TracesSink)
	rcv := startReceiver(t, cfg, sink, componenttest.NewNopHost(), nil)
	return "http://" + rcv.addrs["proxy"].String(), sink
}

// TestProxyReadsTheModelAsTheUpstreamDoes: encoding/json matches member
// names case-insensitively, the upstreams not written in Go (pydantic, vLLM,
// LiteLLM) read "model" exactly and ignore a member they do not know. A
// client sends {"model":"gpt-4o", ..., "Model":"cheap-mini"} to a guard
// whose only alternate, on the operator's key, is for cheap-* models, with
// the primary down: the proxy must read gpt-4o, as the upstream will, so
// that the call gets no alternate and its span names the model called.
func TestProxyReadsTheModelAsTheUpstreamDoes(t *testing.T) {
	primary := newRecordingUpstream(t, 0, http.StatusServiceUnavailable, "application/json",
		`{"error":{"message":"down","type":"server_error"}}`)
	alternate := newRecordingUpstream(t, 0, http.StatusOK, "text/event-stream", chatEvent+doneEvent)
	url, sink := startGuarded(t, primary.URL, func(g *GuardConfig) {
		alt := confighttp.NewDefaultClientConfig()
		alt.Endpoint = alternate.URL
		alt.Headers = configopaque.MapList{{Name: "Authorization", Value: "Bearer sk-operator"}}
		alts := []AlternateConfig{{ClientConfig: alt}}
		g.Models = []ModelGuardConfig{{Model: "cheap-*", Hedge: ModelHedgeOverrides{Alternates: &alts}}}
	})
	// The control: the gpt-4o call as sent by an honest client is never
	// served by the cheap-* alternate (the client gets the primary's 503).
	resp, got := post(t, testClient(t), url+shapes[0].path, `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, string(got))
	require.Empty(t, alternate.requests())
	require.Eventually(t, func() bool { return sink.SpanCount() > 0 }, 10*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	sink.Reset()

	body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}],"Model":"cheap-mini"}`
	resp, got = post(t, testClient(t), url+shapes[0].path, body, http.Header{"Authorization": {"Bearer sk-client"}})
	t.Logf("client got %d: %s", resp.StatusCode, got)

	for _, b := range alternate.requests() {
		var model string
		require.NoError(t, json.Unmarshal(exactKeys(t, b)["model"], &model))
		assert.NotEqual(t, "gpt-4o", model,
			"a gpt-4o call (as the upstream reads it) went to the alternate of the cheap-* rule, on the operator's key")
	}
	require.Eventually(t, func() bool { return sink.SpanCount() > 0 }, 10*time.Second, 5*time.Millisecond)
	for _, span := range (&fixture{sink: sink}).spans(t, sink.SpanCount()) {
		assert.Equal(t, "gpt-4o", attr(t, span, semconv.AttrRequestModel).Str(),
			"the span names the model the upstream was asked for")
	}
}

// TestProxyReadsTheStreamFlagAsTheUpstreamDoes: the same on "stream". A
// client sends {"stream":false, ..., "Stream":true}, a call the upstream
// answers whole: the proxy must not guard it as a stream (a hedge would send
// the whole generation again, to the operator's alternate), and its span
// says gen_ai.request.stream false.
func TestProxyReadsTheStreamFlagAsTheUpstreamDoes(t *testing.T) {
	const whole = `{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
	primary := newRecordingUpstream(t, 600*time.Millisecond, http.StatusOK, "application/json", whole)
	alternate := newRecordingUpstream(t, 600*time.Millisecond, http.StatusOK, "application/json", whole)
	url, sink := startGuarded(t, primary.URL, func(g *GuardConfig) {
		alt := confighttp.NewDefaultClientConfig()
		alt.Endpoint = alternate.URL
		alt.Headers = configopaque.MapList{{Name: "Authorization", Value: "Bearer sk-operator"}}
		g.Hedge.Alternates = []AlternateConfig{{ClientConfig: alt}}
		g.Hedge.Delay = AutoDuration(100 * time.Millisecond)
	})
	for _, body := range []string{
		`{"model":"gpt-4o","stream":false,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gpt-4o","stream":false,"messages":[{"role":"user","content":"hi"}],"Stream":true}`,
	} {
		t.Run(body, func(t *testing.T) {
			p0, a0, s0 := len(primary.requests()), len(alternate.requests()), sink.SpanCount()
			stream := exactKeys(t, []byte(body))["stream"]
			require.Equal(t, "false", string(stream), "the call is not streamed, read as the upstream reads it")
			resp, got := post(t, testClient(t), url+shapes[0].path, body, http.Header{"Authorization": {"Bearer sk-client"}})
			require.Equal(t, http.StatusOK, resp.StatusCode, string(got))
			time.Sleep(100 * time.Millisecond)
			assert.Len(t, primary.requests()[p0:], 1)
			assert.Empty(t, alternate.requests()[a0:], "a non-streaming call was sent again to the alternate")
			require.Eventually(t, func() bool { return sink.SpanCount() > s0 }, 10*time.Second, 5*time.Millisecond)
			spans := (&fixture{sink: sink}).spans(t, sink.SpanCount())
			assert.False(t, attr(t, spans[len(spans)-1], semconv.AttrRequestStream).Bool(), "gen_ai.request.stream")
		})
	}
}

// TestProxyEscapesThatDoNotDecodeCannotLeaveThePrefix: the decoders that
// decode a path twice are mostly lenient (Python's unquote, PHP's
// rawurldecode): they keep "%zz" as it is and decode the rest. A doubly
// encoded traversal beside a "%25zz" (a "%zz" after one decoding), or
// ending in "%25", must get the 400 the same traversal without it gets,
// and nothing forwarded:
//
//	/v1/x%25zz/%252e%252e/%252e%252e/%252e%252e/admin/v1/chat/completions
//
// reads as /admin/v1/chat/completions to such an upstream.
func TestProxyEscapesThatDoNotDecodeCannotLeaveThePrefix(t *testing.T) {
	up := newRawUpstream(t, rawStep{data: sseHeadClose + chatEvent + doneEvent})
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = up.URL + "/openai" }))
	addr := f.rcv.addrs["proxy"].String()
	body := shapes[0].body
	for _, path := range []string{
		"/v1/x/%252e%252e/%252e%252e/%252e%252e/admin/v1/chat/completions", // the same without the escape
		"/v1/x%25zz/%252e%252e/%252e%252e/%252e%252e/admin/v1/chat/completions",
		"/v1/%252e%252e%252f%252e%252e%252fadmin%252fv1%252fchat%252fcompletions%25",
	} {
		t.Run(path, func(t *testing.T) {
			before := len(up.requests())
			status := headerRequest(t, addr, rawPost(addr, path, "Connection: close\r\n", body))
			assert.Equal(t, http.StatusBadRequest, status, "a path that leaves the prefix after two decodings")
			assert.Empty(t, up.requests()[before:], "the upstream got a path out of its prefix")
		})
	}
}

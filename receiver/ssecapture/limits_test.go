// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/proxy"
)

// assertBounded checks that a recorded string is a prefix of what was sent,
// cut within limit bytes on a character boundary.
func assertBounded(t *testing.T, sent, got string, limit int, what string) {
	t.Helper()
	assert.LessOrEqual(t, len(got), limit, "%s is bounded", what)
	assert.Greater(t, len(got), limit-utf8.UTFMax, "%s keeps all that fits", what)
	assert.True(t, strings.HasPrefix(sent, got), "%s is a prefix of what was sent", what)
	assert.True(t, utf8.ValidString(got), "%s is cut on a character boundary", what)
}

// TestProxyBoundsRecordedValues: every string the proxy takes from a request
// or a response (model names, ids, finish reasons, error types, hedge
// baggage) is cut to max_attribute_value_length bytes on a UTF-8 boundary,
// and the span name with it.
func TestProxyBoundsRecordedValues(t *testing.T) {
	const limit = 64
	// 3-byte characters after one ASCII byte: the limit falls inside one.
	long := func(prefix string) string { return prefix + strings.Repeat("€", 4<<10) }
	model, respModel, id, reason, errType := long("m"), long("r"), long("i"), long("f"), long("e")

	t.Run("stream", func(t *testing.T) {
		body := fmt.Sprintf("data: {\"id\":%q,\"model\":%q,\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n", id, respModel) +
			fmt.Sprintf("data: {\"choices\":[{\"delta\":{},\"finish_reason\":%q}]}\n\n", reason) +
			fmt.Sprintf("data: {\"error\":{\"type\":%q,\"message\":\"x\"}}\n\n", errType)
		upstream := newTestServer(t, sseUpstream(body))
		f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
			p.Upstream.Endpoint = upstream
			p.MaxAttributeValueLength = limit
		}))
		var baggage []string
		for i := range 40 {
			baggage = append(baggage, fmt.Sprintf("llm.hedge.k%d=v", i))
		}
		resp, _ := post(t, testClient(t), f.proxyURL+shapes[0].path, fmt.Sprintf(`{"model":%q,"stream":true}`, model), http.Header{
			"Baggage": {"llm.hedge.group_id=" + strings.Repeat("g", 1000), strings.Join(baggage[:20], ","), strings.Join(baggage[20:], ",")},
		})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		span := f.spans(t, 1)[0]
		assertBounded(t, model, attr(t, span, semconv.AttrRequestModel).Str(), limit, "gen_ai.request.model")
		assertBounded(t, "chat "+model, span.Name(), len("chat ")+limit, "the span name")
		assertBounded(t, respModel, attr(t, span, semconv.AttrResponseModel).Str(), limit, "gen_ai.response.model")
		assertBounded(t, id, attr(t, span, semconv.AttrResponseID).Str(), limit, "gen_ai.response.id")
		fr := attr(t, span, semconv.AttrResponseFinishReasons).Slice()
		require.Equal(t, 1, fr.Len())
		assertBounded(t, reason, fr.At(0).Str(), limit, "a finish reason")
		assertBounded(t, errType, attr(t, span, semconv.AttrErrorType).Str(), limit, "error.type")
		assert.Equal(t, strings.Repeat("g", limit), attr(t, span, semconv.AttrHedgeGroupID).Str())
		hedge := 0
		span.Attributes().Range(func(k string, _ pcommon.Value) bool {
			if strings.HasPrefix(k, "llm.hedge.") {
				hedge++
			}
			return true
		})
		assert.Equal(t, proxy.MaxHedgeAttributes, hedge, "hedge baggage entries are bounded")
		assertAllBounded(t, span, limit)
	})

	t.Run("json", func(t *testing.T) {
		body := fmt.Sprintf(`{"id":%q,"model":%q,"choices":[{"message":{"content":"a"},"finish_reason":%q}]}`, id, respModel, reason)
		upstream := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
		}))
		f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
			p.Upstream.Endpoint = upstream
			p.MaxAttributeValueLength = limit
		}))
		resp, got := post(t, testClient(t), f.proxyURL+shapes[0].path, fmt.Sprintf(`{"model":%q}`, model), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, body, string(got), "the client gets the response whole")
		span := f.spans(t, 1)[0]
		assertBounded(t, respModel, attr(t, span, semconv.AttrResponseModel).Str(), limit, "gen_ai.response.model")
		assertBounded(t, id, attr(t, span, semconv.AttrResponseID).Str(), limit, "gen_ai.response.id")
		assertAllBounded(t, span, limit)
	})

	t.Run("error status", func(t *testing.T) {
		upstream := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = fmt.Fprintf(w, `{"error":{"type":%q,"message":"slow down"}}`, errType)
		}))
		f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
			p.Upstream.Endpoint = upstream
			p.MaxAttributeValueLength = limit
		}))
		resp, _ := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, nil)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		span := f.spans(t, 1)[0]
		assertBounded(t, errType, attr(t, span, semconv.AttrErrorType).Str(), limit, "error.type")
		assertAllBounded(t, span, limit)
	})
}

// assertAllBounded: no string of the span (name aside) is longer than limit.
func assertAllBounded(t *testing.T, span ptrace.Span, limit int) {
	t.Helper()
	var walk func(k string, v pcommon.Value) bool
	walk = func(k string, v pcommon.Value) bool {
		assert.LessOrEqual(t, len(k), limit, "key %.40s", k)
		switch v.Type() {
		case pcommon.ValueTypeStr:
			assert.LessOrEqual(t, len(v.Str()), limit, "%s", k)
		case pcommon.ValueTypeSlice:
			for i := range v.Slice().Len() {
				walk(k, v.Slice().At(i))
			}
		}
		return true
	}
	span.Attributes().Range(walk)
	for i := range span.Events().Len() {
		span.Events().At(i).Attributes().Range(walk)
	}
}

// TestProxyBoundsFinishReasons: an upstream repeating a finish reason in
// every frame cannot grow the span's list past proxy.MaxFinishReasons.
func TestProxyBoundsFinishReasons(t *testing.T) {
	frame := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\n"
	upstream := newTestServer(t, sseUpstream(strings.Repeat(frame, 3*proxy.MaxFinishReasons)+"data: [DONE]\n\n"))
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = upstream }))
	resp, _ := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	span := f.spans(t, 1)[0]
	assert.Equal(t, proxy.MaxFinishReasons, attr(t, span, semconv.AttrResponseFinishReasons).Slice().Len())
	assert.Len(t, chunkTimes(span), 3*proxy.MaxFinishReasons, "every chunk is still counted")
}

// rawRequest sends target exactly as given (no client-side cleaning) and
// returns the status and body of the answer.
func rawRequest(t *testing.T, addr, method, target, body string) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, testTimeout)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	require.NoError(t, conn.SetDeadline(time.Now().Add(testTimeout)))
	_, err = fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		method, target, addr, len(body), body)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestProxyPathStaysUnderPrefix: with an upstream under a path prefix, a
// request whose path leaves it, after percent-decoding and cleaning, gets 400
// and is not forwarded; legitimate paths, encoded characters included, are
// forwarded as they came.
func TestProxyPathStaysUnderPrefix(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	upstream := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.RequestURI)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"x","choices":[{"message":{"content":"a"},"finish_reason":"stop"}]}`))
	}))
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = upstream + "/openai" }))
	addr := f.rcv.addrs["proxy"].String()

	for _, target := range []string{
		"/../admin",
		"/v1/../../admin",
		"/v1/%2e%2e/%2e%2e/admin",
		"/v1/%2E%2E/%2e%2E/admin",
		"/v1/..%2f..%2fadmin",
		"/v1/%252e%252e/%252e%252e/admin",
		"/v1/%25252e%25252e/%25252e%25252e/admin",
		"/v1/..\\..\\admin",
		"/v1/..%5c..%5cadmin",
		"/..",
		"/../openai-admin/x",
		"/v1/chat/%2e%2e/%2e%2e/%2e%2e/admin/chat/completions",
		"/v1/%252525252e", // still encoded after the rounds the check peels off
	} {
		t.Run(target, func(t *testing.T) {
			status, body := rawRequest(t, addr, http.MethodPost, target, shapes[0].body)
			assert.Equal(t, http.StatusBadRequest, status)
			assert.JSONEq(t, `{"type":"error","error":{"type":"bad_request","message":"the request path leaves the upstream's path"}}`, body)
		})
	}
	mu.Lock()
	assert.Empty(t, seen, "nothing was forwarded")
	mu.Unlock()

	for _, tc := range []struct{ method, target, upstream string }{
		{http.MethodPost, "/v1/chat/completions", "/openai/v1/chat/completions"},
		{http.MethodGet, "/v1/models/ft%3Agpt-4o%3Aacme%3A1", "/openai/v1/models/ft%3Agpt-4o%3Aacme%3A1"},
		{http.MethodGet, "/v1/files/a%20b%2Fc", "/openai/v1/files/a%20b%2Fc"},
		{http.MethodGet, "/v1/files/a..b", "/openai/v1/files/a..b"},
		{http.MethodGet, "/v1/./models/../models", "/openai/v1/./models/../models"},
		{http.MethodGet, "/v1/files/100%25", "/openai/v1/files/100%25"},
		{http.MethodGet, "/", "/openai/"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			status, body := rawRequest(t, addr, tc.method, tc.target, "")
			assert.Equal(t, http.StatusOK, status, body)
			mu.Lock()
			defer mu.Unlock()
			require.NotEmpty(t, seen)
			assert.Equal(t, tc.upstream, seen[len(seen)-1])
		})
	}
}

// TestProxyPathAtRoot: an upstream without a path prefix leaves nothing to
// escape from; requests are forwarded as they came.
func TestProxyPathAtRoot(t *testing.T) {
	seen := make(chan string, 1)
	upstream := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.RequestURI
		w.WriteHeader(http.StatusNoContent)
	}))
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = upstream }))
	status, _ := rawRequest(t, f.rcv.addrs["proxy"].String(), http.MethodGet, "/x/../v1/models", "")
	assert.Equal(t, http.StatusNoContent, status)
	assert.Equal(t, "/x/../v1/models", <-seen)
}

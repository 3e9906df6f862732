// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/streamstall/streamstall/internal/semconv"
)

// hostileGuard is a guarded proxy in front of a primary and an alternate
// of the test's own, each counting the requests it got.
type hostileGuard struct {
	proxyURL           string
	sink               *consumertest.TracesSink
	primary, alternate atomic.Int64
}

func newHostileGuard(t *testing.T, primary, alternate http.HandlerFunc, g func(*GuardConfig)) *hostileGuard {
	t.Helper()
	h := &hostileGuard{sink: new(consumertest.TracesSink)}
	counted := func(n *atomic.Int64, next http.HandlerFunc) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			next(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	pc := cfg.Proxy.GetOrInsertDefault()
	pc.NetAddr.Endpoint = "127.0.0.1:0"
	pc.Upstream.Endpoint = counted(&h.primary, primary)
	gc := pc.Guard.GetOrInsertDefault()
	alt := confighttp.NewDefaultClientConfig()
	alt.Endpoint = counted(&h.alternate, alternate)
	gc.Hedge.Alternates = []AlternateConfig{{ClientConfig: alt, ForwardClientCredentials: true}}
	if g != nil {
		g(gc)
	}
	require.NoError(t, cfg.Validate())
	rcv := startReceiver(t, cfg, h.sink, componenttest.NewNopHost(), tel)
	h.proxyURL = "http://" + rcv.addrs["proxy"].String()
	return h
}

// answer writes body in one piece with the given content type.
func answer(mediaType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", mediaType)
		_, _ = io.WriteString(w, body)
	}
}

// TestGuardTakesAnOllamaAnswerWithoutItsLastLineFeed: an Ollama server (or
// a gateway in front of one) that answers a streaming call with its whole
// answer in one NDJSON line, without the line feed after it, gave a
// complete answer: the span reads it so (the NDJSON framing's last line
// needs no line feed). The guard must read it the same way, not take it
// for a stream that ended before content and fail over to the alternate.
func TestGuardTakesAnOllamaAnswerWithoutItsLastLineFeed(t *testing.T) {
	const whole = `{"model":"llama3","message":{"role":"assistant","content":"Hello there"},"done":true,"done_reason":"stop"}`
	h := newHostileGuard(t,
		answer("application/x-ndjson", whole),
		answer("application/x-ndjson", `{"model":"llama3","message":{"role":"assistant","content":"other"},"done":true}`+"\n"),
		nil)
	resp, got := post(t, testClient(t), h.proxyURL+"/api/chat", `{"model":"llama3","messages":[{"role":"user","content":"hi"}]}`, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, whole, string(got), "the client got the primary's answer")
	assert.Zero(t, h.alternate.Load(), "the alternate was not asked")
	span := (&fixture{sink: h.sink}).spans(t, 1)[0]
	_, failed := span.Attributes().Get(semconv.AttrErrorType)
	assert.False(t, failed, "a complete answer")
	assert.Len(t, chunkTimes(span), 1)
}

var _ = strings.Repeat

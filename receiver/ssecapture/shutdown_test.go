// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/sse"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

// startShutdownReceiver starts a proxy in front of fakellm with the given
// shutdown_timeout, without the fixture's cleanup: the tests shut it down.
func startShutdownReceiver(t *testing.T, timeout time.Duration) (*sseCaptureReceiver, *fakellm.Server, *consumertest.TracesSink) {
	t.Helper()
	fake, err := fakellm.New(fakellm.Config{})
	require.NoError(t, err)
	upstream := newTestServer(t, fake)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	p := cfg.Proxy.GetOrInsertDefault()
	p.NetAddr.Endpoint = "127.0.0.1:0"
	p.Upstream.Endpoint = upstream
	p.ShutdownTimeout = timeout
	require.NoError(t, cfg.Validate())
	sink := new(consumertest.TracesSink)
	r, err := NewFactory().CreateTraces(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	rcv := r.(*sseCaptureReceiver)
	require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))
	return rcv, fake, sink
}

// openStream starts a chat stream scripted by s and reads it until n
// content chunks arrived; it returns the still open response.
func openStream(t *testing.T, rcv *sseCaptureReceiver, s fakellm.Script, n int) (*http.Response, *sse.Reader) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, "http://"+rcv.addrs["proxy"].String()+shapes[0].path, strings.NewReader(shapes[0].body))
	require.NoError(t, err)
	req.Header = scriptHeader(t, s)
	resp, err := testClient(t).Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	r := sse.NewReader(resp.Body)
	for got := 0; got < n; {
		ev, err := r.Next()
		require.NoError(t, err)
		if f, _ := llmstream.Classify(llmstream.ShapeChatCompletions, &ev); f.Kind == llmstream.KindContent {
			got++
		}
	}
	return resp, r
}

// TestShutdownEndsStreamsAfterTimeout: a stream still open when
// shutdown_timeout runs out is ended; Shutdown returns soon after the
// timeout, and the span arrives with error.type=shutdown and the chunks
// seen so far.
func TestShutdownEndsStreamsAfterTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	rcv, fake, sink := startShutdownReceiver(t, timeout)
	_, r := openStream(t, rcv, fakellm.Script{TTFTMillis: 1, GapsMillis: []float64{1, 1, 60000}}, 3)

	start := time.Now()
	require.NoError(t, rcv.Shutdown(context.Background()), "ending streams at shutdown_timeout is no error")
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, timeout, "the stream had its shutdown_timeout")
	assert.Less(t, took, timeout+3*time.Second, "and not much more")

	for {
		_, err := r.Next()
		if err != nil {
			assert.NotErrorIs(t, err, io.EOF, "the client sees the stream cut, not ended")
			break
		}
	}
	reqs, err := fake.WaitFor(testContext(t), 1)
	require.NoError(t, err)
	assert.True(t, reqs[0].Disconnected, "the upstream request was cancelled")

	require.Equal(t, 1, sink.SpanCount(), "the span was delivered before Shutdown returned")
	span := sink.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	assert.Equal(t, "shutdown", attr(t, span, semconv.AttrErrorType).Str())
	assert.Equal(t, ptrace.StatusCodeError, span.Status().Code())
	assert.Equal(t, "the collector shut down before the response ended", span.Status().Message())
	assert.Len(t, chunkTimes(span), 3, "the chunks seen before the end")
	assert.Equal(t, int64(http.StatusOK), attr(t, span, semconv.AttrHTTPStatusCode).Int())
}

// TestShutdownWaitsForStreams: a stream that ends within shutdown_timeout
// ends as it would have, and Shutdown returns once it did.
func TestShutdownWaitsForStreams(t *testing.T) {
	rcv, _, sink := startShutdownReceiver(t, 10*time.Second)
	resp, _ := openStream(t, rcv, fakellm.Script{TTFTMillis: 1, GapsMillis: []float64{1, 400}}, 2)
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(resp.Body)
		done <- b
	}()

	start := time.Now()
	require.NoError(t, rcv.Shutdown(context.Background()))
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Contains(t, string(<-done), "[DONE]", "the client got the whole stream")
	require.Equal(t, 1, sink.SpanCount())
	span := sink.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	_, hasErr := span.Attributes().Get(semconv.AttrErrorType)
	assert.False(t, hasErr)
	assert.Len(t, chunkTimes(span), 3)
}

// TestShutdownBeforeUpstreamAnswers: a request still waiting for the
// upstream's headers when the timeout runs out gets 503 and a span.
func TestShutdownBeforeUpstreamAnswers(t *testing.T) {
	upstream := newTestServer(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server notices the proxy leaving
		<-r.Context().Done()               // never answers
	}))
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	p := cfg.Proxy.GetOrInsertDefault()
	p.NetAddr.Endpoint = "127.0.0.1:0"
	p.Upstream.Endpoint = upstream
	p.ShutdownTimeout = 200 * time.Millisecond
	sink := new(consumertest.TracesSink)
	r, err := NewFactory().CreateTraces(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	rcv := r.(*sseCaptureReceiver)
	require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))

	type result struct {
		status int
		body   string
		err    error
	}
	got := make(chan result, 1)
	client := testClient(t)
	go func() {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+rcv.addrs["proxy"].String()+shapes[0].path, strings.NewReader(shapes[0].body))
		if err != nil {
			got <- result{err: err}
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			got <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		got <- result{status: resp.StatusCode, body: string(b)}
	}()
	require.Eventually(t, func() bool { return rcv.proxy.InFlight() == 1 }, 5*time.Second, time.Millisecond)
	start := time.Now()
	require.NoError(t, rcv.Shutdown(context.Background()))
	assert.GreaterOrEqual(t, time.Since(start), p.ShutdownTimeout)
	require.Equal(t, 1, sink.SpanCount())
	span := sink.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	assert.Equal(t, "shutdown", attr(t, span, semconv.AttrErrorType).Str())
	res := <-got
	if res.err == nil { // else the connection was closed before the answer was read
		assert.Equal(t, http.StatusServiceUnavailable, res.status)
		assert.Contains(t, res.body, `"shutdown"`)
	}
}

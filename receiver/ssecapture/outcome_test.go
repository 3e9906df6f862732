// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

// sseUpstream answers every request with the given SSE body, flushed, and
// ends the response cleanly.
func sseUpstream(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(body))
	})
}

// TestProxyStreamOutcomes: how the end of a cleanly closed stream settles
// the span's status.
func TestProxyStreamOutcomes(t *testing.T) {
	tests := []struct {
		name    string
		shape   int
		body    string
		chunks  int
		errType string
	}{
		{
			name: "no terminal frame", shape: 0, chunks: 2, errType: "stream_truncated",
			body: "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n",
		},
		{
			name: "finish reason without [DONE]", shape: 0, chunks: 1,
			body: "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
		},
		{
			name: "anthropic error mid-stream", shape: 3, chunks: 1, errType: "overloaded_error",
			body: "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n" +
				"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
		},
		{
			name: "responses failed", shape: 2, chunks: 1, errType: "server_error",
			body: "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\n\n" +
				"event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"x\"}}}\n\n",
		},
		{
			name: "unterminated last event", shape: 0, chunks: 1, errType: "stream_truncated",
			body: "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			upstream := newTestServer(t, sseUpstream(tt.body))
			f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = upstream }))
			resp, got := post(t, testClient(t), f.proxyURL+shapes[tt.shape].path, shapes[tt.shape].body, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, tt.body, string(got), "the client gets the stream as sent")
			span := f.spans(t, 1)[0]
			assert.Len(t, chunkTimes(span), tt.chunks)
			if tt.errType == "" {
				assert.Equal(t, ptrace.StatusCodeUnset, span.Status().Code())
				_, ok := span.Attributes().Get(semconv.AttrErrorType)
				assert.False(t, ok)
				return
			}
			assert.Equal(t, ptrace.StatusCodeError, span.Status().Code())
			assert.Equal(t, tt.errType, attr(t, span, semconv.AttrErrorType).Str())
			assert.NotContains(t, span.Status().Message(), "Overloaded", "provider messages are not quoted")
		})
	}
}

// TestProxyOversizedFrameSkipped: a frame past the SSE parser's size limit
// (one 20 MB data line) reaches the client byte for byte; telemetry skips it,
// counts it, goes on counting the chunks after it and sees [DONE], so the
// span ends as the stream did.
func TestProxyOversizedFrameSkipped(t *testing.T) {
	chunk := func(s string) string { return "data: {\"choices\":[{\"delta\":{\"content\":\"" + s + "\"}}]}\n\n" }
	var body strings.Builder
	body.WriteString(chunk("a") + chunk("b"))
	body.WriteString("data: {\"choices\":[{\"delta\":{\"content\":\"")
	body.WriteString(strings.Repeat("x", 20<<20))
	body.WriteString("\"}}]}\n\n")
	body.WriteString(chunk("c") + chunk("d") + chunk("e") + chunk("f") + "data: [DONE]\n\n")
	upstream := newTestServer(t, sseUpstream(body.String()))
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = upstream }))
	resp, got := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, got, body.Len())
	assert.Equal(t, body.String(), string(got), "the client gets the stream as sent")

	span := f.spans(t, 1)[0]
	assert.Len(t, chunkTimes(span), 6, "the chunks before and after the oversized frame")
	assert.Equal(t, int64(1), attr(t, span, semconv.AttrOversizedFrames).Int())
	_, hasErr := span.Attributes().Get(semconv.AttrErrorType)
	assert.False(t, hasErr, "the stream completed")
	assert.Equal(t, ptrace.StatusCodeUnset, span.Status().Code())
}

// TestProxyNoOversizedAttribute: an ordinary stream has no
// llm.stream.oversized_frames attribute.
func TestProxyNoOversizedAttribute(t *testing.T) {
	upstream := newTestServer(t, sseUpstream("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n"))
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = upstream }))
	resp, _ := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	span := f.spans(t, 1)[0]
	_, ok := span.Attributes().Get(semconv.AttrOversizedFrames)
	assert.False(t, ok)
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/streamstall/streamstall/internal/semconv"
)

// heartbeatCase is an API whose upstream, after one content chunk, sends
// only frames without content: the heartbeats gateways and models send
// (empty deltas, pings, usage-only chunks, progress events).
type heartbeatCase struct {
	name, path, body, mediaType string
	content                     string
	heartbeats                  []string
	// stallFrame is what the guard's error frame holds.
	stallFrame string
}

var heartbeatCases = []heartbeatCase{
	{
		name: "chat", path: "/v1/chat/completions", mediaType: "text/event-stream",
		body:    `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		content: `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n",
		heartbeats: []string{
			`data: {"id":"c1","choices":[{"index":0,"delta":{"content":""}}]}` + "\n\n",
			`data: {"id":"c1","choices":[{"index":0,"delta":{}}]}` + "\n\n",
			`data: {"id":"c1","choices":[],"usage":null}` + "\n\n",
			"event: ping\ndata: {}\n\n",
		},
		stallFrame: `"code":"stall_timeout"`,
	},
	{
		name: "responses", path: "/v1/responses", mediaType: "text/event-stream",
		body:    `{"model":"gpt-4o","stream":true,"input":"hi"}`,
		content: "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\",\"sequence_number\":1}\n\n",
		heartbeats: []string{
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"\"}\n\n",
			"event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"response\":{\"id\":\"r1\"}}\n\n",
			"event: response.web_search_call.searching\ndata: {\"type\":\"response.web_search_call.searching\"}\n\n",
		},
		stallFrame: "stream stalled",
	},
	{
		name: "messages", path: "/v1/messages", mediaType: "text/event-stream",
		body:    `{"model":"claude-x","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		content: "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
		heartbeats: []string{
			"event: ping\ndata: {\"type\": \"ping\"}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\"}}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
		},
		stallFrame: "event: error",
	},
	{
		name: "gemini", path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", mediaType: "text/event-stream",
		body:    `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
		content: `data: {"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"}}]}` + "\r\n\r\n",
		heartbeats: []string{
			`data: {"candidates":[{"content":{"parts":[{"text":""}],"role":"model"}}]}` + "\r\n\r\n",
			`data: {"usageMetadata":{"promptTokenCount":3}}` + "\r\n\r\n",
		},
		stallFrame: "DEADLINE_EXCEEDED",
	},
	{
		name: "ollama", path: "/api/chat", mediaType: "application/x-ndjson",
		body:    `{"model":"llama3","messages":[{"role":"user","content":"hi"}]}`,
		content: `{"model":"llama3","message":{"role":"assistant","content":"Hi"},"done":false}` + "\n",
		heartbeats: []string{
			`{"model":"llama3","message":{"role":"assistant","content":""},"done":false}` + "\n",
		},
		stallFrame: `{"error":"stream stalled`,
	},
}

// TestHeartbeatsDoNotDodgeTheWatchdog: for every API, an upstream that
// after its first content chunk sends only frames without content (empty
// deltas, pings, usage-only chunks, progress events), many times a second,
// is ended at stall_timeout like a silent one: the client gets the API's
// error frame after the content, the upstream request is closed, and the
// span says stall_timeout.
func TestHeartbeatsDoNotDodgeTheWatchdog(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, tc := range heartbeatCases {
		t.Run(tc.name, func(t *testing.T) {
			closed := make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", tc.mediaType)
				_, _ = io.WriteString(w, tc.content)
				w.(http.Flusher).Flush()
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for i := 0; ; i++ {
					select {
					case <-r.Context().Done():
						close(closed)
						return
					case <-time.After(30 * time.Second):
						return
					case <-tick.C:
						_, _ = io.WriteString(w, tc.heartbeats[i%len(tc.heartbeats)])
						w.(http.Flusher).Flush()
					}
				}
			}))
			t.Cleanup(up.Close)
			sink := new(consumertest.TracesSink)
			tel := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			pc := cfg.Proxy.GetOrInsertDefault()
			pc.NetAddr.Endpoint = "127.0.0.1:0"
			pc.Upstream.Endpoint = up.URL
			pc.Guard.GetOrInsertDefault().StallTimeout = AutoDuration(timeout)
			require.NoError(t, cfg.Validate())
			rcv := startReceiver(t, cfg, sink, componenttest.NewNopHost(), tel)

			req, err := http.NewRequestWithContext(testContext(t), http.MethodPost,
				"http://"+rcv.addrs["proxy"].String()+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err, "a clean end of the response")
			require.NoError(t, resp.Body.Close())
			assert.Less(t, time.Since(start), 20*time.Second, "the heartbeats did not keep it open")
			assert.True(t, strings.HasPrefix(string(got), tc.content), "the content first")
			assert.Contains(t, string(got), tc.stallFrame, "then the API's error frame")
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("the upstream request was not closed")
			}
			span := (&fixture{sink: sink}).spans(t, 1)[0]
			assert.Equal(t, "stall_timeout", attr(t, span, semconv.AttrErrorType).Str())
			assert.Len(t, chunkTimes(span), 1)
		})
	}
}

// TestFloodOfPingsDoesNotDodgeTheWatchdog: an upstream that after its
// first content chunk sends comments as fast as the connection takes them
// keeps a read on its way to the client nearly all the time; only one that
// arrived before the deadline may postpone the cut, so the watchdog ends
// the stream, with the frame, long before the flood ends.
func TestFloodOfPingsDoesNotDodgeTheWatchdog(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ping := strings.Repeat(": ping\n\n", 512)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		flood := time.After(60 * time.Second)
		for {
			select {
			case <-r.Context().Done():
				return
			case <-flood:
				return
			default:
			}
			if _, err := io.WriteString(w, ping); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(up.Close)
	sink := new(consumertest.TracesSink)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	pc := cfg.Proxy.GetOrInsertDefault()
	pc.NetAddr.Endpoint = "127.0.0.1:0"
	pc.Upstream.Endpoint = up.URL
	pc.Guard.GetOrInsertDefault().StallTimeout = AutoDuration(timeout)
	require.NoError(t, cfg.Validate())
	rcv := startReceiver(t, cfg, sink, componenttest.NewNopHost(), tel)

	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, "http://"+rcv.addrs["proxy"].String()+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	tail := make([]byte, 0, 64<<10)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			tail = append(tail[:0], buf[:n]...)
		}
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "a clean end, within the test's context: not the flood's minute")
	}
	require.NoError(t, resp.Body.Close())
	assert.Contains(t, string(tail), "stream stalled", "the last read holds the guard's frame")
	span := (&fixture{sink: sink}).spans(t, 1)[0]
	assert.Equal(t, "stall_timeout", attr(t, span, semconv.AttrErrorType).Str())
}

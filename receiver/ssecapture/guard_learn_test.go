// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/streamstall/streamstall/internal/semconv"
)

// longStream streams n content chunks a few tens of microseconds apart
// (each flushed),
// with a pause of pause before the chunks at the indexes in pausesAt, then
// [DONE]: a long answer whose upstream paused once, briefly.
func longStream(n int, pause time.Duration, pausesAt ...int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		_, _ = fmt.Fprint(w, `data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`+"\n\n")
		fl.Flush()
		for i := range n {
			for _, at := range pausesAt {
				if i == at {
					time.Sleep(pause)
				}
			}
			_, _ = fmt.Fprint(w, `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"tok "}}]}`+"\n\n")
			fl.Flush()
			time.Sleep(20 * time.Microsecond)
		}
		_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
		fl.Flush()
	}
}

// learnedStallTimeout runs calls streams of longStream through a
// guard with stall_timeout auto and returns the stall timeout in force on
// one more call, as its span records it.
func learnedStallTimeout(t *testing.T, maxChunkEvents, calls int) float64 {
	t.Helper()
	up := newTestServer(t, longStream(1200, 150*time.Millisecond, 600))
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	pc := cfg.Proxy.GetOrInsertDefault()
	pc.NetAddr.Endpoint = "127.0.0.1:0"
	pc.Upstream.Endpoint = up
	pc.ChunkEvents.MaxChunkEvents = maxChunkEvents
	pc.ChunkEvents.KeepGapsAbove = 50 * time.Millisecond
	gc := pc.Guard.GetOrInsertDefault()
	gc.StallTimeout = autoDuration
	gc.AutoStall = AutoStallConfig{Multiple: 10, Floor: 400 * time.Millisecond, Ceiling: time.Minute, MinSamples: 5}
	require.NoError(t, cfg.Validate())
	sink := new(consumertest.TracesSink)
	rcv := startReceiver(t, cfg, sink, componenttest.NewNopHost(), nil)
	url := "http://" + rcv.addrs["proxy"].String() + "/v1/chat/completions"
	client := testClient(t)
	for i := range calls + 1 {
		resp, body := post(t, client, url, `{"model":"gpt-4o","stream":true,"messages":[]}`, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, string(body), "[DONE]", "call %d ended whole", i)
	}
	spans := (&fixture{sink: sink}).spans(t, calls+1)
	last := spans[calls]
	_, cut := last.Attributes().Get(semconv.AttrErrorType)
	require.False(t, cut)
	return attr(t, last, semconv.AttrStallTimeoutMs).Double()
}

// TestGuardElidedChunksTeachTheirGaps: stall_timeout auto is multiple
// times the model's learned p99.9 gap between content chunks of the
// proxy's own streams, read off the span's kept chunks. Past
// max_chunk_events almost every short gap is elided; were the gaps across
// elided chunks left out, a long stream would teach its few long gaps and
// hardly any of its short ones. Five streams of 1,200 chunks with one pause
// of 150 ms each (5 long gaps of 6,000: a p99.9 far below the floor of
// 400 ms) teach the floor, their spans bounded (max_chunk_events 256) or
// not; left out, the elided gaps would make it 1.5 s.
func TestGuardElidedChunksTeachTheirGaps(t *testing.T) {
	whole := learnedStallTimeout(t, 16384, 5)
	elided := learnedStallTimeout(t, 256, 5)
	assert.InDelta(t, 400, whole, 1, "every gap seen: the floor")
	assert.InDelta(t, whole, elided, 1,
		"the same streams, their spans bounded by max_chunk_events, teach the same stall timeout")
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
)

// TestProxyLongStreamIsBounded: a stream of 20,000 chunks becomes a span of
// at most max_chunk_events chunk events that counts every chunk, says how
// many it elided, and whose figures are those of the whole stream.
func TestProxyLongStreamIsBounded(t *testing.T) {
	const n = 20_000
	frame := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
	upstream := newTestServer(t, sseUpstream(strings.Repeat(frame, n)+"data: [DONE]\n\n"))
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
		p.Upstream.Endpoint = upstream
		p.ChunkEvents.MaxChunkEvents = 64
	}))
	resp, got := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, got, n*len(frame)+len("data: [DONE]\n\n"), "the client gets every byte")

	span := f.spans(t, 1)[0]
	kept := eventCount(span, semconv.EventChunk)
	assert.LessOrEqual(t, kept, 64)
	assert.Equal(t, int64(n-kept), attr(t, span, semconv.AttrChunkEventsElided).Int())
	var c figures.Chunks
	require.NoError(t, figures.NewChunkReader(figures.DefaultChunkEventsConfig()).Read(span, &c))
	assert.Equal(t, int64(n), c.Count())
	fig, _ := c.Derive(int64(2*time.Second), nil)
	assert.Equal(t, n, fig.ChunkCount)
	assert.Less(t, (&ptrace.ProtoMarshaler{}).TracesSize(f.sink.AllTraces()[0]), 16<<10, "a few KiB of OTLP")
}

// TestProxyFrameBudgetIsShared: streams that each hold half a 2 MiB line
// at once draw on one budget of 3 MiB; the streams it cannot hold get that
// frame skipped and counted, every client gets every byte, and the budget
// is whole again once the streams end.
func TestProxyFrameBudgetIsShared(t *testing.T) {
	const streams = 6
	head := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("x", 1<<20)
	tail := strings.Repeat("y", 1<<20) + "\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\ndata: [DONE]\n\n"
	release := make(chan struct{})
	upstream := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(head))
		w.(http.Flusher).Flush()
		<-release
		_, _ = w.Write([]byte(tail))
	}))
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
		p.Upstream.Endpoint = upstream
		p.FrameBufferBytes = 3 << 20
	}))
	var wg, heads sync.WaitGroup
	client := testClient(t)
	for range streams {
		heads.Add(1)
		wg.Go(func() {
			req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, f.proxyURL+shapes[0].path, strings.NewReader(shapes[0].body))
			if !assert.NoError(t, err) {
				heads.Done()
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if !assert.NoError(t, err) {
				heads.Done()
				return
			}
			defer func() { _ = resp.Body.Close() }()
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			got := make([]byte, len(head))
			_, err = io.ReadFull(resp.Body, got)
			heads.Done() // the proxy has read this stream's half line: held or skipped
			assert.NoError(t, err)
			rest, err := io.ReadAll(resp.Body)
			assert.NoError(t, err)
			assert.Equal(t, head+tail, string(got)+string(rest), "the client gets the stream as sent")
		})
	}
	// Every stream has its half line before any gets the rest, or a late
	// one would find the budget free again. Two streams' half lines fill
	// most of the budget; the others cannot hold theirs.
	heads.Wait()
	require.Eventually(t, func() bool { return f.rcv.proxy.FrameBufferBytes() >= 2<<20-256<<10 }, 10*time.Second, 10*time.Millisecond)
	assert.LessOrEqual(t, f.rcv.proxy.FrameBufferBytes(), int64(3<<20))
	close(release)
	wg.Wait()
	oversized := int64(0)
	for _, span := range f.spans(t, streams) {
		skipped := int64(0)
		if v, ok := span.Attributes().Get(semconv.AttrOversizedFrames); ok {
			skipped = v.Int()
		}
		oversized += skipped
		assert.Equal(t, 3-int(skipped), eventCount(span, semconv.EventChunk), "the small chunks around it are counted, and the large one when it was held")
	}
	assert.GreaterOrEqual(t, oversized, int64(streams-3), "the streams past the budget skipped their large frame")
	assert.Zero(t, f.rcv.proxy.FrameBufferBytes(), "every stream gave its buffers back")
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/semconv"
)

// framingStreams streams hold one unterminated frame of framingFrameBytes
// each, all at once: past the per-stream cap's reach (8 MiB a frame), only
// proxy.frame_buffer_bytes (64 MiB by default) bounds them together.
const (
	framingStreams    = 200
	framingFrameBytes = 8<<20 - 4<<10
)

// framingPeakBudget bounds the rise of the collector's peak RSS in each case
// of TestHostileFramingBytes. Before NDJSON lines and JSON array elements
// drew on the frame budget, these 200 streams raised it to 1.62 GB
// (NDJSON) and 1.47 GB (JSON array); SSE, which drew on it, to 284 MB.
// Drawing on it, each framing rises by 240 to 320 MiB (the budget, a free
// 64 KiB a stream, and the garbage of growing buffers until the GC runs).
const framingPeakBudget = 512 << 20

// TestHostileFramingBytes: Ollama's NDJSON and Gemini's JSON array are
// bounded as SSE is (measured here the same way): 200 streams that each leave an ~8 MiB frame
// unterminated cost the collector the frame budget and a free 64 KiB a
// stream, not the frames' size; every byte still reaches its client, and
// the frames the budget cannot hold are counted on the spans.
func TestHostileFramingBytes(t *testing.T) {
	fill := strings.Repeat("x", framingFrameBytes)
	for _, tt := range []struct {
		name, path, span  string
		mediaType         string
		first, unfinished string
	}{
		{
			"sse", "/v1/chat/completions", "chat sse-long-line", "text/event-stream",
			chunkFrame("sse-long-line", "a"),
			`data: {"choices":[{"delta":{"content":"` + fill,
		},
		{
			"ndjson", "/api/chat", "chat ollama-long-line", "application/x-ndjson",
			`{"model":"ollama-long-line","message":{"role":"assistant","content":"a"},"done":false}` + "\n",
			`{"model":"ollama-long-line","message":{"role":"assistant","content":"` + fill,
		},
		{
			"json array", "/v1beta/models/gemini-long-element:streamGenerateContent", "generate_content gemini-long-element", "application/json",
			`[{"candidates":[{"content":{"role":"model","parts":[{"text":"a"}]}}]}`,
			`,{"candidates":[{"content":{"role":"model","parts":[{"text":"` + fill,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startHostileStack(t)
			model := tt.span[strings.LastIndexByte(tt.span, ' ')+1:]
			s.up.script(model, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tt.mediaType)
				flushed(w, tt.first)
				// Sent in pieces, as a network would, and never ended.
				for i := 0; i < len(tt.unfinished); i += 64 << 10 {
					flushed(w, tt.unfinished[i:min(i+64<<10, len(tt.unfinished))])
				}
			})
			start := time.Now()
			var wg sync.WaitGroup
			replies := make([]reply, framingStreams)
			for i := range replies {
				wg.Go(func() {
					replies[i] = send(t, http.MethodPost, "http://"+s.proxy+tt.path, map[string]string{
						"Content-Type": "application/json", "X-Collector-Token": "Bearer collector-secret",
					}, strings.NewReader(fmt.Sprintf(`{"model":%q,"stream":true}`, model)))
				})
			}
			wg.Wait()
			for _, r := range replies {
				require.Equal(t, http.StatusOK, r.status)
				assert.Len(t, r.body, len(tt.first)+len(tt.unfinished), "the client gets every byte")
			}
			var oversized, chunks int64
			eventually(t, time.Minute, "the spans at the sink", func() error {
				n := 0
				oversized, chunks = 0, 0
				for _, sp := range s.sink.Spans() {
					if sp.Name() != tt.span {
						continue
					}
					n++
					if v, ok := sp.Span.Attributes().Get(semconv.AttrOversizedFrames); ok {
						oversized += v.Int()
					}
					if v, ok := sp.Span.Attributes().Get(semconv.AttrChunkCount); ok {
						chunks += v.Int()
					}
				}
				if n < framingStreams {
					return errNotYet
				}
				return nil
			})
			peak, err := s.col.PeakRSS()
			require.NoError(t, err)
			t.Logf("%d streams in %s; %d of their unterminated frames skipped past frame_buffer_bytes; peak RSS %d MiB (+%d MiB)",
				framingStreams, time.Since(start).Round(time.Millisecond), oversized, peak>>20, (peak-s.baseline)>>20)
			assert.Equal(t, int64(framingStreams), chunks, "each stream's first frame is its one chunk")
			assert.Positive(t, oversized, "the budget cannot hold 200 frames of 8 MiB")
			assert.Less(t, peak-s.baseline, int64(framingPeakBudget))
		})
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// The guard reads the frames of every attempt as the tee does, whatever the
// response's content coding and however much comes before content, and
// what attempts hold before content shares the receiver's frame budget
// (docs/security.md, "The guard's view of a stream"). A hostile upstream of
// the test's own stands behind the ocb-built collector, as primary and as
// alternate.
const guardFramesConfig = `
receivers:
  sse_capture:
    proxy:
      endpoint: 127.0.0.1:${PROXY}
      upstream:
        endpoint: ${PRIMARY}
      frame_buffer_bytes: ${BUDGET}
      guard:
        stall_timeout: 1s
        ttft_timeout: 1s
        hedge:
          delay: 300ms
          max_attempts: 5
          alternates:
            - endpoint: ${ALTERNATE}
        models:
          # Time for all five attempts to start and hold.
          - model: frames-hold
            ttft_timeout: 3s
exporters:
` + sinkExporter + `service:
  pipelines:
    traces:
      receivers: [sse_capture]
      exporters: [otlp_http]
`

// framesBudget is the proxy's frame budget in the test: held attempts and
// unfinished frames of every stream together.
const framesBudget = 32 << 20

// gzipWriter writes a gzip-coded event stream, flushed after every write as
// streaming servers do (httpx, the Node SDKs ask for gzip by default).
type gzipWriter struct {
	w  http.ResponseWriter
	zw *gzip.Writer
}

func newGzipStream(w http.ResponseWriter) *gzipWriter {
	w.Header().Set("Content-Encoding", "gzip")
	w.WriteHeader(http.StatusOK)
	return &gzipWriter{w: w, zw: gzip.NewWriter(w)}
}

func (g *gzipWriter) send(s string) {
	_, _ = io.WriteString(g.zw, s)
	_ = g.zw.Flush()
	g.w.(http.Flusher).Flush()
}

func (g *gzipWriter) close() {
	_ = g.zw.Close()
	g.w.(http.Flusher).Flush()
}

// rawStream posts a streaming chat call asking for gzip and returns the
// response's bytes as they came (no transparent decoding), with the time
// the first byte arrived.
func rawStream(ctx context.Context, t *testing.T, proxy, path, body string) (int, []byte, time.Time) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxy+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept-Encoding", "gzip, deflate") // httpx's default: net/http then leaves the body coded
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var got bytes.Buffer
	first := make([]byte, 1)
	n, err := resp.Body.Read(first)
	firstAt := time.Now()
	got.Write(first[:n])
	if err == nil {
		_, err = io.Copy(&got, resp.Body)
	}
	require.NoError(t, err)
	return resp.StatusCode, got.Bytes(), firstAt
}

func gunzipAll(t *testing.T, b []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	out, err := io.ReadAll(zr)
	require.NoError(t, err, "the client's gzip stream is whole, trailer and all")
	return string(out)
}

func chatBody(model string) string {
	return fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, model)
}

// waitModelSpans waits for n spans of model and returns them.
func waitModelSpans(t *testing.T, s *harness.Sink, model string, n int) []ptrace.Span {
	t.Helper()
	var out []ptrace.Span
	eventually(t, 20*time.Second, fmt.Sprintf("%d spans of %s", n, model), func() error {
		out = out[:0]
		for _, sp := range s.Spans() {
			if v, ok := sp.Attributes().Get(semconv.AttrRequestModel); ok && v.Str() == model {
				out = append(out, sp.Span)
			}
		}
		if len(out) < n {
			return fmt.Errorf("%d of %d: %w", len(out), n, errNotYet)
		}
		return nil
	})
	return out
}

func chunkEvents(sp ptrace.Span) int {
	n := 0
	for i := range sp.Events().Len() {
		if sp.Events().At(i).Name() == semconv.EventChunk {
			n++
		}
	}
	return n
}

func TestGuardReadsDecodedFrames(t *testing.T) {
	sink := startSink(t)
	primary, alternate := startUpstream(t), startUpstream(t)
	proxyPort := freePort(t)
	col := collector(t, fill(guardFramesConfig, "PROXY", proxyPort, "PRIMARY", primary.srv.URL, "ALTERNATE", alternate.srv.URL,
		"BUDGET", framesBudget, "SINK", sink.URL))
	proxy := fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	altCalls := func() int { return len(alternate.seen()) }

	// Row 1: the first content chunk of a gzip stream commits it, as on a
	// plain stream: no hedge, no 504 under ttft_timeout while content flows,
	// and the client gets the coded bytes as the upstream sent them.
	t.Run("gzip stream commits on its first content chunk", func(t *testing.T) {
		const model = "frames-gzip"
		var lastSent atomic.Int64
		var sent bytes.Buffer
		primary.script(model, func(w http.ResponseWriter, _ *http.Request) {
			g := newGzipStream(w)
			g.zw.Reset(io.MultiWriter(w, &sent))
			g.send(`data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n")
			time.Sleep(30 * time.Millisecond)
			for i := range 20 {
				if i > 0 {
					time.Sleep(100 * time.Millisecond)
				}
				g.send(chunkFrame(model, fmt.Sprintf("t%d ", i)))
			}
			g.send("data: [DONE]\n\n")
			lastSent.Store(time.Now().UnixNano())
			g.close()
		})
		before := altCalls()
		status, got, firstAt := rawStream(ctx, t, proxy, "/v1/chat/completions", chatBody(model))
		require.Equal(t, http.StatusOK, status, "no 504: content flowed within ttft_timeout")
		assert.Equal(t, sent.Bytes(), got, "the client gets the coded bytes, byte for byte")
		assert.Contains(t, gunzipAll(t, got), "t19 ")
		assert.Less(t, firstAt.UnixNano(), lastSent.Load(), "the first byte reached the client before the stream's end")
		assert.Equal(t, before, altCalls(), "no hedge: the primary's content came within the delay")
		sp := waitModelSpans(t, sink, model, 1)
		require.Len(t, sp, 1, "one attempt")
		assert.Empty(t, strAttr(sp[0], semconv.AttrErrorType))
		assert.Equal(t, 20, chunkEvents(sp[0]))
	})

	// Row 1: a gzip or deflate stream that stalls after content ends with
	// the stall frame, in its coding, and the body stays whole.
	for _, coding := range []string{"gzip", "deflate"} {
		t.Run(coding+" stream that stalls gets the stall frame", func(t *testing.T) {
			model := "frames-stall-" + coding
			primary.script(model, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Encoding", coding)
				w.WriteHeader(http.StatusOK)
				var zw interface {
					io.Writer
					Flush() error
				} = gzip.NewWriter(w)
				if coding == "deflate" {
					zw = zlib.NewWriter(w)
				}
				for _, f := range []string{chunkFrame(model, "a"), chunkFrame(model, "b")} {
					_, _ = io.WriteString(zw, f)
					_ = zw.Flush()
					w.(http.Flusher).Flush()
				}
				<-r.Context().Done() // stalled until the guard gives up
			})
			status, got, _ := rawStream(ctx, t, proxy, "/v1/chat/completions", chatBody(model))
			require.Equal(t, http.StatusOK, status)
			var text string
			if coding == "gzip" {
				text = gunzipAll(t, got)
			} else {
				zr, err := zlib.NewReader(bytes.NewReader(got))
				require.NoError(t, err)
				b, err := io.ReadAll(zr)
				require.NoError(t, err, "the client's zlib stream is whole, Adler-32 and all")
				text = string(b)
			}
			head := chunkFrame(model, "a") + chunkFrame(model, "b")
			assert.True(t, strings.HasPrefix(text, head), text)
			assert.Contains(t, text[len(head):], `"stall_timeout"`, "the stall frame follows")
			sp := waitModelSpans(t, sink, model, 1)
			assert.Equal(t, "stall_timeout", strAttr(sp[0], semconv.AttrErrorType))
		})
	}

	// Row 4: past the 1 MiB an attempt may hold before content, the stream
	// is committed and still framed and watched: its stall is ended.
	instructions := strings.Repeat("i", 600_000)
	preambles := []struct {
		name, model, path, body string
		preamble, content       string
	}{
		{
			name: "comments", model: "frames-comments", path: "/v1/chat/completions", body: chatBody("frames-comments"),
			preamble: strings.Repeat(": "+strings.Repeat("x", 1000)+"\n\n", 1600),
		},
		{
			name: "role deltas", model: "frames-roles", path: "/v1/chat/completions", body: chatBody("frames-roles"),
			preamble: strings.Repeat(`data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`+"\n\n", 16000),
			content:  chunkFrame("frames-roles", "late"),
		},
		{
			name: "responses echoing 600 KB of instructions", model: "frames-responses", path: "/v1/responses",
			body: `{"model":"frames-responses","stream":true,"input":"hi"}`,
			preamble: fmt.Sprintf("event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"instructions\":%q}}\n\n", instructions) +
				fmt.Sprintf("event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"sequence_number\":1,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"instructions\":%q}}\n\n", instructions),
		},
	}
	for _, tt := range preambles {
		t.Run("past the held bound, "+tt.name+" are watched", func(t *testing.T) {
			pre := tt.preamble
			primary.script(tt.model, func(w http.ResponseWriter, r *http.Request) {
				flushed(w, pre)
				if tt.content != "" {
					flushed(w, tt.content)
				}
				<-r.Context().Done()
			})
			status, got, _ := rawStream(ctx, t, proxy, tt.path, tt.body)
			require.Equal(t, http.StatusOK, status)
			require.Greater(t, len(got), len(pre))
			assert.Equal(t, pre+tt.content, string(got[:len(pre)+len(tt.content)]), "every byte before the frame")
			assert.Contains(t, string(got[len(pre)+len(tt.content):]), "stall_timeout", "the stall after the bound is ended with the frame")
			sp := waitModelSpans(t, sink, tt.model, 1)
			assert.Equal(t, "stall_timeout", strAttr(sp[0], semconv.AttrErrorType))
		})
	}

	// Row 10: 200 calls of five attempts (a hedge every 300 ms, 3 s to
	// content) that each hold just under 1 MiB before content draw on the
	// frame budget: the attempts it cannot hold are committed with what
	// they hold (every byte reaches the client, and the stall after it is
	// ended), the others end in the 504 of ttft_timeout as without content
	// they should, and memory stays bounded.
	t.Run("held bytes share the frame budget", func(t *testing.T) {
		const model, calls = "frames-hold", 200
		pre := strings.Repeat(": "+strings.Repeat("h", 1000)+"\n\n", 1000) // 1,004,000 bytes: just under 1 MiB
		for _, u := range []*upstream{primary, alternate} {
			u.script(model, func(w http.ResponseWriter, r *http.Request) {
				flushed(w, pre)
				<-r.Context().Done()
			})
		}
		baseline, err := col.PeakRSS()
		require.NoError(t, err)
		var wg sync.WaitGroup
		var committed, timedOut atomic.Int64
		for range calls {
			wg.Go(func() {
				status, got, _ := rawStream(ctx, t, proxy, "/v1/chat/completions", chatBody(model))
				switch {
				case status == http.StatusOK && strings.HasPrefix(string(got), pre) && strings.Contains(string(got[len(pre):]), "stall_timeout"):
					committed.Add(1)
				case status == http.StatusGatewayTimeout && strings.Contains(string(got), "ttft_timeout"):
					timedOut.Add(1)
				default:
					t.Errorf("status %d, %d bytes: %.200q", status, len(got), got)
				}
			})
		}
		wg.Wait()
		peak, err := col.PeakRSS()
		require.NoError(t, err)
		t.Logf("peak RSS %d MiB (+%d MiB over %d calls)", peak>>20, (peak-baseline)>>20, calls)
		t.Logf("%d calls committed by the budget, %d ended at ttft_timeout", committed.Load(), timedOut.Load())
		assert.Positive(t, committed.Load(), "the budget committed the attempts it could not hold")
		// Unbounded, the attempts held 5 x 200 x 1 MiB: 1 to 2 GB of RSS.
		assert.Less(t, peak-baseline, int64(250<<20), "held bytes are bounded by the frame budget")
	})
}

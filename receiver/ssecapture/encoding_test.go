// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"fmt"
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

// codedUpstream streams frames in a content coding through a flushing
// encoder, one flush per frame after its delay, and keeps the coded bytes
// it wrote, the time it flushed each frame and the Accept-Encoding it was
// asked for.
type codedUpstream struct {
	coding string // Content-Encoding sent
	frames []codedFrame
	// raw, when set, is sent as the body instead of encoding frames.
	raw []byte

	mu             sync.Mutex
	sent           bytes.Buffer
	sentAt         []time.Time
	acceptEncoding []string
}

type codedFrame struct {
	after time.Duration
	data  string
}

type flushWriter struct {
	w http.ResponseWriter
	u *codedUpstream
}

func (f flushWriter) Write(p []byte) (int, error) {
	f.u.mu.Lock()
	f.u.sent.Write(p)
	f.u.mu.Unlock()
	return f.w.Write(p)
}

func (u *codedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.acceptEncoding = r.Header.Values("Accept-Encoding")
	u.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Content-Encoding", u.coding)
	w.WriteHeader(http.StatusOK)
	out := flushWriter{w: w, u: u}
	if u.raw != nil {
		for rest := u.raw; len(rest) > 0; {
			n := min(len(rest), 32<<10)
			_, _ = out.Write(rest[:n])
			rest = rest[n:]
		}
		return
	}
	var enc interface {
		io.WriteCloser
		Flush() error
	}
	if u.coding == "gzip" {
		enc = gzip.NewWriter(out)
	} else {
		enc = zlib.NewWriter(out)
	}
	for _, f := range u.frames {
		time.Sleep(f.after)
		_, _ = io.WriteString(enc, f.data)
		_ = enc.Flush()
		u.mu.Lock()
		u.sentAt = append(u.sentAt, time.Now())
		u.mu.Unlock()
		w.(http.Flusher).Flush()
	}
	_ = enc.Close()
}

func (u *codedUpstream) result() ([]byte, []time.Time, []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return bytes.Clone(u.sent.Bytes()), append([]time.Time(nil), u.sentAt...), u.acceptEncoding
}

func chatChunk(text string) string {
	return fmt.Sprintf("data: {\"choices\":[{\"delta\":{\"content\":%q}}]}\n\n", text)
}

// TestProxyCodedStreamFlushedFrameByFrame: gzip and deflate streams from an
// upstream that flushes its encoder after every frame, with two stalls. The
// client asked for the coding and gets the coded bytes as they were sent;
// the proxy decodes each frame as it arrives, so the span's chunk times are
// the upstream's send times and the stalls sit after the same chunks with
// the same lengths.
func TestProxyCodedStreamFlushedFrameByFrame(t *testing.T) {
	const threshold = 200 * time.Millisecond
	gaps := []time.Duration{20, 5, 5, 400, 5, 5, 600, 5}
	for _, coding := range []string{"gzip", "deflate"} {
		t.Run(coding, func(t *testing.T) {
			up := &codedUpstream{coding: coding}
			for i, g := range gaps {
				up.frames = append(up.frames, codedFrame{g * time.Millisecond, chatChunk(fmt.Sprint(i))})
			}
			up.frames = append(up.frames, codedFrame{5 * time.Millisecond, "data: [DONE]\n\n"})
			f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = newTestServer(t, up) }))
			resp, got := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body,
				http.Header{"Accept-Encoding": {"gzip, deflate, br"}})
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, coding, resp.Header.Get("Content-Encoding"))
			sent, sentAt, accepted := up.result()
			assert.Equal(t, []string{"gzip, deflate"}, accepted, "the client's codings the proxy decodes")
			assert.True(t, bytes.Equal(sent, got), "the client gets the coded bytes as sent")

			span := f.spans(t, 1)[0]
			chunks := chunkTimes(span)
			require.Len(t, chunks, len(gaps))
			sentNs := make([]int64, len(gaps))
			for i := range sentNs {
				sentNs[i] = sentAt[i].UnixNano()
			}
			start := int64(span.StartTimestamp())
			want := figures.Derive(start, sentNs, int64(threshold), nil)
			gotF := figures.Derive(start, chunks, int64(threshold), nil)
			require.Equal(t, 2, gotF.StallCount)
			assert.Equal(t, []int{3, 6}, []int{gotF.Stalls[0].AfterChunk, gotF.Stalls[1].AfterChunk})
			// A frame the decoder held back until the next one came would be
			// late by a stall (400 or 600 ms); scheduling on a loaded machine
			// is worth a few ms.
			for i := range chunks {
				assert.InDelta(t, sentNs[i], chunks[i], float64(50*time.Millisecond), "chunk %d", i)
			}
			assert.InDelta(t, want.StallTotal, gotF.StallTotal, float64(50*time.Millisecond))
			_, hasErr := span.Attributes().Get(semconv.AttrErrorType)
			assert.False(t, hasErr)
			_, hasCaptureErr := span.Attributes().Get(semconv.AttrCaptureError)
			assert.False(t, hasCaptureErr)
		})
	}
}

// TestProxyCodedStreamNotCaptured: a coding the proxy does not decode, a
// gzip body that breaks mid-way and a gzip bomb all reach the client byte
// for byte; the span says why capture failed or stopped, keeps the chunks
// decoded before, and does not claim the stream was truncated.
func TestProxyCodedStreamNotCaptured(t *testing.T) {
	var good bytes.Buffer
	zw := gzip.NewWriter(&good)
	_, _ = io.WriteString(zw, chatChunk("a")+chatChunk("b"))
	_ = zw.Flush()
	head := good.Len()
	_, _ = io.WriteString(zw, chatChunk("c")+"data: [DONE]\n\n")
	_ = zw.Close()
	corrupt := bytes.Clone(good.Bytes())
	for i := head; i < len(corrupt); i++ {
		corrupt[i] = 0xff
	}

	var bomb bytes.Buffer
	zw = gzip.NewWriter(&bomb)
	_, _ = io.WriteString(zw, chatChunk("a")+":")
	_, _ = zw.Write(make([]byte, 8<<20))
	_ = zw.Close()

	for _, tt := range []struct {
		name, coding string
		body         []byte
		captureErr   string
		chunks       int
	}{
		{"brotli", "br", []byte("\x1b\x1a\x00\xf8\xa5\x40\xc2\xbe\x03\x00\x01\x02 not decoded"), "unsupported_content_encoding", 0},
		{"corrupt gzip", "gzip", corrupt, "decode_error", 2},
		{"gzip bomb", "gzip", bomb.Bytes(), "decoded_limit", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := &codedUpstream{coding: tt.coding, raw: tt.body}
			f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
				p.Upstream.Endpoint = newTestServer(t, up)
				p.MaxDecodedResponseBytes = 1 << 20
			}))
			resp, got := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body,
				http.Header{"Accept-Encoding": {"gzip, br"}})
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.True(t, bytes.Equal(tt.body, got), "the client gets every byte")
			span := f.spans(t, 1)[0]
			assert.Equal(t, tt.captureErr, attr(t, span, semconv.AttrCaptureError).Str())
			assert.Len(t, chunkTimes(span), tt.chunks)
			_, hasErr := span.Attributes().Get(semconv.AttrErrorType)
			assert.False(t, hasErr, "not stream_truncated: the proxy cannot tell")
			assert.Equal(t, ptrace.StatusCodeUnset, span.Status().Code())
		})
	}
}

// TestProxyAcceptEncodingForwarded: what the upstream is asked for.
func TestProxyAcceptEncodingForwarded(t *testing.T) {
	up := &codedUpstream{coding: "identity", raw: []byte(chatChunk("a") + "data: [DONE]\n\n")}
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = newTestServer(t, up) }))
	for _, tt := range []struct {
		client []string
		want   string
	}{
		{nil, "identity"},
		{[]string{"gzip"}, "gzip"},
		{[]string{"gzip, deflate, br, zstd"}, "gzip, deflate"},
		{[]string{"br"}, "identity"},
		{[]string{"br, identity;q=0"}, "br, identity;q=0"},
	} {
		// Go's client asks for gzip itself when the request has no
		// Accept-Encoding; a raw request sends none.
		header := "Accept-Encoding: " + strings.Join(tt.client, ", ") + "\r\n"
		if tt.client == nil {
			header = ""
		}
		status, _ := rawRequestWith(t, strings.TrimPrefix(f.proxyURL, "http://"), shapes[0].path, header, shapes[0].body)
		require.Equal(t, http.StatusOK, status)
		_, _, got := up.result()
		assert.Equal(t, tt.want, strings.Join(got, ", "), "client %q", tt.client)
	}
}

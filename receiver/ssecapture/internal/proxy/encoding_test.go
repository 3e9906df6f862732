// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/sse"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/frames"
)

func TestForwardedAcceptEncoding(t *testing.T) {
	for _, tt := range []struct {
		client []string
		want   string
	}{
		{nil, "identity"},
		{[]string{"gzip"}, "gzip"},
		{[]string{"gzip, deflate"}, "gzip, deflate"},
		// httpx, undici and browsers offer br and zstd too: dropped, so the
		// upstream picks a coding the proxy reads.
		{[]string{"gzip, deflate, br, zstd"}, "gzip, deflate"},
		{[]string{"br;q=1.0, gzip;q=0.8, *;q=0.1"}, "gzip;q=0.8"},
		{[]string{"gzip", "deflate"}, "gzip, deflate"}, // two header lines
		{[]string{"X-GZIP"}, "X-GZIP"},
		{[]string{"identity"}, "identity"},
		// Nothing the proxy reads: identity, which the client did not refuse.
		{[]string{"br"}, "identity"},
		{[]string{"*"}, "identity"},
		{[]string{"br, zstd;q=0.5"}, "identity"},
		{[]string{""}, "identity"},
		// Refusals stay.
		{[]string{"gzip, identity;q=0"}, "gzip, identity;q=0"},
		{[]string{"gzip;q=0, br"}, "identity"},
		{[]string{"deflate, *;q=0"}, "deflate, *;q=0"},
		// A client that refuses identity and accepts only what the proxy
		// cannot read keeps its header: its bytes come first.
		{[]string{"br, identity;q=0"}, "br, identity;q=0"},
		{[]string{"br, *;q=0"}, "br, *;q=0"},
		// An unreadable q value is taken as meant.
		{[]string{"gzip;q=abc"}, "gzip;q=abc"},
	} {
		assert.Equal(t, tt.want, forwardedAcceptEncoding(tt.client), "%q", tt.client)
	}
}

func TestResponseCoding(t *testing.T) {
	for _, tt := range []struct {
		lines  []string
		coding string
		ok     bool
	}{
		{nil, frames.Identity, true},
		{[]string{""}, frames.Identity, true},
		{[]string{"identity"}, frames.Identity, true},
		{[]string{"gzip"}, frames.Gzip, true},
		{[]string{"GZip"}, frames.Gzip, true},
		{[]string{"x-gzip"}, frames.Gzip, true},
		{[]string{"deflate"}, frames.Deflate, true},
		{[]string{" gzip , identity"}, frames.Gzip, true},
		{[]string{"br"}, "br", false},
		{[]string{"zstd"}, "zstd", false},
		{[]string{"deflate, gzip"}, "gzip", false}, // two codings, one after the other
		{[]string{"gzip", "gzip"}, "gzip", false},
	} {
		coding, ok := frames.ResponseCoding(tt.lines)
		assert.Equal(t, tt.coding, coding, "%q", tt.lines)
		assert.Equal(t, tt.ok, ok, "%q", tt.lines)
	}
}

// flushingWriter is the upstream's encoder: Flush ends a frame's bytes on
// a byte boundary the decoder can decode up to.
type flushingWriter interface {
	io.WriteCloser
	Flush() error
}

func newEncoder(t *testing.T, coding string, w io.Writer) flushingWriter {
	t.Helper()
	switch coding {
	case "gzip":
		return gzip.NewWriter(w)
	case "zlib":
		return zlib.NewWriter(w)
	case "raw deflate":
		fw, err := flate.NewWriter(w, flate.DefaultCompression)
		require.NoError(t, err)
		return fw
	}
	t.Fatalf("no encoder for %s", coding)
	return nil
}

// headerCoding is the Content-Encoding an encoder's output goes under.
func headerCoding(coding string) string {
	if coding == "gzip" {
		return frames.Gzip
	}
	return frames.Deflate // HTTP's deflate: zlib, or raw deflate from some servers
}

type timedFrame struct {
	after time.Duration
	frame string
}

// encodeFrames encodes frames as an upstream with a flushing encoder does:
// one read per frame, arriving after its delay; the encoder's trailer comes
// with the last frame.
func encodeFrames(t *testing.T, coding string, frames []timedFrame) []scriptedRead {
	t.Helper()
	var out bytes.Buffer
	enc := newEncoder(t, coding, &out)
	reads := make([]scriptedRead, 0, len(frames))
	for i, f := range frames {
		_, err := io.WriteString(enc, f.frame)
		require.NoError(t, err)
		if i == len(frames)-1 {
			require.NoError(t, enc.Close())
		} else {
			require.NoError(t, enc.Flush())
		}
		reads = append(reads, scriptedRead{f.after, out.String()})
		out.Reset()
	}
	return reads
}

// newCodedTee is newScriptedTee for a body in a content coding.
func newCodedTee(reads []scriptedRead, contentEncoding string, limit int64) (*streamTee, *scriptedBody, string) {
	var want strings.Builder
	for _, r := range reads {
		want.WriteString(r.data)
	}
	clock := clockwork.NewFakeClockAt(scriptStart)
	c := &call{
		d:     &callDeps{clock: clock, logger: zap.NewNop(), maxDecoded: limit, stopping: context.Background()},
		ctx:   context.Background(),
		shape: llmstream.ShapeChatCompletions, streaming: true,
	}
	body := &scriptedBody{clock: clock, reads: reads}
	coding, ok := frames.ResponseCoding([]string{contentEncoding})
	tee := newStreamTee(c, body, sse.FramingSSE, coding, ok)
	return tee, body, want.String()
}

// readAll copies the tee as ReverseProxy does, and closes it.
func readAll(t *testing.T, tee *streamTee) string {
	t.Helper()
	var got strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := tee.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
	}
	require.NoError(t, tee.Close())
	return got.String()
}

// keptChunks is what the call's keeper holds, none before the first chunk.
func keptChunks(c *call) []figures.KeptChunk {
	if c.chunks == nil {
		return nil
	}
	return c.chunks.Chunks()
}

func chunkAts(c *call) []int64 {
	var at []int64
	for _, ch := range keptChunks(c) {
		at = append(at, ch.At)
	}
	return at
}

// stallScript is a stream with two stalls (3 s after the second chunk, 6 s
// after the fourth), as the worked example of docs/contract.md has them.
func stallScript() ([]timedFrame, []time.Duration) {
	frames := []timedFrame{
		{100 * time.Millisecond, chatFrame("a")},
		{50 * time.Millisecond, chatFrame("b")},
		{3000 * time.Millisecond, chatFrame("c")},
		{50 * time.Millisecond, chatFrame("d")},
		{6000 * time.Millisecond, chatFrame("e")},
		{50 * time.Millisecond, chatFrame("f")},
		{10 * time.Millisecond, "data: [DONE]\n\n"},
	}
	return frames, []time.Duration{100, 150, 3150, 3200, 9200, 9250}
}

// TestCodedStreamFiguresExact: gzip, zlib and raw deflate streams from a
// flushing encoder, with stalls: the client gets the coded bytes as sent,
// and every chunk carries the arrival time of the read that brought its
// coded bytes, so TTFT and the stalls are exact to the nanosecond.
func TestCodedStreamFiguresExact(t *testing.T) {
	frames, wantMs := stallScript()
	for _, coding := range []string{"gzip", "zlib", "raw deflate"} {
		t.Run(coding, func(t *testing.T) {
			reads := encodeFrames(t, coding, frames)
			tee, body, want := newCodedTee(reads, headerCoding(coding), DefaultMaxDecodedResponseBytes)
			c := tee.c
			got := readAll(t, tee)
			assert.Equal(t, want, got, "the client gets the coded bytes as sent")
			assert.True(t, body.closed)

			var wantAt []int64
			for _, ms := range wantMs {
				wantAt = append(wantAt, scriptStart.Add(ms*time.Millisecond).UnixNano())
			}
			assert.Equal(t, wantAt, chunkAts(c))
			f := figures.Derive(scriptStart.UnixNano(), chunkAts(c), int64(2*time.Second), nil)
			assert.Equal(t, int64(100*time.Millisecond), f.TTFT)
			assert.Equal(t, 2, f.StallCount)
			assert.Equal(t, int64(9*time.Second), f.StallTotal)
			assert.Equal(t, int64(6*time.Second), f.MaxStall)
			assert.True(t, c.terminal, "[DONE] was decoded")
			assert.Empty(t, c.captureErr)
			assert.Empty(t, c.outcome())
		})
	}
}

// TestCodedStreamSplitReads: the coded bytes of a frame split across two
// reads, and the coded bytes of two frames in one read: a frame's time is
// that of the read that completed its coded bytes.
func TestCodedStreamSplitReads(t *testing.T) {
	frames, _ := stallScript()
	reads := encodeFrames(t, "gzip", frames)
	// Frame c's bytes arrive in two reads, 3 s and 3 s + 7 ms after b.
	c0 := reads[2].data
	split := []scriptedRead{reads[0], reads[1], {3 * time.Second, c0[:len(c0)/2]}, {7 * time.Millisecond, c0[len(c0)/2:]}}
	// Frames d and e in one read.
	split = append(split, scriptedRead{time.Second, reads[3].data + reads[4].data}, reads[5], reads[6])
	tee, _, want := newCodedTee(split, "gzip", DefaultMaxDecodedResponseBytes)
	got := readAll(t, tee)
	assert.Equal(t, want, got)
	ms := func(d time.Duration) int64 { return scriptStart.Add(d * time.Millisecond).UnixNano() }
	assert.Equal(t, []int64{ms(100), ms(150), ms(3157), ms(4157), ms(4157), ms(4207)}, chunkAts(tee.c))
	assert.True(t, tee.c.terminal)
}

// TestCodedStreamAcrossBatches: with many frames, coded bytes go to the
// decoder in the tee's batches, and still each frame keeps its own read's
// time.
func TestCodedStreamAcrossBatches(t *testing.T) {
	const n = 3*parseBatchReads + 5
	var frames []timedFrame
	var wantAt []int64
	elapsed := time.Duration(0)
	for i := range n {
		gap := time.Duration(i%7+1) * time.Millisecond
		elapsed += gap
		frames = append(frames, timedFrame{gap, chatFrame(fmt.Sprint(i))})
		wantAt = append(wantAt, scriptStart.Add(elapsed).UnixNano())
	}
	frames = append(frames, timedFrame{time.Millisecond, "data: [DONE]\n\n"})
	tee, _, want := newCodedTee(encodeFrames(t, "gzip", frames), "gzip", DefaultMaxDecodedResponseBytes)
	assert.Equal(t, want, readAll(t, tee))
	assert.Equal(t, wantAt, chunkAts(tee.c))
}

// TestCodedStreamUnsupported: a coding the proxy cannot decode reaches the
// client as sent; the span says why it has no chunks, and does not claim the
// stream was truncated.
func TestCodedStreamUnsupported(t *testing.T) {
	reads := []scriptedRead{{10 * time.Millisecond, "\x1b\x00\xf8\xa5\x40\xc2\xbe"}, {time.Second, "\x03\x00\x01\x02"}}
	for _, coding := range []string{"br", "zstd", "compress", "deflate, gzip"} {
		tee, _, want := newCodedTee(reads, coding, DefaultMaxDecodedResponseBytes)
		tee.c.status = 200
		got := readAll(t, tee)
		assert.Equal(t, want, got, coding)
		assert.Empty(t, keptChunks(tee.c), coding)
		assert.Equal(t, captureUnsupportedEncoding, tee.c.captureErr, coding)
		assert.Empty(t, tee.c.outcome(), coding)
	}
}

// TestCodedStreamCorrupt: a gzip stream that stops decoding mid-way reaches
// the client byte for byte; the chunks before the corruption are kept, the
// span says the capture failed, and the rest of the body is not decoded.
func TestCodedStreamCorrupt(t *testing.T) {
	frames, _ := stallScript()
	reads := encodeFrames(t, "gzip", frames)
	reads[3].data = strings.Repeat("\xff", len(reads[3].data)) // frame d's bytes garbled
	tee, _, want := newCodedTee(reads, "gzip", DefaultMaxDecodedResponseBytes)
	got := readAll(t, tee)
	assert.Equal(t, want, got)
	assert.Len(t, keptChunks(tee.c), 3, "a, b and c decoded before the corruption")
	assert.Equal(t, captureDecodeError, tee.c.captureErr)
	assert.False(t, tee.c.terminal)
	assert.Empty(t, tee.c.outcome(), "the body ended cleanly: the proxy cannot tell it was cut")
}

// TestCodedStreamTruncated: a gzip stream the upstream ends before its
// terminal frame and its trailer is a truncated stream, not a capture error.
func TestCodedStreamTruncated(t *testing.T) {
	frames, _ := stallScript()
	reads := encodeFrames(t, "gzip", frames)[:4]
	tee, _, _ := newCodedTee(reads, "gzip", DefaultMaxDecodedResponseBytes)
	readAll(t, tee)
	assert.Len(t, keptChunks(tee.c), 4)
	assert.Empty(t, tee.c.captureErr)
	assert.Equal(t, errTypeTruncated, tee.c.outcome())
}

// TestCodedStreamBomb: a gzip body that decodes to far more than the limit
// stops being decoded at the limit; the chunks up to it are kept, the span
// says why capture stopped, and the client still gets every byte.
func TestCodedStreamBomb(t *testing.T) {
	const limit = 1 << 20
	var coded bytes.Buffer
	zw, err := gzip.NewWriterLevel(&coded, gzip.BestCompression)
	require.NoError(t, err)
	_, err = io.WriteString(zw, chatFrame("a")+chatFrame("b"))
	require.NoError(t, err)
	require.NoError(t, zw.Flush())
	head := coded.Len()
	// 256 MiB of one endless SSE comment line. Compressing that much takes
	// seconds (minutes with the race detector); but once the window is all
	// zeros, the flushed bytes of the next MiB of zeros decode to zeros
	// wherever they are repeated: the bomb is that segment, 256 times.
	_, err = io.WriteString(zw, ":")
	require.NoError(t, err)
	zeros := make([]byte, 1<<20)
	var segment []byte
	for range 2 {
		mark := coded.Len()
		_, err = zw.Write(zeros)
		require.NoError(t, err)
		require.NoError(t, zw.Flush())
		segment = append(segment[:0], coded.Bytes()[mark:]...)
	}
	coded.Truncate(coded.Len() - len(segment))
	for range 255 {
		coded.Write(segment)
	}
	t.Logf("bomb: %d bytes coded", coded.Len())
	var reads []scriptedRead
	data := coded.String()
	reads = append(reads, scriptedRead{10 * time.Millisecond, data[:head]})
	for rest := data[head:]; rest != ""; {
		n := min(len(rest), 16<<10)
		reads = append(reads, scriptedRead{time.Millisecond, rest[:n]})
		rest = rest[n:]
	}
	tee, _, want := newCodedTee(reads, "gzip", limit)
	var emitted int64
	body := tee.rc
	tee.rc = readHook{body, func() { emitted = tee.frames.Decoded() }}
	got := readAll(t, tee)
	assert.Equal(t, want, got, "the client gets every byte")
	assert.Equal(t, int64(limit), emitted, "decoding stopped at the limit")
	assert.Len(t, keptChunks(tee.c), 2)
	assert.Equal(t, captureDecodedLimit, tee.c.captureErr)
}

// TestCodedStreamClosedEarly: a tee closed before any read (the client
// went away first), or mid-stream, ends its decoder (goleak checks).
func TestCodedStreamClosedEarly(t *testing.T) {
	frames, _ := stallScript()
	tee, _, _ := newCodedTee(encodeFrames(t, "gzip", frames), "gzip", DefaultMaxDecodedResponseBytes)
	require.NoError(t, tee.Close())
	assert.Empty(t, tee.c.captureErr)

	tee, _, _ = newCodedTee(encodeFrames(t, "gzip", frames), "gzip", DefaultMaxDecodedResponseBytes)
	buf := make([]byte, 32<<10)
	for range 3 {
		_, err := tee.Read(buf)
		require.NoError(t, err)
	}
	require.NoError(t, tee.Close())
	assert.Len(t, keptChunks(tee.c), 3)
	assert.Empty(t, tee.c.captureErr)
}

// TestJSONTeeDecodes: a non-streaming response in gzip gives its metadata;
// one that does not decode gives none, and says so.
func TestJSONTeeDecodes(t *testing.T) {
	const body = `{"id":"r1","model":"gpt-4o","choices":[{"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":5}}`
	var coded bytes.Buffer
	zw := gzip.NewWriter(&coded)
	_, _ = io.WriteString(zw, body)
	require.NoError(t, zw.Close())
	for _, tt := range []struct {
		name, data, coding, captureErr string
		tokens                         int64
	}{
		{"gzip", coded.String(), "gzip", "", 5},
		{"corrupt", "\x1f\x8b\x08\x00garbage", "gzip", captureDecodeError, 0},
		{"unsupported", "\x1b\x00", "br", captureUnsupportedEncoding, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &call{d: &callDeps{logger: zap.NewNop(), maxValueLen: 256}, shape: llmstream.ShapeChatCompletions}
			coding, ok := frames.ResponseCoding([]string{tt.coding})
			if !ok {
				c.captureFailed(captureUnsupportedEncoding, coding, nil)
			}
			tee := &jsonTee{rc: io.NopCloser(strings.NewReader(tt.data)), c: c, coding: coding}
			got, err := io.ReadAll(tee)
			require.NoError(t, err)
			require.NoError(t, tee.Close())
			assert.Equal(t, tt.data, string(got))
			assert.Equal(t, tt.captureErr, c.captureErr)
			assert.Equal(t, tt.tokens, c.meta.OutputTokens)
		})
	}
}

// readHook calls after at each read, once the tee has parsed what came
// before it.
type readHook struct {
	io.ReadCloser
	after func()
}

func (r readHook) Read(p []byte) (int, error) {
	r.after()
	return r.ReadCloser.Read(p)
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package frames

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/sse"
)

type flusher interface {
	io.WriteCloser
	Flush() error
}

var codings = []struct {
	name    string
	coding  string
	encoder func(io.Writer) flusher
	decoder func(io.Reader) (io.Reader, error)
}{
	{
		"gzip", Gzip, func(w io.Writer) flusher { return gzip.NewWriter(w) },
		func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) },
	},
	{
		"zlib", Deflate, func(w io.Writer) flusher { return zlib.NewWriter(w) },
		func(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) },
	},
	{
		"raw deflate", Deflate, func(w io.Writer) flusher { fw, _ := flate.NewWriter(w, flate.BestSpeed); return fw },
		func(r io.Reader) (io.Reader, error) { return flate.NewReader(r), nil },
	},
}

// TestClassifierReadsCodedFrames: the frames of a coded body, read by read,
// and a closing frame coded after them that leaves a whole body (its
// checksum verified by the standard decoder), in every coding.
func TestClassifierReadsCodedFrames(t *testing.T) {
	closing := "data: {\"error\":{\"type\":\"stall_timeout\"}}\n\n"
	for _, tt := range codings {
		t.Run(tt.name, func(t *testing.T) {
			var coded bytes.Buffer
			zw := tt.encoder(&coded)
			var chunks [][]byte
			for _, f := range []string{chatFrame("a"), chatFrame("b"), chatFrame(strings.Repeat("c", 70_000))} {
				_, err := io.WriteString(zw, f)
				require.NoError(t, err)
				require.NoError(t, zw.Flush())
				chunks = append(chunks, bytes.Clone(coded.Bytes()))
				coded.Reset()
			}
			var kinds []llmstream.Kind
			var ats []int64
			c := New(Options{Shape: llmstream.ShapeChatCompletions, Framing: sse.FramingSSE, Coding: tt.coding, MaxDecoded: defaultLimit},
				func(f *llmstream.Frame, at int64, _ error) { kinds = append(kinds, f.Kind); ats = append(ats, at) })
			var all []byte
			for i, ch := range chunks {
				c.Write(ch, int64(i+1))
				all = append(all, ch...)
			}
			assert.Equal(t, []llmstream.Kind{llmstream.KindContent, llmstream.KindContent, llmstream.KindContent}, kinds)
			assert.Equal(t, []int64{1, 2, 3}, ats, "each frame stamped with the read that completed it")
			end, ok := c.End(func(b *llmstream.Boundary) []byte {
				assert.True(t, strings.HasPrefix(string(b.ErrorFrame(http.StatusGatewayTimeout, "stall_timeout", "m")), "data: "),
					"the decoded bytes end on a frame boundary: nothing to close first")
				return []byte(closing)
			})
			require.True(t, ok, "the body stopped at a flush")
			c.Write(end, 4)
			require.NoError(t, c.Close(true))
			assert.Equal(t, llmstream.KindError, kinds[len(kinds)-1], "the closing frame decodes as the shape's error")
			r, err := tt.decoder(bytes.NewReader(append(all, end...)))
			require.NoError(t, err)
			got, err := io.ReadAll(r)
			require.NoError(t, err, "a whole body")
			assert.True(t, strings.HasSuffix(string(got), closing))
		})
	}
}

// TestClassifierCannotEndMidCoding: a body cut inside its coding, or past
// its decoded limit, takes no closing frame.
func TestClassifierCannotEndMidCoding(t *testing.T) {
	var coded bytes.Buffer
	zw := gzip.NewWriter(&coded)
	_, _ = io.WriteString(zw, chatFrame("a"))
	_ = zw.Flush()
	body := coded.Bytes()
	c := New(Options{Shape: llmstream.ShapeChatCompletions, Coding: Gzip, MaxDecoded: defaultLimit}, func(*llmstream.Frame, int64, error) {})
	c.Write(body[:len(body)-1], 1)
	_, ok := c.End(func(*llmstream.Boundary) []byte { return []byte("x") })
	assert.False(t, ok)
	require.NoError(t, c.Close(false))

	c = New(Options{Shape: llmstream.ShapeChatCompletions, Coding: Gzip, MaxDecoded: 10}, func(*llmstream.Frame, int64, error) {})
	c.Write(body, 1)
	assert.True(t, c.Blind(), "past the decoded limit")
	_, ok = c.End(func(*llmstream.Boundary) []byte { return []byte("x") })
	assert.False(t, ok)
	require.ErrorIs(t, c.Close(false), ErrDecodedLimit)
}

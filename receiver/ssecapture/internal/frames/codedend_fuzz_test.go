// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package frames

import (
	"bytes"
	"io"
	"testing"

	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/sse"
)

// FuzzCodedEnd checks the closing frame coded after a body: whatever the
// decoded bytes, wherever the encoder flushed, in every coding, the body
// with the frame after it decodes whole (checksums verified) to the bytes
// and the frame; and a body cut anywhere but at a flush either takes no
// frame or still decodes whole with it.
func FuzzCodedEnd(f *testing.F) {
	f.Add([]byte(chatFrame("a")+chatFrame("b")), uint16(10), uint16(0), []byte("data: {}\n\n"))
	f.Add([]byte(": keepalive\n\n"), uint16(0), uint16(3), []byte("x"))
	f.Add(bytes.Repeat([]byte("z"), 70_000), uint16(65535), uint16(1), bytes.Repeat([]byte("y"), 70_000))
	f.Fuzz(func(t *testing.T, plain []byte, flushAt, cut uint16, frame []byte) {
		for _, tt := range codings {
			var coded bytes.Buffer
			zw := tt.encoder(&coded)
			at := min(int(flushAt), len(plain))
			var chunks [][]byte
			for _, part := range [][]byte{plain[:at], plain[at:]} {
				_, _ = zw.Write(part)
				_ = zw.Flush()
				chunks = append(chunks, bytes.Clone(coded.Bytes()))
				coded.Reset()
			}
			body := bytes.Join(chunks, nil)
			if cut > 0 {
				body = body[:max(len(body)-int(cut), 0)]
			}
			c := New(Options{Shape: llmstream.ShapeChatCompletions, Framing: sse.FramingSSE, Coding: tt.coding, MaxDecoded: defaultLimit},
				func(*llmstream.Frame, int64, error) {})
			c.Write(body, 1)
			end, ok := c.End(func(*llmstream.Boundary) []byte { return frame })
			_ = c.Close(false)
			if !ok {
				if cut == 0 && len(body) > 0 {
					t.Fatalf("%s: a flushed body took no frame", tt.name)
				}
				continue
			}
			r, err := tt.decoder(bytes.NewReader(append(body, end...)))
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatalf("%s: the body with the frame does not decode: %v", tt.name, err)
			}
			if !bytes.HasSuffix(got, frame) || (cut == 0 && !bytes.Equal(got, append(bytes.Clone(plain), frame...))) {
				t.Fatalf("%s: decoded %q", tt.name, got)
			}
		}
	})
}

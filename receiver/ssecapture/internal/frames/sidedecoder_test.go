// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package frames

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"testing"
)

// defaultLimit is the proxy's default max_decoded_response_bytes.
const defaultLimit = 128 << 20

func chatFrame(text string) string {
	return fmt.Sprintf("data: {\"choices\":[{\"delta\":{\"content\":%q}}]}\n\n", text)
}

// FuzzSideDecoder checks the side decoder against the same decoder pulling
// the whole body at once: fed in two writes, cut anywhere, it hands on
// exactly the bytes the pulling decoder yields before it stops (all of
// them, or the limit's worth), and it always ends.
func FuzzSideDecoder(f *testing.F) {
	frames := []byte(chatFrame("a") + chatFrame("b") + "data: [DONE]\n\n")
	for _, mk := range []func(io.Writer) io.WriteCloser{
		func(w io.Writer) io.WriteCloser { return gzip.NewWriter(w) },
		func(w io.Writer) io.WriteCloser { return zlib.NewWriter(w) },
		func(w io.Writer) io.WriteCloser { fw, _ := flate.NewWriter(w, flate.BestSpeed); return fw },
	} {
		var b bytes.Buffer
		w := mk(&b)
		_, _ = w.Write(frames)
		_ = w.Close()
		f.Add(b.Bytes(), uint16(b.Len()/2), uint16(0))
		f.Add(b.Bytes(), uint16(3), uint16(40))
		f.Add(b.Bytes()[:b.Len()-5], uint16(7), uint16(0))
	}
	f.Add([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xffgarbage"), uint16(4), uint16(0))
	f.Add([]byte{0x78, 0x9c}, uint16(1), uint16(0))
	f.Fuzz(func(t *testing.T, body []byte, cut, limit uint16) {
		for _, coding := range []string{Gzip, Deflate} {
			want := pullDecode(coding, body)
			lim := int64(limit)
			if lim == 0 {
				lim = defaultLimit
			}
			if int64(len(want)) > lim {
				want = want[:lim]
			}
			var got []byte
			d := newSideDecoder(coding, lim, func(p []byte) { got = append(got, p...) })
			at := min(int(cut), len(body))
			d.Write(body[:at])
			d.Write(body[at:])
			_ = d.Close()
			if !bytes.Equal(want, got) {
				t.Fatalf("%s: side decoder gave %q, the pulling decoder %q", coding, got, want)
			}
		}
	})
}

// pullDecode decodes body as a whole, up to where decoding stops.
func pullDecode(coding string, body []byte) []byte {
	r, err := NewDecoder(coding, bytes.NewReader(body))
	if err != nil {
		return nil
	}
	defer func() { _ = r.Close() }()
	out, _ := io.ReadAll(io.LimitReader(r, defaultLimit))
	return out
}

// BenchmarkSideDecoder: the decoding cost of a gzip stream of chat frames,
// flushed frame by frame as an upstream sends them, and of a bomb (zeros)
// up to the default limit. b.SetBytes counts decoded bytes.
func BenchmarkSideDecoder(b *testing.B) {
	var frames bytes.Buffer
	var writes [][]byte
	zw := gzip.NewWriter(&frames)
	decoded := 0
	for i := range 2000 {
		f := chatFrame(fmt.Sprintf("token %d", i))
		decoded += len(f)
		_, _ = io.WriteString(zw, f)
		_ = zw.Flush()
		writes = append(writes, bytes.Clone(frames.Bytes()))
		frames.Reset()
	}
	_ = zw.Close()
	writes = append(writes, bytes.Clone(frames.Bytes()))

	var bomb bytes.Buffer
	zw, _ = gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	_, _ = zw.Write(make([]byte, 2*defaultLimit))
	_ = zw.Close()

	b.Run("frames", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(decoded))
		for b.Loop() {
			d := newSideDecoder(Gzip, defaultLimit, func([]byte) {})
			for _, w := range writes {
				d.Write(w)
			}
			_ = d.Close()
		}
	})
	b.Run("bomb", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(defaultLimit)
		for b.Loop() {
			d := newSideDecoder(Gzip, defaultLimit, func([]byte) {})
			for rest := bomb.Bytes(); len(rest) > 0; {
				n := min(len(rest), 32<<10)
				d.Write(rest[:n])
				rest = rest[n:]
			}
			if err := d.Close(); !errors.Is(err, ErrDecodedLimit) {
				b.Fatalf("the bomb stopped with %v", err)
			}
		}
	})
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"strings"
	"testing"
)

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
		for _, coding := range []string{codingGzip, codingDeflate} {
			want := pullDecode(coding, body)
			lim := int64(limit)
			if lim == 0 {
				lim = DefaultMaxDecodedResponseBytes
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
	r, err := newDecoder(coding, bytes.NewReader(body))
	if err != nil {
		return nil
	}
	defer func() { _ = r.Close() }()
	out, _ := io.ReadAll(io.LimitReader(r, DefaultMaxDecodedResponseBytes))
	return out
}

// FuzzForwardedAcceptEncoding: what the proxy forwards is never empty, is
// the client's header itself, identity, or a selection of the client's own
// elements in which every coding accepted is one the proxy decodes.
func FuzzForwardedAcceptEncoding(f *testing.F) {
	for _, s := range []string{
		"", "gzip", "gzip, deflate, br, zstd", "br;q=1.0, gzip;q=0.8, *;q=0.1", "br, identity;q=0",
		"*;q=0", "identity;q=0, *", "gzip;q=abc", ",,;", "GZIP;Q=0.5",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		got := forwardedAcceptEncoding([]string{header})
		if got == "" {
			t.Fatalf("%q: forwarded nothing", header)
		}
		if got == header || got == "identity" {
			return
		}
		own := map[string]bool{}
		for e := range strings.SplitSeq(header, ",") {
			own[strings.TrimSpace(e)] = true
		}
		for e := range strings.SplitSeq(got, ", ") {
			if !own[e] {
				t.Fatalf("%q: forwarded %q, not the client's", header, e)
			}
			if coding, q := parseAcceptElement(e); q > 0 && coding != "identity" && !decodable(coding) {
				t.Fatalf("%q: forwarded %q, which the proxy cannot decode", header, e)
			}
		}
	})
}

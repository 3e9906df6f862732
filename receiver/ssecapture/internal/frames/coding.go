// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package frames

import (
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Content codings the proxy decodes on the side. Brotli and zstd have no
// decoder in the module graph worth its cost (the one zstd decoder prints to
// stderr on corrupt input); the proxy leaves them out of the Accept-Encoding
// it forwards.
const (
	Identity = ""
	Gzip     = "gzip"
	Deflate  = "deflate"
)

// Decodable reports whether the proxy decodes coding (as a client names it
// in Accept-Encoding).
func Decodable(coding string) bool {
	switch coding {
	case Gzip, "x-gzip", Deflate:
		return true
	}
	return false
}

// ResponseCoding reads a response's Content-Encoding lines: the one coding
// to decode (Identity for none), and false when the proxy cannot decode it.
// A list of several codings (applied one after the other) is legal but
// unheard of from LLM APIs; it is not decoded.
func ResponseCoding(lines []string) (string, bool) {
	coding := Identity
	for _, line := range lines {
		for c := range strings.SplitSeq(line, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			if c == "" || c == "identity" {
				continue
			}
			if coding != Identity || !Decodable(c) {
				return c, false
			}
			coding = c
		}
	}
	if coding == "x-gzip" {
		coding = Gzip
	}
	return coding, true
}

// format is the container a coded body turned out to be in.
type format uint8

const (
	formatGzip format = iota
	formatZlib
	formatRawDeflate
)

// NewDecoder reads the coding from src.
func NewDecoder(coding string, src flate.Reader) (io.ReadCloser, error) {
	r, _, err := openDecoder(coding, src)
	return r, err
}

// openDecoder reads the coding from src, and says in which container. HTTP's
// deflate is the zlib format, but some servers send raw deflate: the first
// two bytes tell them apart (a zlib header names method 8 and is a multiple
// of 31).
func openDecoder(coding string, src flate.Reader) (io.ReadCloser, format, error) {
	switch coding {
	case Gzip:
		r, err := gzip.NewReader(src)
		return r, formatGzip, err
	case Deflate:
		var head [2]byte
		if _, err := io.ReadFull(src, head[:]); err != nil {
			return nil, 0, err
		}
		r := &prefixedReader{prefix: head[:], next: src}
		if head[0]&0x0f == 8 && (uint16(head[0])<<8|uint16(head[1]))%31 == 0 {
			zr, err := zlib.NewReader(r)
			return zr, formatZlib, err
		}
		return flate.NewReader(r), formatRawDeflate, nil
	}
	return nil, 0, fmt.Errorf("content coding %q: %w", coding, errUnsupportedCoding)
}

var errUnsupportedCoding = errors.New("not decoded by the proxy")

// prefixedReader yields prefix, then next; it is an io.ByteReader, so that
// flate reads it byte by byte instead of wrapping it in a buffer that would
// read ahead of what the decoder needs.
type prefixedReader struct {
	prefix []byte
	next   flate.Reader
}

func (r *prefixedReader) Read(p []byte) (int, error) {
	if len(r.prefix) > 0 {
		n := copy(p, r.prefix)
		r.prefix = r.prefix[n:]
		return n, nil
	}
	return r.next.Read(p)
}

func (r *prefixedReader) ReadByte() (byte, error) {
	if len(r.prefix) > 0 {
		b := r.prefix[0]
		r.prefix = r.prefix[1:]
		return b, nil
	}
	return r.next.ReadByte()
}

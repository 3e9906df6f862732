// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Content codings the proxy decodes on the side. Brotli and zstd have no
// decoder in the module graph worth its cost (the one zstd decoder prints to
// stderr on corrupt input); they are left out of the Accept-Encoding the
// proxy forwards, so an upstream sends them only against the client's and
// the proxy's request, and its span then says capture_error
// unsupported_content_encoding.
const (
	codingIdentity = ""
	codingGzip     = "gzip"
	codingDeflate  = "deflate"
)

// llm.stream.capture_error values: why the proxy could not read (all of) a
// response's frames, although the client got every byte.
const (
	// captureUnsupportedEncoding: the response came in a content coding the
	// proxy does not decode.
	captureUnsupportedEncoding = "unsupported_content_encoding"
	// captureDecodedLimit: the decoded body passed max_decoded_response_bytes;
	// capture stopped there.
	captureDecodedLimit = "decoded_limit"
	// captureDecodeError: the body did not decode (corrupt or not what its
	// Content-Encoding said); capture stopped there.
	captureDecodeError = "decode_error"
)

// forwardedAcceptEncoding is the Accept-Encoding the proxy sends upstream,
// from the client's header lines: the client's own list without the codings
// it accepts that the proxy cannot decode (a "*" that accepts among them),
// so that whatever the upstream picks is both what the client accepts and
// what the proxy can read. Refusals (q=0) stay. With nothing it can read
// left, the proxy asks for identity, which every client takes unless it
// refused it; a client that refused identity too keeps its header as sent,
// and the span says so if the upstream answers in a coding the proxy cannot
// read. Without a header the proxy asks for identity: net/http would ask for
// gzip and decode it for the client, changing the bytes it gets.
func forwardedAcceptEncoding(lines []string) string {
	if len(lines) == 0 {
		return "identity"
	}
	header := strings.Join(lines, ", ")
	var kept []string
	accepted, identityRefused, identityListed, starRefused := false, false, false, false
	for elem := range strings.SplitSeq(header, ",") {
		elem = strings.TrimSpace(elem)
		if elem == "" {
			continue
		}
		coding, q := parseAcceptElement(elem)
		switch {
		case coding == "identity":
			identityListed = true
			identityRefused = q == 0
		case coding == "*" && q == 0:
			starRefused = true
		}
		if q == 0 {
			kept = append(kept, elem) // a refusal narrows the choice, never widens it
			continue
		}
		if coding == "identity" || decodable(coding) {
			kept = append(kept, elem)
			accepted = true
		}
	}
	if accepted {
		return strings.Join(kept, ", ")
	}
	if identityRefused || (starRefused && !identityListed) {
		return header
	}
	return "identity"
}

// parseAcceptElement reads one Accept-Encoding element: its coding, in
// lower case, and its q value (1 when absent or unreadable: an element the
// client sent is taken as meant).
func parseAcceptElement(elem string) (string, float64) {
	coding, params, _ := strings.Cut(elem, ";")
	q := 1.0
	for p := range strings.SplitSeq(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f >= 0 && f <= 1 {
			q = f
		}
	}
	return strings.ToLower(strings.TrimSpace(coding)), q
}

func decodable(coding string) bool {
	switch coding {
	case codingGzip, "x-gzip", codingDeflate:
		return true
	}
	return false
}

// responseCoding reads a response's Content-Encoding lines: the one coding
// to decode (codingIdentity for none), and false when the proxy cannot
// decode it. A list of several codings (applied one after the other) is
// legal but unheard of from LLM APIs; it is not decoded.
func responseCoding(lines []string) (string, bool) {
	coding := codingIdentity
	for _, line := range lines {
		for c := range strings.SplitSeq(line, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			if c == "" || c == "identity" {
				continue
			}
			if coding != codingIdentity || !decodable(c) {
				return c, false
			}
			coding = c
		}
	}
	if coding == "x-gzip" {
		coding = codingGzip
	}
	return coding, true
}

// newDecoder reads the coding from src. HTTP's deflate is the zlib format,
// but some servers send raw deflate: the first two bytes tell them apart
// (a zlib header names method 8 and is a multiple of 31).
func newDecoder(coding string, src flate.Reader) (io.ReadCloser, error) {
	switch coding {
	case codingGzip:
		return gzip.NewReader(src)
	case codingDeflate:
		var head [2]byte
		if _, err := io.ReadFull(src, head[:]); err != nil {
			return nil, err
		}
		r := &prefixedReader{prefix: head[:], next: src}
		if head[0]&0x0f == 8 && (uint16(head[0])<<8|uint16(head[1]))%31 == 0 {
			return zlib.NewReader(r)
		}
		return flate.NewReader(r), nil
	}
	return nil, fmt.Errorf("content coding %q: %w", coding, errUnsupportedCoding)
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

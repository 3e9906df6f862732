// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"strconv"
	"strings"

	"github.com/streamstall/streamstall/receiver/ssecapture/internal/frames"
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
// gzip and decode it for the client, changing the bytes it gets. Codings
// the proxy does not decode (brotli, zstd: see frames.Decodable) thus come
// only against both requests, and the span then says capture_error
// unsupported_content_encoding.
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
		if coding == "identity" || frames.Decodable(coding) {
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

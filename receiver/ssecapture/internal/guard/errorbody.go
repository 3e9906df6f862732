// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/streamstall/streamstall/receiver/ssecapture/internal/frames"
)

// maxErrorBody bounds what is read of an error answer's body; the
// providers' error bodies are a few hundred bytes.
const maxErrorBody = 64 << 10

// errorBodyWait bounds the wait for an error answer's body, which comes
// with its headers: an upstream that sends a 503 and then holds its body
// delays the next attempt by at most this much.
const errorBodyWait = time.Second

// readErrorBody reads an error answer's body into memory, up to
// maxErrorBody bytes and errorBodyWait, and returns what it read. The body
// still reads as the upstream sent it. Read to its end, it gives its
// connection back to the transport's pool: an attempt that fails over
// costs no new connection, where closing an unread body closes it.
func readErrorBody(resp *http.Response) []byte {
	return readBody(resp, errorBodyWait)
}

// readBody reads the first maxErrorBody bytes of resp's body, as
// readErrorBody does, within wait when it is positive (the body is closed
// then), else for as long as the body takes: its request's context bounds
// it.
func readBody(resp *http.Response, wait time.Duration) []byte {
	rc := resp.Body
	var stop *time.Timer
	if wait > 0 {
		stop = time.AfterFunc(wait, func() { _ = rc.Close() })
	}
	b, err := io.ReadAll(io.LimitReader(rc, maxErrorBody+1))
	if stop != nil {
		stop.Stop()
	}
	if err == nil && len(b) <= maxErrorBody {
		_ = rc.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return b
	}
	// Longer, cut or broken: the rest (or the error) follows what was read.
	resp.Body = &readAgain{Reader: io.MultiReader(bytes.NewReader(b), &errReader{err}, rc), body: rc}
	return b
}

// decodedErrorBody is an error answer's body as readErrorBody read it,
// decoded from its content coding when the proxy decodes that one: the
// proxy forwards the client's Accept-Encoding (gzip from the Node SDKs and
// httpx), and an API behind a CDN compresses its JSON errors, so a refusal
// read in its coded bytes would look like no refusal at all. Decoded, it is
// bounded by maxErrorBody too; a body that stops decoding is what it
// decoded to. One in a coding the proxy does not decode, or that does not
// decode at all (plain JSON under a wrong Content-Encoding), is returned
// as it came: a refusal it shows in the clear still counts.
func decodedErrorBody(resp *http.Response, body []byte) []byte {
	coding, ok := frames.ResponseCoding(resp.Header.Values("Content-Encoding"))
	if !ok || coding == frames.Identity {
		return body
	}
	r, err := frames.NewDecoder(coding, bytes.NewReader(body))
	if err != nil {
		return body // not in the coding it names: perhaps plain after all
	}
	decoded, err := io.ReadAll(io.LimitReader(r, maxErrorBody))
	_ = r.Close()
	if err != nil && len(decoded) == 0 {
		return body
	}
	return decoded
}

// readAgain is a body whose first bytes were read and are read again.
type readAgain struct {
	io.Reader
	body io.ReadCloser
}

func (r *readAgain) Close() error { return r.body.Close() }

// errReader returns, where the first read stopped, the error it stopped at.
type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}

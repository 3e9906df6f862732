// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"bytes"
	"errors"
	"io"
	"sync/atomic"
)

// errBodySent refuses net/http a second copy of a request body once it has
// been sent: the request is an attempt, never sent again on its own.
var errBodySent = errors.New("the request body was sent once: an upstream request is never sent again")

// RequestBody returns an upstream request's Body and GetBody for body.
// GetBody hands out copies until the transport starts reading Body, and
// refuses after: a signer reads the payload before the request goes
// (contrib's sigv4auth hashes it through GetBody), while net/http, which
// replays a request on a reused connection that dies under it (a POST with
// Idempotency-Key, an HTTP/2 stream refused) only with a GetBody that
// works, cannot replay one it has begun to send. A request that died
// before any of its body was written was never an upstream request, and
// may still go on another connection.
func RequestBody(body []byte) (io.ReadCloser, func() (io.ReadCloser, error)) {
	var sent atomic.Bool
	first := &sendingBody{Reader: bytes.NewReader(body), sent: &sent}
	getBody := func() (io.ReadCloser, error) {
		if sent.Load() {
			return nil, errBodySent
		}
		return io.NopCloser(bytes.NewReader(body)), nil
	}
	return first, getBody
}

// sendingBody marks its body sent at the transport's first read.
type sendingBody struct {
	*bytes.Reader
	sent *atomic.Bool
}

func (b *sendingBody) Read(p []byte) (int, error) {
	b.sent.Store(true)
	return b.Reader.Read(p)
}

func (*sendingBody) Close() error { return nil }

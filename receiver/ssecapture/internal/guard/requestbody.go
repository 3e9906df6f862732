// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"bytes"
	"errors"
	"io"
	"sync"
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
//
// Once Body has been read to its end nothing needs body again, and it
// lets go of it: a stream that follows its request for minutes does not
// hold a prompt of up to max_request_body for as long.
func RequestBody(body []byte) (io.ReadCloser, func() (io.ReadCloser, error)) {
	b := &sendingBody{body: body}
	b.r.Reset(body)
	return b, b.copy
}

// sendingBody is a request body that is sent at most once. Its lock keeps
// the transport's write loop, a GetBody of a signer or of net/http, and
// the session's release apart.
type sendingBody struct {
	mu   sync.Mutex
	r    bytes.Reader
	body []byte
	// sent: the transport began to read it, or it was released; GetBody
	// refuses.
	sent bool
}

func (b *sendingBody) copy() (io.ReadCloser, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sent {
		return nil, errBodySent
	}
	return io.NopCloser(bytes.NewReader(b.body)), nil
}

// Read marks the body sent at the transport's first read, and lets go of
// it at the end.
func (b *sendingBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sent = true
	n, err := b.r.Read(p)
	if errors.Is(err, io.EOF) {
		b.let()
	}
	return n, err
}

// Close keeps the bytes: net/http closes a body it has not read when a
// reused connection fails before the request is written, then takes a
// copy from GetBody to send it on another.
func (*sendingBody) Close() error { return nil }

func (b *sendingBody) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sent = true
	b.let()
}

func (b *sendingBody) let() {
	b.body = nil
	b.r.Reset(nil)
}

// ReleaseBody lets go of the bytes of a Body of RequestBody that is not to
// be sent: the request of a guarded call, whose attempts send bodies of
// their own (Session). Its reads end, and its GetBody refuses.
func ReleaseBody(rc io.ReadCloser) {
	if b, ok := rc.(*sendingBody); ok {
		b.release()
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"errors"
	"net/http"
	"os"
	"time"
)

// DefaultSendTimeout is how long a client may take to accept any byte of a
// response before the proxy gives up on it: nginx's send_timeout.
const DefaultSendTimeout = 60 * time.Second

// sendDeadline bounds each write of a response to the client, nginx's
// send_timeout: a client that accepts no byte for the timeout (its socket
// buffer full, its window shut) loses the response, and with it the upstream
// request, its connections and buffers, which it would otherwise hold for
// as long as it stays connected. The stream itself may stall for any time:
// the bound runs only while a write waits for the client.
//
// The deadline is the connection's, set before a write and moved on at most
// every quarter of the timeout (a deadline costs a timer update, and a
// stream writes hundreds of times a second), always to a quarter past the
// timeout: a write waits at least the timeout and at most a quarter more.
// The server's write_timeout stays cleared for streams (Proxy.ServeHTTP).
type sendDeadline struct {
	http.ResponseWriter
	rc       *http.ResponseController
	timeout  time.Duration
	now      func() time.Time
	set      time.Time // when the deadline was last moved; zero: never
	timedOut bool      // a write ran out of its deadline
}

func newSendDeadline(w http.ResponseWriter, timeout time.Duration, now func() time.Time) *sendDeadline {
	return &sendDeadline{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout, now: now}
}

// arm moves the deadline on when it is older than a quarter of the timeout.
func (s *sendDeadline) arm() {
	now := s.now()
	if !s.set.IsZero() && now.Sub(s.set) < s.timeout/4 {
		return
	}
	s.set = now
	_ = s.rc.SetWriteDeadline(now.Add(s.timeout + s.timeout/4))
}

func (s *sendDeadline) Write(p []byte) (int, error) {
	s.arm()
	n, err := s.ResponseWriter.Write(p)
	s.note(err)
	return n, err
}

// FlushError is what http.ResponseController.Flush (ReverseProxy's) calls
// first: the flush is where the bytes meet the socket, under the deadline
// the Write before it set (a flush with nothing written sends nothing).
func (s *sendDeadline) FlushError() error {
	err := s.rc.Flush()
	s.note(err)
	return err
}

func (s *sendDeadline) note(err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		s.timedOut = true
	}
}

// Unwrap lets http.ResponseController reach the server's writer for what
// this one does not do itself.
func (s *sendDeadline) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// finish leaves a deadline on the connection for the response's last bytes
// (the chunked encoding's end), which the server flushes after the handler
// returns and before it clears the deadline for the connection's next
// request.
func (s *sendDeadline) finish() {
	s.set = time.Time{}
	s.arm()
}

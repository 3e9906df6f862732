// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/streamstall/streamstall/internal/llmstream"
)

// ContentClock tells the watchdog when the committed stream's last content
// chunk arrived. The proxy classifies the stream's frames once, for its
// span; the watchdog asks it rather than reading the stream a second time.
type ContentClock interface {
	// LastContent classifies what has been read so far and returns the
	// arrival of the last content chunk (0 before any) and whether an
	// answer chunk (text or tool call, not reasoning) has come. It is
	// called from the watchdog's goroutine.
	LastContent() (at int64, answered bool)
}

// endReason is how a committed stream ended.
type endReason uint8

const (
	endOpen     endReason = iota
	endComplete           // the upstream ended it
	endStall              // the watchdog ended it
	endShutdown           // the proxy's shutdown ended it
	endBroken             // the upstream broke it, or the client left
)

// committedBody is what the client gets of the committed attempt: the bytes
// held before commit, then the stream as it comes, byte for byte. When the
// watchdog or the proxy's shutdown ends the stream, it ends it with the
// shape's error frame and a clean end of body, and cancels the upstream
// request. Read and Close are the proxy handler's; the watchdog fires on a
// timer goroutine and only ever sets stalled and cancels.
type committedBody struct {
	s      *Session
	held   []byte
	rc     io.ReadCloser
	cancel context.CancelCauseFunc

	// framed is set for an event stream committed on its first content
	// chunk: the guard may end it with an error frame. watch, commitAt and
	// commitAnswered are set with it: the stream is watched from that
	// chunk on.
	framed         bool
	watch          bool
	commitAt       int64
	commitAnswered bool

	mu      sync.Mutex // the watchdog's timer against Close
	timer   clockwork.Timer
	closed  bool
	cc      ContentClock
	stalled atomic.Bool
	// silence and timeout are written before stalled is set.
	silence, timeout time.Duration
	// lastTimeout is the timeout in force at the watchdog's last look.
	lastTimeout atomic.Int64

	pending  []byte // the error frame, still to be read
	finished bool
	boundary llmstream.Boundary // where the bytes read so far leave the stream's framing
	end      endReason
	err      error
}

func (b *committedBody) Read(p []byte) (int, error) {
	if len(b.held) > 0 {
		n := copy(p, b.held)
		b.held = b.held[n:]
		b.track(p[:n])
		return n, nil
	}
	if len(b.pending) > 0 {
		n := copy(p, b.pending)
		b.pending = b.pending[n:]
		b.finished = len(b.pending) == 0
		return n, nil
	}
	if b.finished {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if n > 0 {
		b.track(p[:n])
	}
	switch {
	case err == nil:
		return n, nil
	case err == io.EOF:
		b.end, b.finished = endComplete, true
		return n, err
	case b.stalled.Load():
		b.end = endStall
		b.pending = b.boundary.ErrorFrame(http.StatusGatewayTimeout, ErrTypeStallTimeout,
			fmt.Sprintf("stream stalled: no content for %s (stall_timeout %s, sse_capture guard)",
				b.silence.Round(time.Millisecond), b.timeout))
	case b.framed && b.s.stopping.Err() != nil:
		b.end = endShutdown
		b.pending = b.boundary.ErrorFrame(http.StatusServiceUnavailable, errTypeShutdown,
			"stream ended: the collector is shutting down (sse_capture guard)")
	default:
		b.end, b.err = endBroken, err
		return n, err
	}
	b.stop()
	return n, nil // the frame follows on the next read
}

// track follows the bytes given to the client, so that an error frame
// after them starts on a frame boundary.
func (b *committedBody) track(p []byte) {
	b.boundary.Track(p)
}

func (b *committedBody) Close() error {
	b.stop()
	return b.rc.Close()
}

func (b *committedBody) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
	}
}

// Watch starts the watchdog on the committed stream, if the call's policy
// has a stall timeout; cc says when content came. It is for the proxy to
// call once it has wrapped the response body.
func (s *Session) Watch(cc ContentClock) {
	b := s.committed
	if b == nil || !b.watch {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cc = cc
	b.arm(b.commitAt, b.commitAnswered)
}

// arm sets the timer for the deadline of a stream whose last content came
// at last. Callers hold mu.
func (b *committedBody) arm(last int64, answered bool) {
	d := b.s.pol.stallDeadline(last, answered)
	if d == 0 {
		return
	}
	b.lastTimeout.Store(d - last)
	now := b.s.now()
	wake := d
	if t := int64(b.s.pol.StallTimeout(true)); !answered && t > 0 && now+t < wake {
		// While only reasoning has come, the deadline shortens the moment an
		// answer chunk arrives; looking every stall_timeout catches that in
		// time without a word from the stream.
		wake = now + t
	}
	wait := max(time.Duration(wake-now), 0)
	if b.timer == nil {
		b.timer = b.s.clock.AfterFunc(wait, b.fire)
	} else {
		b.timer.Reset(wait)
	}
}

// fire is the watchdog: at the deadline it asks when content last came;
// after a silence of the timeout it ends the stream, else it re-arms for
// the new deadline. Keepalives and frames without content never move the
// deadline: only the content clock does.
func (b *committedBody) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	last, answered := b.commitAt, b.commitAnswered
	if at, ans := b.cc.LastContent(); at > last {
		last, answered = at, answered || ans
	} else if ans {
		answered = true
	}
	now := b.s.now()
	d := b.s.pol.stallDeadline(last, answered)
	if d == 0 {
		return
	}
	if now < d {
		b.arm(last, answered)
		return
	}
	b.silence, b.timeout = time.Duration(now-last), time.Duration(d-last)
	b.stalled.Store(true)
	b.cancel(errStalled) // the upstream read fails, and the handler writes the frame
}

func (b *committedBody) timeoutInForce() time.Duration {
	return time.Duration(b.lastTimeout.Load())
}

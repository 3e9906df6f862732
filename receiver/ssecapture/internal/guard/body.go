// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/streamstall/streamstall/internal/hedgecore"
	"github.com/streamstall/streamstall/internal/llmstream"
)

// Progress is what the copy loop publishes of a committed stream for its
// watchdog, the one state they share: the arrival of the last content
// chunk, whether an answer chunk (text or tool call, not reasoning) has
// come, and whether the frames can still be read at all. The copy loop
// classifies every read as it passes (the proxy's tee) and is its one
// writer; the watchdog only loads it.
type Progress struct {
	last     atomic.Int64
	answered atomic.Bool
	blind    atomic.Bool
	// delivered is set by the first content chunk after commit: a stream
	// committed past the pre-content bound then has its first content.
	delivered atomic.Bool
	// terminal is set once the stream's terminal frame (a done or error
	// frame) reached the client: the stream is over, and a silence after
	// it is no stall.
	terminal atomic.Bool
	// unread is the earliest arrival of the bytes of a read the copy loop
	// has passed on but not classified yet (it classifies once the client
	// has the bytes); 0 when none. While the client is slow to take them,
	// that read may hold content: it is not silence.
	unread atomic.Int64
	// reading is when the copy loop last asked the upstream for more, and
	// returned when its last read came back: between the two it was
	// writing to the client, not reading. The copy loop's alone.
	reading, returned int64
}

// readWaited is how long a read must have waited for its bytes to have
// found none waiting: one that returns sooner took bytes already in the
// socket.
const readWaited = time.Millisecond

// Reading records that the copy loop asks the upstream for more at at.
func (p *Progress) Reading(at int64) { p.reading = at }

// Arrived records a read, not classified yet, that came back at returned
// with bytes that arrived at at (earlier than returned for bytes held
// before the commit). A read that took bytes already waiting in the socket
// (it came back at once) may hold bytes of any moment since the last read
// came back, while the copy loop was writing to a slow client: they count
// as arrived then. Stamped when read, they would count as new, and a
// client slow twice in a row would have its flowing stream cut as stalled.
func (p *Progress) Arrived(at, returned int64) {
	earliest := at
	if p.returned != 0 && returned-p.reading < int64(readWaited) {
		earliest = min(at, p.returned)
	}
	p.returned = returned
	p.unread.Store(earliest)
}

// Classified records that every read so far is classified.
func (p *Progress) Classified() { p.unread.Store(0) }

// heldSince reports whether a read that arrived before deadline is not
// classified yet: it may hold content of before the deadline. A read that
// arrived after it cannot (a chunk is stamped with the arrival of the read
// that completed it), and the reads before it are classified (the copy
// loop classifies each read before it reads the next): the silence up to
// the deadline is then known. So an upstream that sends keepalives
// without pause, which keeps a read in flight at most moments, is cut at
// the deadline's look like any other, however busy the proxy is.
func (p *Progress) heldSince(deadline int64) bool {
	at := p.unread.Load()
	return at != 0 && at < deadline
}

// Content records a content chunk that arrived at at.
func (p *Progress) Content(at int64, answered bool) {
	if !p.delivered.Load() {
		p.delivered.Store(true)
	}
	if at > p.last.Load() {
		p.last.Store(at)
	}
	if answered && !p.answered.Load() {
		p.answered.Store(true)
	}
}

// Terminal records that the stream's terminal frame (done or error) has
// passed.
func (p *Progress) Terminal() { p.terminal.Store(true) }

// Blind records that the stream's frames can no longer be read (a coded
// stream past its decoded limit): the watchdog, which would take content it
// cannot see for silence, stands down.
func (p *Progress) Blind() { p.blind.Store(true) }

// CodedTail ends a content-coded stream with the guard's closing frame.
type CodedTail interface {
	// End returns the frame (built after the decoded stream's boundary)
	// coded so that it continues the coding the client decodes, or false
	// when it cannot be (frames.Classifier's End). It runs on the copy
	// loop.
	End(frame func(*llmstream.Boundary) []byte) ([]byte, bool)
}

// endReason is how a committed stream ended.
type endReason uint8

const (
	endOpen     endReason = iota
	endComplete           // the upstream ended it
	endStall              // the watchdog ended it
	endShutdown           // the proxy's shutdown ended it
	endBroken             // the upstream broke it
	endTTFT               // ttft_timeout ended it: committed past the bound, it had no content
)

// committedBody is what the client gets of the committed attempt: the bytes
// held before commit, then the stream as it comes, byte for byte. When the
// watchdog or the proxy's shutdown ends the stream, it ends it with the
// shape's error frame (in the stream's content coding, if it has one) and a
// clean end of body, and cancels the upstream request. Read and Close are
// the copy loop's (the proxy handler's goroutine), which owns the body; the
// watchdog fires on a timer goroutine, reads Progress, and only ever
// signals: it stores the silence, sets stalled and cancels the upstream
// read, and the copy loop writes the frame.
type committedBody struct {
	s    *Session
	rd   *reader // the attempt's, whose budget the held bytes draw on
	held []byte
	// marks are held's reads (reader.marks), offsets in what held was at
	// commit; replayed counts the bytes of held read since, and heldAt is
	// the arrival of the bytes the last Read returned, 0 once they are
	// the upstream's of now.
	marks    []HeldMark
	replayed int
	heldAt   int64
	rc       io.ReadCloser
	cancel   context.CancelCauseFunc

	// framed is set for an event stream committed on its first content
	// chunk: the guard may end it with an error frame. watch, commitAt and
	// commitAnswered are set with it: the stream is watched from that
	// chunk on.
	framed         bool
	watch          bool
	commitAt       int64
	commitAnswered bool
	// ttftAt is set for a stream committed past the pre-content bound
	// when the policy has a ttft_timeout and no stall timeout (the stall
	// clock started at the commit ends it otherwise): the attempt's start
	// plus the timeout, when
	// the stream is given up unless content came (fireTTFT).
	ttftAt int64

	progress Progress
	tail     CodedTail // nil for a stream without a content coding
	// timer is the watchdog's next look (a new one per look: the one
	// running re-arms by replacing it); closed stops it for good.
	timer     atomic.Pointer[clockwork.Timer]
	ttftTimer atomic.Pointer[clockwork.Timer]
	closed    atomic.Bool
	stalled   atomic.Bool
	ttftCut   atomic.Bool
	// unreadWait and ttftWait are the last waits of the stall and TTFT
	// looks that found a read in flight (nextLook), 0 when the last look
	// found none.
	unreadWait, ttftWait atomic.Int64
	// silence is stored before stalled is set.
	silence atomic.Int64
	// lastTimeout is the timeout in force at the watchdog's last look, and
	// lastSource where it came from (a StallSource).
	lastTimeout atomic.Int64
	lastSource  atomic.Uint32

	pending  []byte // the error frame, still to be read
	finished bool
	boundary llmstream.Boundary // where the bytes read so far leave the stream's framing
	end      endReason
	err      error
}

// ArrivedAt returns when the bytes the last Read returned arrived from
// upstream, when they were held before commit: the proxy stamps their
// frames with it, as it stamps the stream's later reads with their own
// arrival.
func (b *committedBody) ArrivedAt() (int64, bool) { return b.heldAt, b.heldAt != 0 }

func (b *committedBody) Read(p []byte) (int, error) {
	b.heldAt = 0
	if len(b.held) > 0 {
		// One read of the upstream's at a time, so that each is stamped
		// with its own arrival.
		for len(b.marks) > 0 && b.marks[0].End <= b.replayed {
			b.marks = b.marks[1:]
		}
		if len(b.marks) > 0 {
			b.heldAt = b.marks[0].At
			p = p[:min(len(p), b.marks[0].End-b.replayed)]
		}
		n := copy(p, b.held)
		b.held = b.held[n:]
		b.replayed += n
		b.track(p[:n])
		if len(b.held) == 0 {
			b.held = nil
			b.rd.release(b.s.Budget)
		}
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
	case b.progress.terminal.Load() && (b.ttftCut.Load() || b.stalled.Load() || b.s.stopping.Err() != nil):
		// The upstream sent its terminal frame and then held the
		// connection: the client has the whole stream, and an error frame
		// after its end would turn a complete answer into a failed one
		// (an SDK that reads to the end raises it). The body ends cleanly,
		// a coded one with its coding closed.
		b.stop()
		b.end = endComplete
		if b.tail != nil {
			if end, ok := b.tail.End(func(*llmstream.Boundary) []byte { return nil }); ok && len(end) > 0 {
				b.pending = end
				return n, nil // the coding's end follows on the next read
			}
		}
		b.finished = true
		return n, io.EOF
	case b.ttftCut.Load():
		b.end = endTTFT
		msg := fmt.Sprintf("no content within ttft_timeout (%s) (sse_capture guard)", time.Duration(b.s.pol.hp.TTFTTimeout()))
		if !b.closing(http.StatusGatewayTimeout, ErrTypeTTFTTimeout, msg) {
			b.stop()
			return n, err
		}
	case b.stalled.Load():
		b.end = endStall
		msg := fmt.Sprintf("stream stalled: no content for %s (stall_timeout %s, sse_capture guard)",
			time.Duration(b.silence.Load()).Round(time.Millisecond), b.timeoutInForce())
		if !b.closing(http.StatusGatewayTimeout, ErrTypeStallTimeout, msg) {
			b.stop()
			return n, err // the coding cannot take the frame: the stream is cut
		}
	case b.framed && b.s.stopping.Err() != nil:
		b.end = endShutdown
		if !b.closing(http.StatusServiceUnavailable, errTypeShutdown, "stream ended: the collector is shutting down (sse_capture guard)") {
			b.stop()
			return n, err
		}
	case b.s.req.Context().Err() != nil:
		// The client left (its request's context ended, and the upstream
		// read with it): the upstream broke nothing, and the call costs
		// no budget (settle).
		return n, err
	default:
		b.end, b.err = endBroken, err
		return n, err
	}
	b.stop()
	return n, nil // the frame follows on the next read
}

// closing queues the API's error frame after what the client has read,
// starting on a frame boundary, in the stream's content coding when it has
// one; false when that coding cannot take it.
func (b *committedBody) closing(status int, errType, msg string) bool {
	if b.tail == nil {
		// nil when nothing can close what is open: a binary event stream
		// left inside a message.
		b.pending = b.boundary.ErrorFrame(status, errType, msg)
		return len(b.pending) > 0
	}
	var ok bool
	b.pending, ok = b.tail.End(func(bd *llmstream.Boundary) []byte { return bd.ErrorFrame(status, errType, msg) })
	return ok && len(b.pending) > 0
}

// track follows the bytes given to the client, so that an error frame
// after them starts on a frame boundary (a coded stream's boundary is its
// decoded bytes', which the tail follows).
func (b *committedBody) track(p []byte) {
	b.boundary.Track(p)
}

func (b *committedBody) Close() error {
	b.stop()
	return b.rc.Close()
}

func (b *committedBody) stop() {
	b.closed.Store(true)
	if t := b.timer.Load(); t != nil {
		// A look already under way that arms one more stops it (arm).
		(*t).Stop()
	}
	if t := b.ttftTimer.Load(); t != nil {
		(*t).Stop()
	}
}

// Watch starts the watchdog on the committed stream, if the call's policy
// has a stall timeout, and returns the Progress the copy loop publishes its
// content chunks and terminal frame in (nil when the guard cannot end the
// stream: one it does not frame). A framed stream without a watchdog gets
// one too: shutdown ends it, unless its terminal frame has passed. tail
// ends a content-coded stream (nil for one without a coding). It is for
// the proxy to call once it has wrapped the response body, on the copy
// loop.
func (s *Session) Watch(tail CodedTail) *Progress {
	b := s.committed
	if b == nil {
		return nil
	}
	b.tail = tail
	if !b.framed {
		return nil
	}
	if b.watch {
		// The stall clock starts at the commit; that is no content chunk.
		b.progress.last.Store(b.commitAt)
		b.progress.answered.Store(b.commitAnswered)
		b.arm(s.now(), b.commitAt, b.commitAnswered)
	}
	if b.ttftAt > 0 {
		b.armTTFT(s.now(), b.ttftAt)
	}
	return &b.progress
}

// armTTFT schedules the look at a stream committed past the pre-content
// bound at its TTFT deadline.
func (b *committedBody) armTTFT(now, at int64) {
	t := b.s.clock.AfterFunc(max(time.Duration(at-now), 0), b.fireTTFT)
	b.ttftTimer.Store(&t)
	if b.closed.Load() {
		t.Stop() // closed while this look was under way
	}
}

// fireTTFT gives up a stream committed past the pre-content bound that has
// brought no content by its TTFT deadline, as the race gives up an attempt
// before commit: it signals the copy loop and cancels the upstream read,
// and the copy loop writes the frame.
func (b *committedBody) fireTTFT() {
	if b.closed.Load() || b.progress.blind.Load() || b.progress.delivered.Load() {
		return
	}
	if b.progress.heldSince(b.ttftAt) {
		// A read on its way to the client that arrived before the deadline
		// may hold content: look again shortly, as the stall watchdog does.
		now := b.s.now()
		wait := nextLook(time.Duration(b.ttftWait.Load()), time.Duration(b.s.pol.hp.TTFTTimeout()))
		b.ttftWait.Store(int64(wait))
		b.armTTFT(now, now+int64(wait))
		return
	}
	b.ttftCut.Store(true)
	b.cancel(hedgecore.ErrTTFTTimeout)
}

// arm schedules the watchdog's next look, at the deadline of a stream
// whose last content came at last (the policy's stall deadline, its one
// definition).
func (b *committedBody) arm(now, last int64, answered bool) {
	d := b.s.pol.hp.StallDeadline(last, answered)
	if d == 0 {
		return
	}
	b.lastTimeout.Store(d - last)
	b.lastSource.Store(uint32(b.s.pol.StallTimeoutSource(answered)))
	wake := d
	if a := b.s.pol.hp.StallDeadline(now, true); !answered && a > 0 && a < wake {
		// While only reasoning has come, the deadline shortens the moment an
		// answer chunk arrives; looking again by the deadline an answer
		// chunk now would set catches that in time.
		wake = a
	}
	b.look(time.Duration(wake - now))
}

// unreadLook is how soon the watchdog first looks again at a stream past
// its deadline while a read that arrived before the deadline is still on
// its way to the client: soon, so that such a read postpones the cut by
// about this much, not by a timeout.
const unreadLook = 50 * time.Millisecond

// nextLook is the wait before the next look at a stream whose read is
// still on its way to the client, after a wait of prev (0 at the first):
// unreadLook, doubled at each look that finds a read in flight again, at
// most ceiling (the timeout in force). A client slow to take its bytes, a
// read held for as long as send_timeout, then costs a few looks per
// timeout, not one every unreadLook.
func nextLook(prev, ceiling time.Duration) time.Duration {
	return max(min(2*prev, ceiling), unreadLook)
}

// look schedules the watchdog's next look after wait.
func (b *committedBody) look(wait time.Duration) {
	t := b.s.clock.AfterFunc(max(wait, 0), b.fire)
	b.timer.Store(&t)
	if b.closed.Load() {
		t.Stop() // closed while this look was under way: stop saw the old timer
	}
}

// fire is the watchdog: it reads when content last came; after a silence
// of the timeout it signals the copy loop (the silence, stalled, and the
// upstream read cancelled), else it looks again at the new deadline.
// Keepalives and frames without content never move the deadline: only the
// content chunks the copy loop publishes do.
func (b *committedBody) fire() {
	if b.closed.Load() || b.progress.blind.Load() {
		return
	}
	last, answered := b.progress.last.Load(), b.progress.answered.Load()
	now := b.s.now()
	d := b.s.pol.hp.StallDeadline(last, answered)
	if d == 0 {
		return
	}
	if now < d {
		b.unreadWait.Store(0)
		b.arm(now, last, answered)
		return
	}
	if b.progress.heldSince(d) {
		// A read that arrived before the deadline is still on its way to
		// the client (the client is slow to take it) and may hold content
		// of before the deadline: look again shortly rather than cut a
		// stream that may be flowing. Once it is classified, a silence past
		// the deadline is cut at the next look.
		wait := nextLook(time.Duration(b.unreadWait.Load()), time.Duration(d-last))
		b.unreadWait.Store(int64(wait))
		b.look(wait)
		return
	}
	b.lastTimeout.Store(d - last)
	b.silence.Store(now - last)
	b.stalled.Store(true)
	b.cancel(errStalled) // the upstream read fails, and the copy loop writes the frame
}

func (b *committedBody) timeoutInForce() time.Duration {
	return time.Duration(b.lastTimeout.Load())
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/hedgecore"
	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/sse"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/frames"
)

// gzipChunks codes frames in one gzip member, flushed after each frame as
// a streaming upstream sends them: one coded chunk per frame.
func gzipChunks(t *testing.T, frames ...string) []string {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	chunks := make([]string, 0, len(frames))
	for _, f := range frames {
		_, err := io.WriteString(zw, f)
		require.NoError(t, err)
		require.NoError(t, zw.Flush())
		chunks = append(chunks, out.String())
		out.Reset()
	}
	return chunks
}

var gzipStream = http.Header{"Content-Type": {"text/event-stream"}, "Content-Encoding": {"gzip"}}

// copyLoop stands for the proxy's tee on the test's goroutine: it reads the
// committed body as ReverseProxy does, classifies what it read with the
// same frames.Classifier, and publishes the content chunks to the watchdog.
type copyLoop struct {
	body     io.Reader
	cls      *frames.Classifier
	progress *Progress
	got      bytes.Buffer
}

func watchCoded(t *testing.T, h *harness, s *Session, resp *http.Response) *copyLoop {
	t.Helper()
	l := &copyLoop{body: resp.Body}
	l.cls = frames.New(frames.Options{Shape: llmstream.ShapeChatCompletions, Framing: sse.FramingSSE, Coding: frames.Gzip, MaxDecoded: 1 << 30},
		func(f *llmstream.Frame, at int64, _ error) {
			if f.Kind == llmstream.KindContent && l.progress != nil {
				l.progress.Content(at, true)
			}
		})
	t.Cleanup(func() { _ = l.cls.Close(false) })
	l.progress = s.Watch(l.cls)
	require.NotNil(t, l.progress, "the coded stream is watched")
	_ = h
	return l
}

// read reads n bytes, or to the end when n < 0.
func (l *copyLoop) read(t *testing.T, clockNow int64, n int) string {
	t.Helper()
	var b []byte
	if n < 0 {
		var err error
		b, err = io.ReadAll(l.body)
		require.NoError(t, err, "the stream ends cleanly")
	} else {
		b = []byte(readN(t, l.body, n))
	}
	l.cls.Write(b, clockNow)
	l.got.Write(b)
	return string(b)
}

func gunzip(t *testing.T, b []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	out, err := io.ReadAll(zr)
	require.NoError(t, err, "the client's gzip stream is whole, checksum and all")
	return string(out)
}

// TestCodedStreamCommitsOnItsFirstContentChunk: a gzip stream is read for
// its decoded frames, so its first content chunk commits it at once (no
// hedge, no TTFT timeout), the client gets the coded bytes as sent, and a
// stall after it ends with the stall frame in the stream's own coding.
func TestCodedStreamCommitsOnItsFirstContentChunk(t *testing.T) {
	h := newHarness(t, Rule{Delay: 100 * time.Millisecond, TTFTTimeout: time.Second, StallTimeout: time.Second, MaxAttempts: 2})
	s, out, _ := h.call(t)
	p := h.primary.next(t)
	coded := gzipChunks(t, roleFrame, textFrame, textFrame)
	p.streamWith(gzipStream, coded[0])
	h.blockUntil(t, 1)
	pending(t, out)
	p.write(coded[1])
	r := wait(t, out)
	require.NoError(t, r.err, "committed on the decoded content chunk, before the hedge delay")
	h.alt.none(t)

	l := watchCoded(t, h, s, r.resp)
	assert.Equal(t, coded[0]+coded[1], l.read(t, h.clock.Now().UnixNano(), len(coded[0]+coded[1])), "the coded bytes, byte for byte")
	h.clock.Advance(600 * time.Millisecond)
	p.write(coded[2])
	l.read(t, h.clock.Now().UnixNano(), len(coded[2]))
	h.blockUntil(t, 1)
	h.clock.Advance(400 * time.Millisecond) // the first deadline: content at 600 ms moved it
	h.blockUntil(t, 1)
	h.clock.Advance(600 * time.Millisecond)
	assert.ErrorIs(t, p.cancelled(t), errStalled)
	l.read(t, h.clock.Now().UnixNano(), -1)
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
	assert.Equal(t, ErrTypeStallTimeout, s.Ended())

	bd := llmstream.NewBoundary(llmstream.ShapeChatCompletions, sse.FramingSSE)
	bd.Track([]byte(roleFrame + textFrame + textFrame))
	frame := string(bd.ErrorFrame(http.StatusGatewayTimeout, ErrTypeStallTimeout,
		"stream stalled: no content for 1s (stall_timeout 1s, sse_capture guard)"))
	assert.Equal(t, roleFrame+textFrame+textFrame+frame, gunzip(t, l.got.Bytes()), "the stall frame, gzip-coded after the stream")
}

// TestCodedStreamNotAtAFlushIsCut: a coded stream that stalls in the middle
// of its coding cannot take a frame: it is cut, and still counts as ended
// by the watchdog.
func TestCodedStreamNotAtAFlushIsCut(t *testing.T) {
	h := newHarness(t, Rule{StallTimeout: time.Second, MaxAttempts: 1})
	s, out, _ := h.call(t)
	p := h.primary.next(t)
	coded := gzipChunks(t, roleFrame+textFrame, textFrame)
	p.streamWith(gzipStream, coded[0], coded[1][:len(coded[1])-2]) // the flush mark's last bytes are missing
	r := wait(t, out)
	require.NoError(t, r.err)
	l := watchCoded(t, h, s, r.resp)
	l.read(t, h.clock.Now().UnixNano(), len(coded[0]))
	l.read(t, h.clock.Now().UnixNano(), len(coded[1])-2)
	h.blockUntil(t, 1)
	h.clock.Advance(time.Second)
	assert.ErrorIs(t, p.cancelled(t), errStalled)
	_, err := io.ReadAll(r.resp.Body)
	require.Error(t, err, "cut: a plain frame would corrupt the coding")
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
	assert.Equal(t, ErrTypeStallTimeout, s.Ended())
}

// commentChunk is a 16 KiB SSE comment: bytes without content.
var commentChunk = ":" + strings.Repeat("x", 16<<10-3) + "\n\n"

// TestPastTheHeldBoundTheStreamIsWatched: more than maxHeldBytes before any
// content commits the attempt then, and it is still framed and watched: a
// stall after it is ended at stall_timeout from the commit.
func TestPastTheHeldBoundTheStreamIsWatched(t *testing.T) {
	h := newHarness(t, Rule{StallTimeout: time.Second, MaxAttempts: 1})
	s, out, _ := h.call(t)
	p := h.primary.next(t)
	p.stream(roleFrame)
	n := maxHeldBytes/len(commentChunk) + 1
	go func() {
		for range n {
			p.write(commentChunk)
		}
	}()
	r := wait(t, out)
	require.NoError(t, r.err, "committed past the bound, before any content")
	cc := &contentClock{p: s.Watch(nil)}
	require.NotNil(t, cc.p, "watched")
	held := readN(t, r.resp.Body, len(roleFrame)+n*len(commentChunk))
	assert.Equal(t, roleFrame+strings.Repeat(commentChunk, n), held, "the client gets every byte")
	p.write(keepaliveFrame)
	assert.Equal(t, keepaliveFrame, readN(t, r.resp.Body, len(keepaliveFrame)))
	h.blockUntil(t, 1)
	h.clock.Advance(time.Second)
	assert.ErrorIs(t, p.cancelled(t), errStalled, "keepalives never move the deadline")
	rest, err := io.ReadAll(r.resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(rest), `"stall_timeout"`)
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
	assert.Equal(t, ErrTypeStallTimeout, s.Ended())
}

// TestHeldBytesDrawOnTheSharedBudget: an attempt holds its first heldFree
// bytes for free and draws on the receiver's budget past them; when the
// budget cannot take more it is committed with what it holds (nothing is
// lost, nothing more is held), and the budget is whole again once the
// client has the bytes.
func TestHeldBytesDrawOnTheSharedBudget(t *testing.T) {
	h := newHarness(t, Rule{StallTimeout: time.Second, MaxAttempts: 1})
	s, out, _ := h.call(t)
	budget := sse.NewSharedBudget(128 << 10)
	s.Budget = budget
	p := h.primary.next(t)
	p.stream(roleFrame)
	const n = 32 // 512 KiB: past heldFree and the budget, under maxHeldBytes
	go func() {
		for range n {
			p.write(commentChunk)
		}
	}()
	r := wait(t, out)
	require.NoError(t, r.err, "committed when the budget refused more")
	assert.Positive(t, budget.Used(), "the held bytes past heldFree draw on the budget")
	assert.LessOrEqual(t, budget.Used(), int64(128<<10))
	require.NotNil(t, s.Watch(nil), "watched")
	held := readN(t, r.resp.Body, len(roleFrame)+n*len(commentChunk))
	assert.Equal(t, roleFrame+strings.Repeat(commentChunk, n), held, "every byte, the ones read after the commit too")
	assert.Zero(t, budget.Used(), "given back once the client has them")
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
	assert.Zero(t, budget.Used())
}

// TestDroppedAttemptGivesItsBudgetBack: a loser's held bytes are let go.
func TestDroppedAttemptGivesItsBudgetBack(t *testing.T) {
	h := newHarness(t, Rule{Delay: 100 * time.Millisecond, MaxAttempts: 2})
	s, out, _ := h.call(t)
	budget := sse.NewSharedBudget(4 << 20)
	s.Budget = budget
	p := h.primary.next(t)
	p.stream(roleFrame)
	for range 8 {
		p.write(commentChunk)
	}
	require.Eventually(t, func() bool { return budget.Used() > 0 }, 5*time.Second, time.Millisecond)
	h.blockUntil(t, 1)
	h.clock.Advance(100 * time.Millisecond)
	a := h.alt.next(t)
	a.stream(roleFrame, textFrame)
	r := wait(t, out)
	require.NoError(t, r.err)
	assert.ErrorIs(t, p.cancelled(t), errLoser)
	readN(t, r.resp.Body, len(roleFrame+textFrame))
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
	assert.Zero(t, budget.Used(), "the loser's held bytes gave their budget back")
}

// TestDoneBeforeContentIsNotWatched: a stream that completes without
// content is passed on as it came, and no watchdog ends it.
func TestDoneBeforeContentIsNotWatched(t *testing.T) {
	h := newHarness(t, Rule{StallTimeout: time.Second, MaxAttempts: 1})
	s, out, _ := h.call(t)
	p := h.primary.next(t)
	p.stream(roleFrame, doneFrame)
	r := wait(t, out)
	require.NoError(t, r.err)
	assert.Nil(t, s.Watch(nil), "not watched")
	assert.Equal(t, roleFrame+doneFrame, readN(t, r.resp.Body, len(roleFrame+doneFrame)))
	h.clock.Advance(time.Hour)
	p.end()
	rest, err := io.ReadAll(r.resp.Body)
	require.NoError(t, err)
	assert.Empty(t, rest, "no frame of the guard's")
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
	assert.Empty(t, s.Ended())
}

// TestReadNotClassifiedYetIsNoSilence: a read the copy loop has not
// classified yet (its bytes still on their way to a slow client) may hold
// content: the watchdog waits for it; once it is classified as no content,
// the silence counts from the last content chunk.
func TestReadNotClassifiedYetIsNoSilence(t *testing.T) {
	h := newHarness(t, Rule{StallTimeout: time.Second, MaxAttempts: 1})
	s, p, resp, cc := h.commit(t, textFrame)
	start := h.clock.Now()
	h.blockUntil(t, 1)
	h.clock.Advance(900 * time.Millisecond)
	cc.p.Arrived(h.clock.Now().UnixNano(), h.clock.Now().UnixNano())
	h.clock.Advance(100 * time.Millisecond) // the first deadline: a read is still unclassified
	h.blockUntil(t, 1)
	select {
	case <-p.req.Context().Done():
		t.Fatal("cut while a read was still to be classified")
	default:
	}
	cc.p.Classified() // it held no content
	h.clock.Advance(900 * time.Millisecond)
	assert.ErrorIs(t, p.cancelled(t), errStalled)
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(rest), "no content for 1.9s", "the silence since the last content chunk at %s", start)
	require.NoError(t, resp.Body.Close())
	s.Finish()
	assert.Equal(t, ErrTypeStallTimeout, s.Ended())
}

// TestSlowClientIsNoStall: a read that stays on its way to the client for
// longer than the stall timeout (the client is slow to take it, the
// upstream is not known to be silent) never cuts the stream; once it is
// classified as no content, the silence counts from the last content chunk.
func TestSlowClientIsNoStall(t *testing.T) {
	h := newHarness(t, Rule{StallTimeout: time.Second, MaxAttempts: 1})
	s, p, resp, cc := h.commit(t, textFrame)
	h.blockUntil(t, 1)
	h.clock.Advance(900 * time.Millisecond)
	cc.p.Arrived(h.clock.Now().UnixNano(), h.clock.Now().UnixNano())
	for range 3 { // deadlines at 1.9 s, 2.9 s, 3.9 s: the read is still with the client
		h.clock.Advance(time.Second)
		h.blockUntil(t, 1)
		select {
		case <-p.req.Context().Done():
			t.Fatal("a slow client's stream was cut as stalled")
		default:
		}
	}
	cc.p.Classified() // it held no content
	h.clock.Advance(time.Second)
	assert.ErrorIs(t, p.cancelled(t), errStalled)
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(rest), "stall_timeout")
	require.NoError(t, resp.Body.Close())
	s.Finish()
	assert.Equal(t, ErrTypeStallTimeout, s.Ended())
}

// TestPastTheHeldBoundTTFTTimeoutStillHolds: an attempt committed past the
// pre-content bound has not delivered content yet. Without a stall timeout
// its ttft_timeout still gives it up: at the attempt's start plus the
// timeout the stream ends with the shape's error frame (ttft_timeout) and
// the upstream request is closed, or a long preamble would take the call
// past ttft_timeout for as long as the upstream holds it.
func TestPastTheHeldBoundTTFTTimeoutStillHolds(t *testing.T) {
	h := newHarness(t, Rule{TTFTTimeout: 5 * time.Second, MaxAttempts: 1})
	s, out, _ := h.call(t)
	p := h.primary.next(t)
	p.stream(roleFrame)
	n := maxHeldBytes/len(commentChunk) + 1
	go func() {
		for range n {
			p.write(commentChunk)
		}
	}()
	r := wait(t, out)
	require.NoError(t, r.err, "committed past the bound, before any content")
	require.NotNil(t, s.Watch(nil), "watched for its first content")
	held := readN(t, r.resp.Body, len(roleFrame)+n*len(commentChunk))
	assert.Equal(t, roleFrame+strings.Repeat(commentChunk, n), held, "the client gets every byte")
	h.blockUntil(t, 1)
	h.clock.Advance(5 * time.Second)
	assert.ErrorIs(t, p.cancelled(t), hedgecore.ErrTTFTTimeout, "the upstream request is closed")
	rest, err := io.ReadAll(r.resp.Body)
	require.NoError(t, err, "a clean end, after the frame")
	assert.Contains(t, string(rest), `"ttft_timeout"`)
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
	assert.Equal(t, ErrTypeTTFTTimeout, s.Ended())
}

// TestPastTheHeldBoundContentDisarmsTheTTFTTimeout: once the stream
// committed past the bound brings content, ttft_timeout no longer applies.
func TestPastTheHeldBoundContentDisarmsTheTTFTTimeout(t *testing.T) {
	h := newHarness(t, Rule{TTFTTimeout: 5 * time.Second, MaxAttempts: 1})
	s, out, _ := h.call(t)
	p := h.primary.next(t)
	p.stream(roleFrame)
	n := maxHeldBytes/len(commentChunk) + 1
	go func() {
		for range n {
			p.write(commentChunk)
		}
	}()
	r := wait(t, out)
	require.NoError(t, r.err)
	cc := &contentClock{p: s.Watch(nil)}
	require.NotNil(t, cc.p)
	readN(t, r.resp.Body, len(roleFrame)+n*len(commentChunk))
	h.clock.Advance(time.Second)
	p.write(textFrame)
	assert.Equal(t, textFrame, readN(t, r.resp.Body, len(textFrame)))
	cc.set(h.clock.Now(), true)
	h.blockUntil(t, 1)
	h.clock.Advance(10 * time.Second)
	p.write(doneFrame)
	p.end()
	rest, err := io.ReadAll(r.resp.Body)
	require.NoError(t, err)
	assert.Equal(t, doneFrame, string(rest), "the upstream's own end, no frame")
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
	assert.Empty(t, s.Ended())
}

// TestReadsInFlightPostponeACutBriefly: a read that arrived before the
// deadline and is still in flight at it postpones the cut only until the
// watchdog's next look (unreadLook), not by a stall timeout; reads that
// arrive after the deadline do not postpone it at all
// (TestReadArrivedPastTheDeadlineDoesNotHoldTheCut).
func TestReadsInFlightPostponeACutBriefly(t *testing.T) {
	h := newHarness(t, Rule{StallTimeout: time.Second, MaxAttempts: 1})
	s, p, resp, cc := h.commit(t, textFrame)
	h.blockUntil(t, 1)
	h.clock.Advance(950 * time.Millisecond)
	cc.p.Arrived(h.clock.Now().UnixNano(), h.clock.Now().UnixNano()) // a read of comments, in flight at the deadline
	h.clock.Advance(50 * time.Millisecond)
	h.blockUntil(t, 1)
	select {
	case <-p.req.Context().Done():
		t.Fatal("cut while a read was still to be classified")
	default:
	}
	cc.p.Classified() // it held no content
	h.clock.Advance(unreadLook)
	assert.ErrorIs(t, p.cancelled(t), errStalled, "cut at the next look, not a timeout after the read")
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(rest), "no content for 1.05s")
	require.NoError(t, resp.Body.Close())
	s.Finish()
	assert.Equal(t, ErrTypeStallTimeout, s.Ended())
}

// TestNextLookBacksOff: a read found in flight again and again is looked at
// after 50 ms, then twice as long each time, never longer than the timeout
// in force, and never sooner than 50 ms (a timeout below it included).
func TestNextLookBacksOff(t *testing.T) {
	var waits []time.Duration
	prev := time.Duration(0)
	for range 7 {
		prev = nextLook(prev, time.Second)
		waits = append(waits, prev)
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}, waits)
	assert.Equal(t, unreadLook, nextLook(0, 10*ms))
	assert.Equal(t, unreadLook, nextLook(unreadLook, 10*ms))
}

// TestReadHeldInFlightBacksOffTheLooks: while a read that arrived before
// the deadline stays on its way to the client past it, each look waits
// twice as long as the last, so a slow client costs a few looks; the cut
// comes at the first look after the read is classified.
func TestReadHeldInFlightBacksOffTheLooks(t *testing.T) {
	h := newHarness(t, Rule{StallTimeout: time.Second, MaxAttempts: 1})
	_, p, resp, cc := h.commit(t, textFrame)
	h.blockUntil(t, 1)
	h.clock.Advance(950 * time.Millisecond)
	cc.p.Arrived(h.clock.Now().UnixNano(), h.clock.Now().UnixNano()) // held by a slow client
	notCut := func(why string) {
		h.blockUntil(t, 1)
		select {
		case <-p.req.Context().Done():
			t.Fatal(why)
		default:
		}
	}
	h.clock.Advance(50 * time.Millisecond) // the deadline: the read is in flight, look in 50 ms
	notCut("cut at the deadline with a read in flight")
	h.clock.Advance(unreadLook) // still in flight: look in 100 ms
	notCut("cut at the first look with a read in flight")
	cc.p.Classified()
	h.clock.Advance(unreadLook)
	notCut("looked again after 50 ms, not the 100 the back-off set")
	h.clock.Advance(unreadLook)
	assert.ErrorIs(t, p.cancelled(t), errStalled)
	_, _ = io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
}

// TestReadArrivedPastTheDeadlineDoesNotHoldTheCut: a read in flight that
// arrived after the deadline cannot hold content of before it, so the look
// at the deadline cuts: an upstream that sends keepalives without pause
// keeps such a read in flight at most moments, and on a busy proxy at
// every look.
func TestReadArrivedPastTheDeadlineDoesNotHoldTheCut(t *testing.T) {
	h := newHarness(t, Rule{StallTimeout: time.Second, MaxAttempts: 1})
	_, p, resp, cc := h.commit(t, textFrame)
	h.blockUntil(t, 1)
	h.clock.Advance(time.Second - time.Millisecond)
	cc.p.Classified()
	cc.p.Reading(h.clock.Now().UnixNano()) // the copy loop reads again, and waits for bytes
	// The deadline passes with the watchdog's look still to come (a busy
	// machine runs it late): the read in flight then arrived after it.
	cc.p.Arrived(h.clock.Now().Add(2*time.Millisecond).UnixNano(), h.clock.Now().Add(2*time.Millisecond).UnixNano())
	h.clock.Advance(5 * time.Millisecond)
	assert.ErrorIs(t, p.cancelled(t), errStalled, "cut at the deadline's look, the read in flight notwithstanding")
	_, _ = io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
}

// TestClientSlowTwiceInARowIsNoStall: the watchdog spares a read that
// arrived before the deadline while it is on its way to a slow client
// (TestSlowClientIsNoStall). The copy loop reads the upstream only after
// the client took the previous read: the bytes the upstream sent meanwhile
// wait in the socket and are read at once. Counted as arrived when read,
// the next read would have "arrived after the deadline" and no longer hold
// the cut when the client is slow with it again: a stream whose upstream
// never paused would be ended as stall_timeout (the upstream blamed, the
// budget charged). A read that came back at once counts as arrived when the
// last one came back. docs/security.md: "a slow client is not a stalled
// upstream".
func TestClientSlowTwiceInARowIsNoStall(t *testing.T) {
	h := newHarness(t, Rule{StallTimeout: time.Second, MaxAttempts: 1})
	s, p, resp, cc := h.commit(t, textFrame)
	cc.set(h.clock.Now(), true) // content at 0
	h.blockUntil(t, 1)
	h.clock.Advance(900 * time.Millisecond)
	r1 := h.clock.Now()
	cc.p.Reading(r1.Add(-100 * time.Millisecond).UnixNano())
	cc.p.Arrived(r1.UnixNano(), r1.UnixNano()) // read 1, with content, on its way to a slow client
	h.clock.Advance(time.Second)               // 1.9 s: the deadline; read 1 holds the cut
	h.blockUntil(t, 1)
	h.clock.Advance(20 * time.Millisecond) // 1.92 s: the client took read 1 at last
	cc.set(r1, true)
	cc.p.Classified()
	// The copy loop reads at once what the upstream sent while it waited
	// on the client (content among it), and waits on the client again.
	cc.p.Reading(h.clock.Now().UnixNano())
	cc.p.Arrived(h.clock.Now().UnixNano(), h.clock.Now().UnixNano())
	h.clock.Advance(30 * time.Millisecond) // the watchdog's next look
	select {
	case <-p.req.Context().Done():
		t.Error("a stream whose upstream never paused was cut as stalled: its client was slow twice in a row")
	case <-time.After(50 * time.Millisecond):
	}
	cc.p.Classified()
	require.NoError(t, resp.Body.Close())
	s.Finish()
	assert.Empty(t, s.Ended())
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/streamstall/streamstall/internal/hedgecore"
)

// errCallClosed ends a call closed before its end.
var errCallClosed = errors.New("hedge: call closed")

// errEmptyAnswer is an attempt whose stream ended before any content with
// no finish reason either ("data: [DONE]" alone): a broken answer, which
// fails as a 5xx does rather than win the race with nothing. An answer
// that says why it is empty (a content filter, a max_tokens of 0) is an
// answer.
var errEmptyAnswer = errors.New("hedge: the source ended its stream with no content and no finish reason")

// Call is one logical call in flight. Its methods are for one goroutine,
// like a bufio.Scanner: Next, Chunk, Err, Result, Close. Only the readers of
// the attempts run in goroutines of their own, and all of them have returned
// when the call has ended and Close has returned.
type Call struct {
	h    *Hedger
	req  Request
	base time.Time

	ctx    context.Context
	cancel context.CancelCauseFunc
	tel    callTelemetry

	race   hedgecore.Race
	drv    hedgecore.Driver[attemptEvent]
	src    *hedgecore.Live[attemptEvent]
	live   [hedgecore.MaxAttempts]liveAttempt
	events chan attemptEvent
	wg     sync.WaitGroup

	queue    []Chunk
	cur      Chunk
	partial  strings.Builder // text the caller got (streaming delivery)
	chunks   int
	finished bool
	closed   bool
	err      error
	result   Result
}

// liveAttempt is the driver's side of one attempt.
type liveAttempt struct {
	cancel context.CancelFunc
	span   trace.Span
	chunks []Chunk // buffered delivery only
	model  string
	usage  Usage
	finish string
	err    error
	// failedAt is when the attempt's reader failed; its span ends then.
	failedAt int64
	// events are the chunk events its span gets when it ends, bounded.
	events *hedgecore.Keeper
	ended  bool
}

// attemptEvent is what a reader goroutine hands to the call: one stream
// event or the error that ended the attempt, stamped when it arrived.
type attemptEvent struct {
	attempt int
	at      int64
	ev      Event
	err     error
}

func (h *Hedger) start(ctx context.Context, req Request, buffered bool) *Call {
	c := &Call{h: h, req: req, events: make(chan attemptEvent, 8), base: h.clock.Now()}
	ctx = c.tel.startCall(ctx, h, buffered, c.base)
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	c.src = hedgecore.NewLive(c.ctx, h.clock, c.now, c.events)
	c.drv = hedgecore.NewDriver(&c.race, c.src, (*carrier)(c))
	c.race.Reset(h.policy, buffered)
	c.drv.Start(c.now())
	c.settle()
	return c
}

// now is the call's time in unix nanoseconds: wall clock at the start, then
// the monotonic clock, so that a wall-clock step never fires or starves a
// timer of the race.
func (c *Call) now() int64 { return c.base.UnixNano() + int64(c.h.clock.Since(c.base)) }

// Next waits for the next content chunk and reports whether there is one.
// In buffered delivery (Complete) it only runs the call to its end.
func (c *Call) Next() bool {
	for {
		if len(c.queue) > 0 {
			c.cur = c.queue[0]
			c.queue = append(c.queue[:0], c.queue[1:]...) // keeps the one backing array
			return true
		}
		if c.finished {
			return false
		}
		c.wait()
	}
}

// Chunk returns the chunk Next found.
func (c *Call) Chunk() Chunk { return c.cur }

// Err returns the error that ended the call, nil after success. A stall is
// a *StallError; a refusal of the sources is their error (*StatusError...).
func (c *Call) Err() error { return c.err }

// Result describes the finished call.
func (c *Call) Result() Result { return c.result }

// Close cancels whatever still runs and waits for every goroutine of the
// call. It is safe to call more than once.
func (c *Call) Close() {
	if c.closed {
		return
	}
	c.closed = true
	if !c.finished {
		c.drv.Abort(errCallClosed)
		c.settle()
	}
	c.cancel(errCallClosed)
	c.src.Stop()
	c.wg.Wait()
}

// wait handles one event: an attempt's frame or end, a timer, or the
// caller's context.
func (c *Call) wait() {
	c.drv.Step()
	c.settle()
}

// carrier is the call as its driver sees it.
type carrier Call

func (c *carrier) Handle(e attemptEvent) { (*Call)(c).handle(e) }
func (c *carrier) Launch(i int)          { (*Call)(c).launch(i) }
func (c *carrier) Cancel(i int)          { (*Call)(c).drop(i) }

func (c *Call) handle(e attemptEvent) {
	i := e.attempt
	if c.race.Attempt(i).State != hedgecore.Running {
		return // a cancelled attempt is never resurrected
	}
	a := &c.live[i]
	if e.ev.Model != "" {
		a.model = e.ev.Model
	}
	switch {
	case e.err != nil:
		a.err, a.failedAt = e.err, e.at
		var wait time.Duration
		if se := (*StatusError)(nil); errors.As(e.err, &se) {
			wait = se.RetryAfter
		}
		c.race.FailAfter(i, e.at, classify(e.err), e.err, e.at+int64(wait))
	case e.ev.Type == EventContent:
		ch := e.ev.Chunk
		var deliver bool
		if ch.Kind == ChunkReasoning {
			deliver = c.race.Reasoning(i, e.at)
		} else {
			deliver = c.race.Content(i, e.at, ch.Kind == ChunkText)
		}
		c.tel.chunk(a, e.at, ch.Kind)
		switch {
		case c.race.Buffered():
			a.chunks = append(a.chunks, ch)
		case deliver:
			c.queue = append(c.queue, ch)
			c.chunks++
			if ch.Kind == ChunkText {
				c.partial.WriteString(ch.Text)
			}
		}
	case e.ev.Type == EventKeepalive:
		if c.h.cfg.keepalives {
			c.tel.keepalive(a.span, e.at)
		}
	case e.ev.Type == EventDone:
		a.usage, a.finish = e.ev.Usage, e.ev.FinishReason
		if c.race.Attempt(i).Chunks == 0 && e.ev.FinishReason == "" {
			err := fmt.Errorf("%w (%s)", errEmptyAnswer, c.h.sources[c.race.Attempt(i).Source].Name())
			a.err, a.failedAt = err, e.at
			c.race.FailAfter(i, e.at, hedgecore.Retryable, err, e.at)
			return
		}
		c.race.Complete(i, e.at)
	}
}

// drop cancels an attempt the race dropped.
func (c *Call) drop(i int) {
	c.live[i].cancel()
	if !c.race.Done() {
		// A loser's span ends when it is dropped; at the end of the call,
		// finish settles who stands for it.
		c.endAttempt(i, false, c.now())
	}
}

// settle settles the call once the race has ended.
func (c *Call) settle() {
	if c.race.Done() && !c.finished {
		c.finish()
	}
}

func (c *Call) launch(i int) {
	ra := c.race.Attempt(i)
	src := c.h.sources[ra.Source]
	req := c.req
	if ra.Continuation {
		req.Prefix = c.partial.String()
	}
	ctx, cancel := context.WithCancel(c.ctx)
	// The span starts when the race started the attempt, so that the TTFT
	// the stall processor derives is the one the race learned from.
	ctx, span := c.tel.startAttempt(ctx, c.h, src, i, ra)
	c.live[i] = liveAttempt{cancel: cancel, span: span}
	c.wg.Add(1)
	go c.read(ctx, i, src, &req)
}

// read runs one attempt: it opens the stream and hands every event to the
// call until the stream ends or the attempt is cancelled.
func (c *Call) read(ctx context.Context, i int, src Source, req *Request) {
	defer c.wg.Done()
	st, err := src.Open(ctx, req)
	if err != nil {
		c.send(ctx, attemptEvent{attempt: i, at: c.now(), err: err})
		return
	}
	defer func() { _ = st.Close() }()
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // EOF before EventDone: the stream was cut
		}
		if !c.send(ctx, attemptEvent{attempt: i, at: c.now(), ev: ev, err: err}) || err != nil || ev.Type == EventDone {
			return
		}
	}
}

func (c *Call) send(ctx context.Context, e attemptEvent) bool {
	select {
	case c.events <- e:
		return true
	case <-ctx.Done():
		return false
	}
}

// finish settles the result or the error, ends the spans and releases the
// attempts that are still running.
func (c *Call) finish() {
	c.finished = true
	r := &c.race
	c.cancel(errCallClosed)
	rep := r.Winner() // the attempt that stands for the call in telemetry
	if rep < 0 {
		rep = r.Committed()
	}
	if rep < 0 {
		rep = r.ErrFrom()
	}
	if r.Err() != nil {
		c.err = c.callError()
	} else {
		c.result = c.buildResult()
	}
	now := c.now()
	for i := range r.Attempts() {
		c.endAttempt(i, i == rep, now)
	}
	c.tel.endCall(c.err, now)
}

func (c *Call) callError() error {
	r := &c.race
	if !errors.Is(r.Err(), hedgecore.ErrStalled) {
		return r.Err()
	}
	i := r.ErrFrom()
	src := c.h.sources[r.Attempt(i).Source]
	se := &StallError{Source: src.Name(), Model: c.live[i].modelOr(src), Silence: time.Duration(c.h.policy.StallTimeout())}
	if r.Buffered() {
		se.Chunks = len(c.live[i].chunks)
		se.Partial = joinText(c.live[i].chunks)
	} else {
		se.Chunks = c.chunks
		se.Partial = c.partial.String()
	}
	return se
}

func (c *Call) buildResult() Result {
	r := &c.race
	w := &c.live[r.Winner()]
	src := c.h.sources[r.Attempt(r.Winner()).Source]
	res := Result{
		Source:       src.Name(),
		Model:        w.modelOr(src),
		Usage:        w.usage,
		FinishReason: w.finish,
		Attempts:     r.Attempts(),
	}
	if r.Buffered() {
		res.Chunks = w.chunks
		res.Text = joinText(w.chunks)
	} else {
		res.Text = c.partial.String()
	}
	return res
}

func (c *Call) endAttempt(i int, representative bool, now int64) {
	a := &c.live[i]
	if a.ended {
		return
	}
	a.ended = true
	if a.failedAt != 0 {
		now = a.failedAt // a failed attempt ran until it failed, not until the call ended
	}
	ra := c.race.Attempt(i)
	var err error
	switch {
	case ra.State == hedgecore.Failed:
		err = a.err
		if err == nil {
			err = hedgecore.ErrStalled // failed by the watchdog, not by its reader
		}
	case representative && c.race.Err() != nil:
		err = c.err
	}
	c.tel.endAttempt(a, c.h.sources[ra.Source], representative, err, now)
}

func (a *liveAttempt) modelOr(src Source) string {
	if a.model != "" {
		return a.model
	}
	return src.Model()
}

func joinText(chunks []Chunk) string {
	var b strings.Builder
	for _, ch := range chunks {
		if ch.Kind == ChunkText {
			b.WriteString(ch.Text)
		}
	}
	return b.String()
}

// When is the time the event arrived (hedgecore.Timed).
func (e attemptEvent) When() int64 { return e.at }

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/streamstall/streamstall/internal/hedgecore"
	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/sse"
)

// error.type values of the calls the guard ends (docs/contract.md section 7).
const (
	ErrTypeTTFTTimeout  = "ttft_timeout"
	ErrTypeStallTimeout = "stall_timeout"
)

// maxHeldBytes bounds what one attempt holds before its first content chunk.
// Frames without content are a few hundred bytes (a role-only delta,
// message_start, pings); an attempt past the bound is committed as it is,
// so that an upstream cannot make the proxy buffer without end.
const maxHeldBytes = 1 << 20

// readBufferSize is the read buffer of an attempt before commit.
const readBufferSize = 16 << 10

var (
	// errLoser cancels an attempt the race dropped.
	errLoser = errors.New("guard: attempt dropped by the race")
	// errStreamError is an attempt's in-stream error frame before content.
	errStreamError = errors.New("guard: the upstream reported an error before any content")
	errStalled     = errors.New("guard: stream stalled")
	errSettled     = errors.New("guard: call settled")
)

// StatusError is an attempt's error status.
type StatusError struct{ Status int }

func (e *StatusError) Error() string { return "upstream answered " + strconv.Itoa(e.Status) }

// classify sorts an error status as the hedge client does (docs/contract.md
// section 8): 408, 429 and 5xx may succeed elsewhere, other 4xx never.
func classify(status int) hedgecore.Class {
	if status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500 {
		return hedgecore.Retryable
	}
	return hedgecore.Fatal
}

// Frame is a frame without content an attempt received before commit.
type Frame struct {
	At   int64
	Kind llmstream.Kind
}

// Report is what the proxy records of one attempt of a guarded call.
type Report struct {
	Attempt     int
	Trigger     hedgecore.Trigger
	Delay       int64
	DelaySource hedgecore.DelaySource
	// Upstream is the alternate the attempt went to, nil for the primary.
	Upstream *Upstream
	Start    int64
	End      int64
	Status   int
	// Err is the attempt's own failure (a transport error, an error status,
	// an error frame, a cut stream, ErrTTFTTimeout); nil for an attempt
	// the race dropped, or one that delivered.
	Err  error
	Meta llmstream.Meta
	// Frames are the frames without content before commit.
	Frames []Frame
}

// Session runs the attempts of one guarded call: Start, then RoundTrip in
// place of the proxy's transport, then Finish once the response is over.
// Its methods run on the proxy handler's goroutine; only the attempts'
// readers and the watchdog run in goroutines of their own, and Finish
// waits for every one of them.
type Session struct {
	pol      *Policy
	clock    clockwork.Clock
	shape    llmstream.Shape
	body     []byte
	inURL    url.URL
	stopping context.Context
	start    int64
	// OnAttempt prepares attempt i's request headers before it goes (the
	// proxy names the attempt's span in its traceparent).
	OnAttempt func(i int, h http.Header)

	race    hedgecore.Race
	req     *http.Request
	primary http.RoundTripper
	live    [hedgecore.MaxAttempts]liveAttempt
	readers [hedgecore.MaxAttempts]*reader
	events  chan event
	wg      sync.WaitGroup
	timer   clockwork.Timer
	armedAt int64

	rep       int // the attempt whose response the client got
	ttftEnded bool
	committed *committedBody
	finished  bool
}

// liveAttempt is the session's side of an attempt.
type liveAttempt struct {
	cancel context.CancelCauseFunc
	end    int64 // when the race dropped it or it failed
	// failed is set when its reader reported its failure; an attempt the
	// race failed without it timed out.
	failed bool
}

// reader is an attempt's reader goroutine's side. The goroutine owns it
// until it has sent its one event, or until the session has waited for it.
type reader struct {
	resp      *http.Response
	held      []byte
	meta      llmstream.Meta
	frames    []Frame
	err       error
	firstKind string
}

type eventKind uint8

const (
	// evContent: the first content chunk; the held bytes end with it.
	evContent eventKind = iota
	// evDone: a complete response without content (a done frame first, or
	// a response that is not an event stream).
	evDone
	// evFailed: an error status, a transport error, an error frame or an
	// end of stream before any content.
	evFailed
)

type event struct {
	attempt int
	at      int64
	kind    eventKind
	class   hedgecore.Class
	err     error
}

// NewSession returns the session of one streaming call of the given shape
// to model, started at start (unix nanoseconds); inURL is the client's
// request URL, body its body. stopping is done when the proxy ends its
// streams at shutdown.
func (g *Guard) NewSession(stopping context.Context, model string, shape llmstream.Shape, inURL *url.URL, body []byte, start int64) *Session {
	return &Session{
		pol: g.For(model), clock: g.clock, shape: shape, body: body, inURL: *inURL,
		stopping: stopping, start: start, events: make(chan event, hedgecore.MaxAttempts),
	}
}

// Policy returns the policy the call is guarded by.
func (s *Session) Policy() *Policy { return s.pol }

func (s *Session) now() int64 { return s.clock.Now().UnixNano() }

// RoundTrip runs the call's attempts from req, the request the proxy sends
// the primary over primary, and returns what the client gets: the committed
// attempt's response (its held bytes, then its stream), the last failure as
// its upstream sent it, or a 504 in the shape's error format when the last
// attempt had no content within ttft_timeout. Nothing reaches the client
// before it returns. An error is a transport error of the last attempt, or
// the request's context's.
func (s *Session) RoundTrip(req *http.Request, primary http.RoundTripper) (*http.Response, error) {
	s.req, s.primary = req, primary
	ctx := req.Context()
	s.race.Reset(s.pol.hp, false)
	s.race.Start(s.start)
	s.apply()
	for s.race.Committed() < 0 && !s.race.Done() {
		s.arm()
		var tick <-chan time.Time
		if s.armedAt != 0 {
			tick = s.timer.Chan()
		}
		select {
		case e := <-s.events:
			s.handle(e)
		case <-tick:
			s.armedAt = 0
			s.race.Advance(s.now())
		case <-ctx.Done():
			s.race.Abort(context.Cause(ctx))
		}
		s.apply()
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	return s.result(ctx)
}

// arm sets the timer to the race's next deadline.
func (s *Session) arm() {
	d := s.race.Deadline()
	if d == s.armedAt {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	s.armedAt = d
	if d == 0 {
		return
	}
	wait := max(time.Duration(d-s.now()), 0)
	if s.timer == nil {
		s.timer = s.clock.NewTimer(wait)
	} else {
		s.timer.Reset(wait)
	}
}

func (s *Session) handle(e event) {
	i := e.attempt
	if s.race.Attempt(i).State != hedgecore.Running {
		return // dropped before its event was handled: Finish releases it
	}
	rd := s.readers[i]
	switch e.kind {
	case evContent:
		s.race.Content(i, e.at, rd.firstKind == semconv.ChunkKindText)
	case evDone:
		s.race.Complete(i, e.at)
	case evFailed:
		s.live[i].end, s.live[i].failed = e.at, true
		s.race.Fail(i, e.at, e.class, e.err)
		if rd.resp != nil && (!s.race.Done() || s.race.ErrFrom() != i) {
			// Another attempt goes on: this failure is not passed on,
			// and its connection is not kept for the length of the call.
			_ = rd.resp.Body.Close()
		}
	}
}

// apply carries out the race's actions.
func (s *Session) apply() {
	for _, act := range s.race.Actions() {
		switch act.Kind {
		case hedgecore.Launch:
			s.launch(act.Attempt)
		case hedgecore.Cancel:
			l := &s.live[act.Attempt]
			l.cancel(errLoser)
			if l.end == 0 {
				l.end = s.now()
			}
		}
	}
}

func (s *Session) launch(i int) {
	ra := s.race.Attempt(i)
	ctx, cancel := context.WithCancelCause(s.req.Context())
	out := s.req.Clone(ctx)
	out.Body = io.NopCloser(bytes.NewReader(s.body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(s.body)), nil }
	out.ContentLength = int64(len(s.body))
	rt := s.primary
	if ra.Source > 0 {
		up := &s.pol.alternates[ra.Source-1]
		u := s.inURL
		out.URL = &u
		(&httputil.ProxyRequest{Out: out}).SetURL(up.URL)
		rt = up.Transport
	}
	if s.OnAttempt != nil {
		s.OnAttempt(i, out.Header)
	}
	s.live[i] = liveAttempt{cancel: cancel}
	rd := &reader{}
	s.readers[i] = rd
	s.wg.Add(1)
	go s.read(ctx, i, rd, out, rt)
}

// read runs one attempt up to its first content chunk (or its failure) and
// hands it to the session in one event.
func (s *Session) read(ctx context.Context, i int, rd *reader, req *http.Request, rt http.RoundTripper) {
	defer s.wg.Done()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		rd.err = err
		s.send(ctx, event{attempt: i, at: s.now(), kind: evFailed, class: hedgecore.Retryable, err: err})
		return
	}
	rd.resp = resp
	e := event{attempt: i, kind: evDone}
	switch {
	case resp.StatusCode >= 400:
		rd.err = &StatusError{Status: resp.StatusCode}
		e.kind, e.class, e.err = evFailed, classify(resp.StatusCode), rd.err
	case s.streamed(resp):
		e.kind, e.err = s.scan(rd, resp)
		if e.err != nil {
			rd.err = e.err
			e.class = hedgecore.Retryable
		}
	}
	e.at = s.now()
	if !s.send(ctx, e) {
		_ = resp.Body.Close() // dropped: nobody takes the response
	}
}

// streamed reports whether resp is a stream the guard can frame.
func (s *Session) streamed(resp *http.Response) bool {
	_, ok := s.streamFraming(resp)
	return ok
}

// streamFraming is how resp is streamed (Server-Sent Events, Ollama's
// NDJSON, Gemini's JSON array), as the proxy's tee frames it.
func (s *Session) streamFraming(resp *http.Response) (sse.Framing, bool) {
	if resp.StatusCode >= 300 {
		return 0, false
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	// A guarded call asked for a stream.
	return llmstream.StreamFraming(s.shape, true, resp.StatusCode, mt)
}

// scan reads a stream until its first content chunk, its end or its
// failure, holding every byte read.
func (s *Session) scan(rd *reader, resp *http.Response) (eventKind, error) {
	framing, _ := s.streamFraming(resp)
	const (
		undecided = iota
		content
		done
		failed
	)
	state := undecided
	var at int64
	p := sse.NewSplitter(framing, 0, func(ev *sse.Event) {
		if state != undecided {
			return // the rest of the read is held as it is
		}
		f, _ := llmstream.Classify(s.shape, ev)
		rd.meta.Merge(&f.Meta)
		switch f.Kind {
		case llmstream.KindContent:
			state, rd.firstKind = content, f.ChunkKind
		case llmstream.KindDone:
			state = done
		case llmstream.KindError:
			state = failed
		default:
			rd.frames = append(rd.frames, Frame{At: at, Kind: f.Kind})
		}
	})
	buf := make([]byte, readBufferSize)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			at = s.now()
			rd.held = append(rd.held, buf[:n]...)
			p.Feed(buf[:n])
			switch {
			case state == content, len(rd.held) > maxHeldBytes:
				return evContent, nil
			case state == done:
				return evDone, nil
			case state == failed:
				return evFailed, errStreamError
			}
		}
		if errors.Is(err, io.EOF) {
			return evFailed, io.ErrUnexpectedEOF // the stream ended before any content
		}
		if err != nil {
			return evFailed, err
		}
	}
}

func (s *Session) send(ctx context.Context, e event) bool {
	select {
	case s.events <- e:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Session) result(ctx context.Context) (*http.Response, error) {
	if c := s.race.Committed(); c >= 0 {
		s.rep = c
		rd := s.readers[c]
		resp := rd.resp
		b := &committedBody{s: s, held: rd.held, rc: resp.Body, cancel: s.live[c].cancel}
		framing, streamed := s.streamFraming(resp)
		b.boundary = llmstream.NewBoundary(s.shape, framing)
		if streamed && rd.firstKind != "" {
			b.framed, b.watch = true, s.pol.watches()
			b.commitAt = s.race.Attempt(c).First
			b.commitAnswered = rd.firstKind != semconv.ChunkKindReasoning
		}
		s.committed = b
		resp.Body = b
		return resp, nil
	}
	j := s.race.ErrFrom()
	if j < 0 {
		// Aborted: the client went away, or the proxy stops. The primary
		// stands for the call.
		s.rep = 0
		if err := context.Cause(ctx); err != nil {
			return nil, err
		}
		return nil, s.race.Err()
	}
	s.rep = j
	if errors.Is(s.race.Err(), hedgecore.ErrTTFTTimeout) {
		s.ttftEnded = true
		return s.gatewayTimeout(), nil
	}
	rd := s.readers[j]
	if rd.resp == nil {
		return nil, rd.err
	}
	resp := rd.resp
	resp.Body = &committedBody{s: s, held: rd.held, rc: resp.Body, cancel: s.live[j].cancel}
	return resp, nil
}

// gatewayTimeout is the 504 a call gets when its last attempt had no
// content within ttft_timeout.
func (s *Session) gatewayTimeout() *http.Response {
	msg := fmt.Sprintf("no content within ttft_timeout (%s) from any of %d attempts (sse_capture guard)",
		time.Duration(s.pol.hp.TTFTTimeout()), s.race.Attempts())
	body := llmstream.ErrorBody(s.shape, http.StatusGatewayTimeout, ErrTypeTTFTTimeout, msg)
	return &http.Response{
		Status: "504 Gateway Timeout", StatusCode: http.StatusGatewayTimeout,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       s.req,
	}
}

// Representative is the attempt whose response the client got (or that
// stands for a call that got none), once RoundTrip has returned.
func (s *Session) Representative() Report {
	return s.report(s.rep, false)
}

// Ended is the error.type of a call the guard ended itself, "" for one it
// did not: ttft_timeout, stall_timeout, or shutdown when the guard's frame
// ended the stream at shutdown. Valid after Finish.
func (s *Session) Ended() string {
	switch {
	case s.ttftEnded:
		return ErrTypeTTFTTimeout
	case s.committed != nil && s.committed.end == endStall:
		return ErrTypeStallTimeout
	case s.committed != nil && s.committed.end == endShutdown:
		return errTypeShutdown
	}
	return ""
}

// errTypeShutdown is the proxy's error.type of a stream ended at shutdown.
const errTypeShutdown = "shutdown"

// StallTimeoutUsed is the stall timeout that ended the stream, or that was
// in force when it ended; 0 when the stream was not watched.
func (s *Session) StallTimeoutUsed() time.Duration {
	if s.committed == nil || !s.committed.watch {
		return 0
	}
	return s.committed.timeoutInForce()
}

// Finish drops whatever still runs, waits for every goroutine of the
// call, settles the budget on the committed stream's outcome and returns
// the reports of the attempts other than the representative, for their
// spans. The response body must have been closed.
func (s *Session) Finish() []Report {
	if s.finished {
		return nil
	}
	s.finished = true
	n := s.race.Attempts()
	now := s.now()
	for i := range n {
		if i != s.rep && s.live[i].end == 0 {
			s.live[i].end = now
		}
		s.live[i].cancel(errSettled)
	}
	s.wg.Wait()
	for len(s.events) > 0 {
		<-s.events // the events of attempts dropped before they were handled
	}
	for i := range n {
		if rd := s.readers[i]; i != s.rep && rd.resp != nil {
			_ = rd.resp.Body.Close()
		}
	}
	s.settle(now)
	reports := make([]Report, 0, n-1)
	for i := range n {
		if i != s.rep {
			reports = append(reports, s.report(i, true))
		}
	}
	return reports
}

// settle tells the race how the committed stream ended, for the budget: a
// stream that completed refunds it, one that stalled or broke costs it.
func (s *Session) settle(now int64) {
	if s.committed == nil || s.race.Done() {
		return
	}
	c := s.race.Committed()
	switch s.committed.end {
	case endComplete:
		s.race.Complete(c, now)
	case endStall:
		s.race.Fail(c, now, hedgecore.Stalled, hedgecore.ErrStalled)
	case endBroken:
		s.race.Fail(c, now, hedgecore.Retryable, s.committed.err)
	default: // the client went away, or the proxy stopped: nothing to learn
		s.race.Abort(errSettled)
	}
	s.race.Actions()
}

func (s *Session) report(i int, loser bool) Report {
	ra := s.race.Attempt(i)
	r := Report{Attempt: i, Trigger: ra.Trigger, Delay: ra.Delay, DelaySource: ra.DelaySource, Start: ra.Start}
	if ra.Source > 0 {
		r.Upstream = &s.pol.alternates[ra.Source-1]
	}
	if !loser {
		return r
	}
	r.End = s.live[i].end
	if rd := s.readers[i]; rd != nil {
		if rd.resp != nil {
			r.Status = rd.resp.StatusCode
		}
		r.Meta, r.Frames = rd.meta, rd.frames
	}
	if ra.State == hedgecore.Failed {
		r.Err = hedgecore.ErrTTFTTimeout // failed by the race's timer, not by its reader
		if s.live[i].failed {
			r.Err = s.readers[i].err
		}
	}
	return r
}

// Attempts counts the attempts started, the first included.
func (s *Session) Attempts() int { return s.race.Attempts() }

// Refused counts the attempts the budget did not allow.
func (s *Session) Refused() int { return s.race.Refused() }

// Won reports whether an attempt other than the first was committed.
func (s *Session) Won() bool { return s.race.Committed() > 0 }

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/hedgecore"
	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/sse"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/frames"
)

// error.type values of the calls the guard ends (docs/contract.md section 7).
const (
	ErrTypeTTFTTimeout  = "ttft_timeout"
	ErrTypeStallTimeout = "stall_timeout"
	// ErrTypeAlternateRefused: the call's last failure was an alternate's
	// refusal of the operator's credential, answered with a 502 of the
	// guard's own (Session.alternateRefusal).
	ErrTypeAlternateRefused = "alternate_credential_refused"
)

// maxHeldBytes bounds what one attempt holds before its first content chunk.
// Frames without content are a few hundred bytes (a role-only delta,
// message_start, pings); an attempt past the bound is committed then, before
// content, so that an upstream cannot make the proxy buffer without end. It
// is still framed and watched: its stall clock starts at the commit
// (docs/contract.md section 7).
const maxHeldBytes = 1 << 20

// heldFree is what an attempt holds before its first content chunk without
// drawing on the receiver's budget (Session.Budget): every attempt that
// behaves fits in it.
const heldFree = 64 << 10

// readBufferSize is the read buffer of an attempt before commit.
const readBufferSize = 16 << 10

var (
	// errLoser cancels an attempt the race dropped.
	errLoser = errors.New("guard: attempt dropped by the race")
	// errStreamError is an attempt's in-stream error frame before content.
	errStreamError = errors.New("guard: the upstream reported an error before any content")
	errAnswerError = errors.New("guard: the upstream answered with an error object under a success status")
	// ErrEmptyAnswer is a stream that ended before any content with no
	// finish reason either ("data: [DONE]" alone): no answer, but a broken
	// one. An answer that says why it is empty (a content filter, a
	// max_tokens of 0) is an answer.
	ErrEmptyAnswer = errors.New("guard: the upstream ended its stream with no content and no finish reason")
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
	// Frames are the frames without content before commit, at most
	// Session.MaxFrames of them; FramesDropped counts the rest.
	Frames        []Frame
	FramesDropped int64
}

// Session runs the attempts of one guarded call: Start, then RoundTrip in
// place of the proxy's transport, then Finish once the response is over.
// Its methods run on the proxy handler's goroutine; only the attempts'
// readers and the watchdog run in goroutines of their own, and Finish
// waits for every one of them.
type Session struct {
	pol *Policy
	// primaryCredential is the primary's own credential, if any.
	primaryCredential *PrimaryCredential
	clock             clockwork.Clock
	shape             llmstream.Shape
	body              []byte
	inURL             url.URL
	stopping          context.Context
	start             int64
	// OnAttempt prepares attempt i's request headers before it goes (the
	// proxy names the attempt's span in its traceparent).
	OnAttempt func(i int, h http.Header)
	// Budget, when set, is the receiver's byte budget (the proxy's frame
	// budget) that the bytes attempts hold before their first content chunk
	// draw on past heldFree each, as the attempts' SSE parsers do. An
	// attempt the budget cannot take more of is committed at once, as one
	// past maxHeldBytes is: the client gets all it holds, and it is watched.
	Budget *sse.SharedBudget
	// MaxDecoded bounds the decoded bytes of a content-coded attempt before
	// commit (the proxy's max_decoded_response_bytes).
	MaxDecoded int64
	// MaxFrames bounds the frames without content an attempt keeps before
	// commit for its report (the proxy's max_chunk_events); the rest are
	// counted. An attempt's 1 MiB before content can be half a million
	// two-byte comments. Zero is figures.DefaultMaxChunkEvents.
	MaxFrames int

	race    hedgecore.Race
	req     *http.Request
	primary http.RoundTripper
	live    [hedgecore.MaxAttempts]liveAttempt
	readers [hedgecore.MaxAttempts]*reader
	events  chan event
	wg      sync.WaitGroup

	// credentialCleared is closed once the first attempt's answer did not
	// refuse the client's credential (credentials.go).
	credentialCleared chan struct{}

	rep       int // the attempt whose response the client got
	ttftEnded bool
	// alternateRefused: the client got alternateRefusal's 502.
	alternateRefused bool
	committed        *committedBody
	finished         bool
	// streamFailed is set when the committed stream's body ended cut or
	// with the API's error frame (StreamFailed).
	streamFailed bool
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
	resp  *http.Response
	held  []byte
	taken int // of the budget, for held
	// marks say where each read of held ends and when it arrived, so that
	// the frames in held are stamped with their arrival, not with their
	// replay after commit (at most maxHeldMarks: past it the last mark
	// grows, and the bytes of the reads it took in are stamped with the
	// last of them, the latest arrival of any).
	marks  []HeldMark
	meta   llmstream.Meta
	frames []Frame
	// framesDropped counts the frames past Session.MaxFrames.
	framesDropped int64
	err           error
	firstKind     string
	// What the attempt does with the client's credential (credentials.go),
	// set at launch: it carries it; it is the call's first attempt, whose
	// answer clears the alternates that wait; it goes to an alternate with
	// a credential of its own and waits; the upstream refused it. And
	// whether it carries the operator's credential for an alternate, not
	// the client's, and the alternate refused that one.
	clientCredential  bool
	clears            bool
	awaitsCredential  bool
	credentialRefused bool
	operatorsOwn      bool
	operatorRefused   bool
	// framed: the response is a stream in a framing the guard reads, and
	// the guard may end it with the shape's error frame; blind: its frames
	// cannot be read (a content coding the proxy does not decode, a corrupt
	// or oversized coded body), so it is committed as it comes, unwatched;
	// overflow: it was committed before content, past maxHeldBytes or the
	// budget.
	framed, blind, overflow bool
	// framing is the stream's, when framed.
	framing sse.Framing
}

// HeldMark is where a read of the bytes held before commit ends (an
// offset in them) and when it arrived (unix nanoseconds).
type HeldMark struct {
	End int
	At  int64
}

// maxHeldMarks bounds the marks of an attempt: an upstream that trickles
// its pre-content bytes a few at a time costs at most this many.
const maxHeldMarks = 1024

// hold keeps p, which arrived at at, drawing on budget for what passes
// heldFree; false once the attempt holds more than maxHeldBytes, or the
// budget refused it more. p is kept either way: nothing read is lost.
func (rd *reader) hold(p []byte, at int64, budget *sse.SharedBudget) bool {
	ok := true
	if need := len(rd.held) + len(p); need > cap(rd.held) {
		size := max(need, min(2*cap(rd.held), maxHeldBytes))
		if draw := max(size-heldFree, 0) - rd.taken; budget != nil && draw > 0 {
			if budget.Take(draw) {
				rd.taken += draw
			} else {
				ok, size = false, need
			}
		}
		held := make([]byte, len(rd.held), size)
		copy(held, rd.held)
		rd.held = held
	}
	rd.held = append(rd.held, p...)
	if n := len(rd.marks); n == maxHeldMarks {
		rd.marks[n-1] = HeldMark{End: len(rd.held), At: at}
	} else {
		rd.marks = append(rd.marks, HeldMark{End: len(rd.held), At: at})
	}
	return ok && len(rd.held) <= maxHeldBytes
}

// release gives the held bytes' budget back; the bytes are the committed
// body's, or nobody's.
func (rd *reader) release(budget *sse.SharedBudget) {
	if budget != nil && rd.taken > 0 {
		budget.Return(rd.taken)
	}
	rd.taken = 0
}

// drop lets go of the bytes of an attempt nobody takes.
func (rd *reader) drop(budget *sse.SharedBudget) {
	rd.held = nil
	rd.release(budget)
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
	// wait is how long a failed attempt's source asked not to be called
	// again (its Retry-After).
	wait time.Duration
}

// NewSession returns the session of one streaming call of the given shape
// to model of provider (the span's gen_ai.provider.name, the key of the
// fleet's advice), started at start (unix nanoseconds); inURL is the client's
// request URL, body its body. stopping is done when the proxy ends its
// streams at shutdown.
func (g *Guard) NewSession(stopping context.Context, provider, model string, shape llmstream.Shape, inURL *url.URL, body []byte, start int64) *Session {
	pol := g.For(provider, model)
	pol.takeFleetDelay(start)
	return &Session{
		pol: pol, primaryCredential: &g.primary, clock: g.clock, shape: shape, body: body, inURL: *inURL,
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
	s.race.DrawOn(s.pol.budgets.For(ClientOf(ctx, s.pol.ipv6Prefix)))
	src := hedgecore.NewLive(ctx, s.clock, s.now, s.events)
	drv := hedgecore.NewDriver(&s.race, src, (*carrier)(s))
	drv.Start(s.start)
	for s.race.Committed() < 0 && !s.race.Done() {
		drv.Step()
	}
	src.Stop()
	// No attempt starts after this: the stream that follows does not hold
	// the prompt (each attempt's body lets go of it once sent).
	s.body = nil
	return s.result(ctx)
}

// carrier is the session as its driver sees it.
type carrier Session

func (c *carrier) Handle(e event) { (*Session)(c).handle(e) }
func (c *carrier) Launch(i int)   { (*Session)(c).launch(i) }
func (c *carrier) Cancel(i int)   { (*Session)(c).drop(i) }

func (s *Session) handle(e event) {
	i := e.attempt
	rd := s.readers[i]
	if s.race.Attempt(i).State != hedgecore.Running {
		rd.drop(s.Budget)
		return // dropped before its event was handled: Finish releases the rest
	}
	switch e.kind {
	case evContent:
		s.pol.admit()
		switch {
		case rd.blind || rd.overflow:
			// Committed before any content chunk was seen: no TTFT to learn.
			s.race.CommitUnseen(i, e.at)
		case rd.firstKind == semconv.ChunkKindReasoning:
			s.race.Reasoning(i, e.at)
		default:
			s.race.Content(i, e.at, rd.firstKind == semconv.ChunkKindText)
		}
	case evDone:
		s.race.Complete(i, e.at)
	case evFailed:
		s.live[i].end, s.live[i].failed = e.at, true
		s.race.FailAfter(i, e.at, e.class, e.err, e.at+int64(e.wait))
		if rd.resp != nil && (!s.race.Done() || s.race.ErrFrom() != i) {
			// Another attempt goes on: this failure is not passed on,
			// and its connection is not kept for the length of the call.
			_ = rd.resp.Body.Close()
			rd.drop(s.Budget)
		}
	}
}

// drop cancels an attempt the race dropped.
func (s *Session) drop(i int) {
	l := &s.live[i]
	l.cancel(errLoser)
	if l.end == 0 {
		l.end = s.now()
	}
}

// launch sends attempt i's request. Its GetBody refuses once the body is
// being sent (RequestBody), so that net/http never sends it again on its
// own: each upstream request is an attempt the race counted. An alternate gets the client's credential headers only when
// its configuration forwards them, and the request has no trailers (the
// proxy dropped them).
func (s *Session) launch(i int) {
	ra := s.race.Attempt(i)
	ctx, cancel := context.WithCancelCause(s.req.Context())
	out := s.req.Clone(ctx)
	out.Body, out.GetBody = RequestBody(s.body)
	out.ContentLength = int64(len(s.body))
	out.Trailer = nil
	out.Header.Del("Proxy-Authorization")
	rt := s.primary
	rd := &reader{clientCredential: true, clears: i == 0}
	if ra.Source == 0 {
		rd.clientCredential = s.primaryCredential.reachedBy(out)
	}
	if i == 0 {
		s.credentialCleared = make(chan struct{})
	}
	if ra.Source > 0 {
		up := &s.pol.alternates[ra.Source-1]
		u := s.inURL
		if !up.ForwardClientCredentials {
			stripQueryCredentials(&u) // the client's query, before the alternate's own joins it
		}
		out.URL = &u
		(&httputil.ProxyRequest{Out: out}).SetURL(up.URL)
		out.URL.Opaque = "" // the proxy refuses an opaque target; none is ever sent
		rt = up.Transport
		if !up.ForwardClientCredentials {
			stripCredentials(out.Header)
			rd.clientCredential = false
			rd.operatorsOwn = up.OwnCredential
		}
		rd.awaitsCredential = up.OwnCredential && !up.ServeCredentialFailures
	}
	if s.OnAttempt != nil {
		s.OnAttempt(i, out.Header)
	}
	s.live[i] = liveAttempt{cancel: cancel}
	s.readers[i] = rd
	s.wg.Add(1)
	go s.read(ctx, i, rd, out, rt)
}

// read runs one attempt up to its first content chunk (or its failure) and
// hands it to the session in one event.
func (s *Session) read(ctx context.Context, i int, rd *reader, req *http.Request, rt http.RoundTripper) {
	defer s.wg.Done()
	resp, err := rt.RoundTrip(req)
	s.checkAnswer(rd, resp)
	if err != nil {
		rd.err = err
		s.send(ctx, event{attempt: i, at: s.now(), kind: evFailed, class: hedgecore.Retryable, err: err})
		return
	}
	rd.resp = resp
	e := event{attempt: i, kind: evDone}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	framing, framed := llmstream.StreamFraming(s.shape, true, resp.StatusCode, mt)
	switch {
	case framed && resp.StatusCode < 300:
		rd.framed, rd.framing = true, framing
		e.kind, e.err = s.scan(rd, resp, framing)
		if e.err != nil {
			rd.err = e.err
			e.class = hedgecore.Retryable
		}
	case resp.StatusCode >= 400:
		rd.err = &StatusError{Status: resp.StatusCode}
		e.kind, e.class, e.err = evFailed, s.failureClass(rd, resp.StatusCode), rd.err
		if e.class == hedgecore.Retryable {
			e.wait, _ = hedgecore.RetryAfter(resp.Header, s.clock.Now())
		}
	case resp.StatusCode >= 300:
		// A redirect is no answer to an API call (a gateway sending the
		// client to its login page, or elsewhere): like a 4xx, that
		// source's refusal, which reaches the client only when no other
		// attempt can still answer, never one that wins the race.
		rd.err = &StatusError{Status: resp.StatusCode}
		e.kind, e.class, e.err = evFailed, hedgecore.Fatal, rd.err
	case isJSON(mt) && s.answeredWithAnError(rd, resp):
		// A whole body that is the API's error object under a success
		// status (a gateway's 200 {"error":...}) fails as an error frame
		// before content does, as the span reads it.
		rd.err = errAnswerError
		e.kind, e.class, e.err = evFailed, hedgecore.Retryable, rd.err
	}
	e.at = s.now()
	if e.kind != evFailed && !s.awaitCredential(ctx, rd) {
		rd.drop(s.Budget)
		_ = resp.Body.Close() // dropped while it waited
		return
	}
	if !s.send(ctx, e) {
		// Dropped or settled: nobody takes what it holds, nor the response.
		// (An event sent while the call ends is the session's: it commits
		// the attempt with every byte it held, or drops them.)
		rd.drop(s.Budget)
		_ = resp.Body.Close()
	}
}

// answeredWithAnError reports whether a streaming call's JSON answer, under
// a success status, is its API's error object. Its first maxErrorBody
// bytes are read into memory (the body still reads as it came): a whole
// completion (an upstream that does not stream) is the call's answer, and
// one longer than the bound is taken for one. The read has no time bound
// of its own: a JSON body comes whole, and one that an upstream holds is
// an attempt with no answer yet, which the race hedges and gives up as any
// other (its context ends the read). Only a JSON body is read so: another
// media type may be a stream in a framing the proxy does not know, which
// goes to the client as it comes.
func (s *Session) answeredWithAnError(rd *reader, resp *http.Response) bool {
	body := decodedErrorBody(resp, readBody(resp, 0))
	m, err := llmstream.ParseResponse(s.shape, body)
	if err != nil || m.ErrorType == "" && m.ErrorMessage == "" {
		return false
	}
	if m.ErrorType == "" {
		m.ErrorType = llmstream.ErrorTypeUnknown
	}
	rd.meta.Merge(&m) // the attempt's span names the error, as for an error frame
	return true
}

// isJSON reports whether a media type is JSON (application/json, or a
// structured +json type such as application/problem+json).
func isJSON(mt string) bool {
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// scan reads a stream until its first content chunk, its end or its
// failure, holding every byte read. Its frames are read as the proxy's tee
// reads them (frames.Classifier): decoded from the response's content
// coding, in the shape's framing. A stream whose frames cannot be read is
// committed at once; one that holds past maxHeldBytes, or more than the
// budget lets it, is committed before content.
func (s *Session) scan(rd *reader, resp *http.Response, framing sse.Framing) (eventKind, error) {
	const (
		undecided = iota
		content
		done
		failed
	)
	coding, decodable := frames.ResponseCoding(resp.Header.Values("Content-Encoding"))
	if !decodable {
		rd.blind = true
		return evContent, nil
	}
	state := undecided
	o := frames.Options{Shape: s.shape, Framing: framing, Coding: coding, MaxDecoded: s.MaxDecoded}
	if o.MaxDecoded <= 0 {
		o.MaxDecoded = math.MaxInt64
	}
	if s.Budget != nil {
		o.Budget = s.Budget
	}
	var cls *frames.Classifier
	cls = frames.New(o, func(f *llmstream.Frame, at int64, _ error) {
		rd.meta.Merge(&f.Meta)
		switch f.Kind {
		case llmstream.KindContent:
			state, rd.firstKind = content, f.ChunkKind
		case llmstream.KindDone:
			state = done
		case llmstream.KindError:
			state = failed
		default:
			if len(rd.frames) < cmp.Or(s.MaxFrames, figures.DefaultMaxChunkEvents) {
				rd.frames = append(rd.frames, Frame{At: at, Kind: f.Kind})
			} else {
				rd.framesDropped++
			}
			return
		}
		cls.Stop() // the rest of the read is held as it is
	})
	defer func() { _ = cls.Close(false) }()
	// decision is the event of the frame that settled the attempt.
	decision := func() (eventKind, error) {
		switch {
		case state == content:
			return evContent, nil
		case state == done && len(rd.meta.FinishReasons) > 0:
			return evDone, nil
		case state == done:
			return evFailed, ErrEmptyAnswer
		}
		return evFailed, errStreamError
	}
	buf := make([]byte, readBufferSize)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			at := s.now()
			kept := rd.hold(buf[:n], at, s.Budget)
			cls.Write(buf[:n], at)
			if state != undecided {
				return decision()
			}
			switch {
			case cls.Blind():
				rd.blind = true
				return evContent, nil
			case !kept:
				rd.overflow = true
				return evContent, nil // committed before content, and watched
			}
		}
		if errors.Is(err, io.EOF) {
			// The framing's end ends a frame too (an NDJSON line without
			// its line feed), as the proxy's tee reads it at the body's end.
			_ = cls.Close(true)
			if state != undecided {
				return decision()
			}
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
		b := &committedBody{s: s, rd: rd, held: rd.held, marks: rd.marks, rc: resp.Body, cancel: s.live[c].cancel}
		rd.held, rd.marks = nil, nil
		b.boundary = llmstream.NewBoundary(s.shape, rd.framing)
		if rd.framed && !rd.blind && (rd.firstKind != "" || rd.overflow) {
			// Committed on its first content chunk, or past the bound
			// before any: watched from here either way. (A stream that
			// completed without content is not.)
			b.framed, b.watch = true, s.pol.watches()
			b.commitAt = s.race.Attempt(c).First
			b.commitAnswered = rd.firstKind != "" && rd.firstKind != semconv.ChunkKindReasoning
			if rd.firstKind == "" && !b.watch && s.pol.ttft {
				// Committed past the bound before content, with no stall
				// timeout to end it: its ttft_timeout still gives it up
				// (fireTTFT).
				b.ttftAt = s.race.Attempt(c).Start + s.pol.hp.TTFTTimeout()
			}
			// The guard may end the stream with a frame of its own, or end
			// it early: the body's length is no longer the upstream's to
			// declare, and the client's HTTP layer would fail a body that
			// does not match it. It goes on chunked (or close-delimited).
			resp.ContentLength = -1
			resp.Header.Del("Content-Length")
		}
		s.committed = b
		resp.Body = b
		s.dropAlternateCookies(c, resp)
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
	if rd.operatorRefused {
		_ = rd.resp.Body.Close()
		rd.drop(s.Budget)
		s.alternateRefused = true
		return s.alternateRefusal(rd.resp.StatusCode), nil
	}
	resp := rd.resp
	resp.Body = &committedBody{s: s, rd: rd, held: rd.held, marks: rd.marks, rc: resp.Body, cancel: s.live[j].cancel}
	rd.held, rd.marks = nil, nil
	s.dropAlternateCookies(j, resp)
	return resp, nil
}

// dropAlternateCookies keeps the cookies an alternate sets from the
// client: the client's cookie jar would send them on its next call, and
// Cookie goes to the primary only (credentials.go), so an alternate's
// cookie would reach another provider and never the one that set it.
func (s *Session) dropAlternateCookies(i int, resp *http.Response) {
	if s.race.Attempt(i).Source > 0 {
		resp.Header.Del("Set-Cookie")
	}
}

// gatewayTimeout is the 504 a call gets when its last attempt had no
// content within ttft_timeout.
func (s *Session) gatewayTimeout() *http.Response {
	msg := fmt.Sprintf("no content within ttft_timeout (%s) from any of %d attempts (sse_capture guard)",
		time.Duration(s.pol.hp.TTFTTimeout()), s.race.Attempts())
	return s.errorResponse(http.StatusGatewayTimeout, ErrTypeTTFTTimeout, msg)
}

// alternateRefusal is what the client gets when the call's last failure
// was an alternate refusing the credential the operator configured for it
// (401, 403, a quota: credentialRefused): a 502 of the guard's own in the
// shape's error format. The alternate's answer is not the client's: its
// body names the operator's key (masked), organization or project, and
// its status would tell the client that its own key was refused.
func (s *Session) alternateRefusal(status int) *http.Response {
	msg := fmt.Sprintf("an alternate upstream refused the credential the proxy holds for it (HTTP %d), "+
		"after %d attempts (sse_capture guard)", status, s.race.Attempts())
	return s.errorResponse(http.StatusBadGateway, ErrTypeAlternateRefused, msg)
}

func (s *Session) errorResponse(status int, errType, msg string) *http.Response {
	body := llmstream.ErrorBody(s.shape, status, errType, msg)
	return &http.Response{
		Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        s.errorHeader(status),
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       s.req,
	}
}

// errorHeader is the header of an error response of the call's API: JSON,
// and the error's type where the API names it in a header (Bedrock).
func (s *Session) errorHeader(status int) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	if name, value := llmstream.ErrorHeader(s.shape, status); name != "" {
		h.Set(name, value)
	}
	return h
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
	case s.ttftEnded, s.committed != nil && s.committed.end == endTTFT:
		return ErrTypeTTFTTimeout
	case s.alternateRefused:
		return ErrTypeAlternateRefused
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

// StallTimeoutSource is where StallTimeoutUsed came from: StallConfigured
// for a configured timeout, or a learned one's source.
func (s *Session) StallTimeoutSource() StallSource {
	if s.committed == nil || !s.committed.watch {
		return StallConfigured
	}
	return StallSource(s.committed.lastSource.Load())
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
		rd := s.readers[i]
		if rd == nil {
			continue
		}
		if i != s.rep && rd.resp != nil {
			_ = rd.resp.Body.Close()
		}
		rd.drop(s.Budget)
	}
	s.settle(now)
	reports := make([]Report, 0, max(n-1, 0)) // none started: ReverseProxy answered without its transport
	for i := range n {
		if i != s.rep {
			reports = append(reports, s.report(i, true))
		}
	}
	return reports
}

// StreamFailed records that the committed stream, whose body ended, failed
// as its span reads it: cut before the API's end of stream (no terminal
// frame, no finish reason), or ended by the API's own error frame (a
// server_error, Anthropic's overloaded_error mid-stream). Finish then
// settles the budget on it as on a broken stream, not a complete one. The
// proxy calls it before Finish.
func (s *Session) StreamFailed() { s.streamFailed = true }

// errStreamFailed is the committed stream's failure when its body ended
// cut or with an error frame.
var errStreamFailed = errors.New("guard: the stream ended cut or with an error")

// settle tells the race how the committed stream ended, for the budget: a
// stream that completed refunds it, one that stalled, broke or ended cut
// costs it.
func (s *Session) settle(now int64) {
	if s.committed == nil || s.race.Done() {
		return
	}
	c := s.race.Committed()
	switch s.committed.end {
	case endComplete:
		if s.streamFailed {
			s.race.Fail(c, now, hedgecore.Retryable, errStreamFailed)
			break
		}
		s.race.Complete(c, now)
	case endStall:
		s.race.Fail(c, now, hedgecore.Stalled, hedgecore.ErrStalled)
	case endTTFT:
		s.race.Fail(c, now, hedgecore.TTFTTimedOut, hedgecore.ErrTTFTTimeout)
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
		r.Meta, r.Frames, r.FramesDropped = rd.meta, rd.frames, rd.framesDropped
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

// RefusedShared counts the refused attempts that the bucket shared by all
// clients refused, their client's own allowing them.
func (s *Session) RefusedShared() int { return s.race.RefusedShared() }

// Won reports whether an attempt other than the first was committed.
func (s *Session) Won() bool { return s.race.Committed() > 0 }

// When is the time the event arrived (hedgecore.Timed).
func (e event) When() int64 { return e.at }

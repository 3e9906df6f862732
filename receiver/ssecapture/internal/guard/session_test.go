// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/hedgecore"
	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/sse"
)

const (
	roleFrame      = `data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n"
	keepaliveFrame = ": keepalive\n\n"
	textFrame      = `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n"
	thinkFrame     = `data: {"id":"c1","choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}` + "\n\n"
	doneFrame      = "data: [DONE]\n\n"
)

// upstreamCall is one request a scripted upstream received; the test
// answers it.
type upstreamCall struct {
	req  *http.Request
	resp chan *http.Response
	err  chan error
	w    *io.PipeWriter
	q    chan string // frames to write, in order
}

// scripted is an upstream whose every request waits for the test to answer
// it. As net/http's transport does, a response body fails once the
// request's context is done.
type scripted struct{ calls chan *upstreamCall }

func newScripted() *scripted {
	return &scripted{calls: make(chan *upstreamCall, hedgecore.MaxAttempts)}
}

func (s *scripted) RoundTrip(req *http.Request) (*http.Response, error) {
	uc := &upstreamCall{req: req, resp: make(chan *http.Response, 1), err: make(chan error, 1)}
	s.calls <- uc
	select {
	case resp := <-uc.resp:
		return resp, nil
	case err := <-uc.err:
		return nil, err
	case <-req.Context().Done():
		return nil, context.Cause(req.Context())
	}
}

func (s *scripted) next(t *testing.T) *upstreamCall {
	t.Helper()
	select {
	case uc := <-s.calls:
		return uc
	case <-time.After(5 * time.Second):
		t.Fatal("no request reached the upstream")
		return nil
	}
}

func (s *scripted) none(t *testing.T) {
	t.Helper()
	select {
	case uc := <-s.calls:
		t.Fatalf("unexpected request to %s", uc.req.URL)
	case <-time.After(20 * time.Millisecond):
	}
}

// stream answers with an open event stream; the test writes its frames.
func (uc *upstreamCall) stream(frames ...string) {
	uc.streamWith(http.Header{"Content-Type": {"text/event-stream"}}, frames...)
}

// streamWith is stream with the response headers h.
func (uc *upstreamCall) streamWith(h http.Header, frames ...string) {
	pr, pw := io.Pipe()
	context.AfterFunc(uc.req.Context(), func() { pw.CloseWithError(context.Cause(uc.req.Context())) })
	uc.w, uc.q = pw, make(chan string, 64)
	uc.resp <- &http.Response{StatusCode: http.StatusOK, Header: h, Body: pr, Request: uc.req}
	go func() {
		// A pipe write waits for its reader: the frames go out from here,
		// in order, while the test goes on.
		for {
			select {
			case f, ok := <-uc.q:
				if !ok {
					_ = pw.Close()
					return
				}
				if _, err := pw.Write([]byte(f)); err != nil {
					return
				}
			case <-uc.req.Context().Done():
				return
			}
		}
	}()
	uc.write(frames...)
}

// write queues frames; end closes the stream after them.
func (uc *upstreamCall) write(frames ...string) {
	for _, f := range frames {
		uc.q <- f
	}
}

func (uc *upstreamCall) end() { close(uc.q) }

func (uc *upstreamCall) status(code int, body string) {
	uc.resp <- &http.Response{
		StatusCode: code, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: uc.req,
	}
}

func (uc *upstreamCall) cancelled(t *testing.T) error {
	t.Helper()
	select {
	case <-uc.req.Context().Done():
		return context.Cause(uc.req.Context())
	case <-time.After(5 * time.Second):
		t.Fatal("the attempt was not cancelled")
		return nil
	}
}

type harness struct {
	clock    *clockwork.FakeClock
	primary  *scripted
	alt      *scripted
	guard    *Guard
	stopping context.Context
	stop     context.CancelFunc
}

func newHarness(t *testing.T, r Rule) *harness {
	h := &harness{clock: clockwork.NewFakeClockAt(time.Unix(1_700_000_000, 0)), primary: newScripted(), alt: newScripted()}
	u, _ := url.Parse("http://alternate.example:8443/base")
	r.Alternates = append(r.Alternates, Upstream{URL: u, Transport: h.alt, Address: "alternate.example", Port: 8443})
	h.guard = New(Settings{Default: r, Clock: h.clock, AutoStall: AutoStall{Multiple: 10, Floor: 30 * time.Second, MinSamples: 20}})
	h.stopping, h.stop = context.WithCancel(context.Background())
	t.Cleanup(h.stop)
	return h
}

type result struct {
	resp *http.Response
	err  error
}

// call starts a guarded call; the result comes on the channel.
func (h *harness) call(t *testing.T) (*Session, <-chan result, context.CancelFunc) {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	in, _ := url.Parse("/v1/chat/completions?x=1")
	body := []byte(`{"model":"gpt-4o","stream":true}`)
	s := h.guard.NewSession(h.stopping, "openai", "gpt-4o", llmstream.ShapeChatCompletions, in, body, h.clock.Now().UnixNano())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://primary.example/v1/chat/completions?x=1", strings.NewReader(string(body)))
	require.NoError(t, err)
	out := make(chan result, 1)
	go func() {
		resp, err := s.RoundTrip(req, h.primary)
		out <- result{resp, err}
	}()
	return s, out, cancel
}

func wait(t *testing.T, out <-chan result) result {
	t.Helper()
	select {
	case r := <-out:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not settle")
		return result{}
	}
}

func pending(t *testing.T, out <-chan result) {
	t.Helper()
	select {
	case r := <-out:
		t.Fatalf("the call settled early: %+v", r)
	case <-time.After(20 * time.Millisecond):
	}
}

// readN reads exactly n bytes of body.
func readN(t *testing.T, body io.Reader, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := io.ReadFull(body, b)
	require.NoError(t, err)
	return string(b)
}

func (h *harness) blockUntil(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, h.clock.BlockUntilContext(ctx, n))
}

func TestHedgeFiresAndTheHedgeWins(t *testing.T) {
	h := newHarness(t, Rule{Delay: 100 * time.Millisecond, MaxAttempts: 2})
	s, out, _ := h.call(t)
	p := h.primary.next(t)
	p.stream(roleFrame, keepaliveFrame)
	h.blockUntil(t, 1)
	pending(t, out)
	h.alt.none(t)

	h.clock.Advance(100 * time.Millisecond)
	a := h.alt.next(t)
	assert.Equal(t, "http://alternate.example:8443/base/v1/chat/completions?x=1", a.req.URL.String(), "the client's path under the alternate's")
	got, _ := io.ReadAll(a.req.Body)
	assert.JSONEq(t, `{"model":"gpt-4o","stream":true}`, string(got), "the request body is sent again")
	a.stream(roleFrame, textFrame)

	r := wait(t, out)
	require.NoError(t, r.err)
	assert.Equal(t, roleFrame+textFrame, readN(t, r.resp.Body, len(roleFrame+textFrame)), "the alternate's held bytes, exactly")
	assert.ErrorIs(t, p.cancelled(t), errLoser, "the primary is dropped at commit")
	a.write(doneFrame)
	assert.Equal(t, doneFrame, readN(t, r.resp.Body, len(doneFrame)))
	a.end()
	_, err := r.resp.Body.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF)
	require.NoError(t, r.resp.Body.Close())

	assert.True(t, s.Won())
	losers := s.Finish()
	rep := s.Representative()
	assert.Equal(t, 1, rep.Attempt)
	assert.Equal(t, hedgecore.TriggerTTFT, rep.Trigger)
	assert.Equal(t, int64(100*time.Millisecond), rep.Delay)
	require.NotNil(t, rep.Upstream)
	assert.Equal(t, "alternate.example", rep.Upstream.Address)
	require.Len(t, losers, 1)
	assert.Equal(t, 0, losers[0].Attempt)
	assert.Nil(t, losers[0].Upstream, "the loser went to the primary")
	assert.NoError(t, losers[0].Err, "a dropped loser did nothing wrong")
	assert.Equal(t, int64(100*time.Millisecond), losers[0].End-losers[0].Start)
	assert.Len(t, losers[0].Frames, 2, "the loser's frames without content")
	assert.Equal(t, "c1", losers[0].Meta.ResponseID)
	assert.Empty(t, s.Ended())
	assert.Equal(t, 2, s.Attempts())
}

func TestPrimaryWinsLate(t *testing.T) {
	h := newHarness(t, Rule{Delay: 100 * time.Millisecond, MaxAttempts: 2})
	s, out, _ := h.call(t)
	p := h.primary.next(t)
	p.stream(roleFrame)
	h.blockUntil(t, 1)
	h.clock.Advance(100 * time.Millisecond)
	a := h.alt.next(t)
	a.stream(roleFrame)
	p.write(textFrame) // after the hedge started, before it delivered

	r := wait(t, out)
	require.NoError(t, r.err)
	assert.Equal(t, roleFrame+textFrame, readN(t, r.resp.Body, len(roleFrame+textFrame)))
	assert.ErrorIs(t, a.cancelled(t), errLoser)
	require.NoError(t, r.resp.Body.Close())
	assert.False(t, s.Won())
	losers := s.Finish()
	require.Len(t, losers, 1)
	assert.Equal(t, 1, losers[0].Attempt)
	assert.NotNil(t, losers[0].Upstream)
	assert.Equal(t, 0, s.Representative().Attempt)
}

func TestFailoverOn503AndBothFail(t *testing.T) {
	h := newHarness(t, Rule{MaxAttempts: 2}) // no hedge delay: failover only
	s, out, _ := h.call(t)
	h.primary.next(t).status(http.StatusServiceUnavailable, `{"error":{"message":"primary down"}}`)
	a := h.alt.next(t) // at once: no clock advance
	a.status(http.StatusServiceUnavailable, `{"error":{"message":"alternate down"}}`)
	r := wait(t, out)
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusServiceUnavailable, r.resp.StatusCode)
	got, _ := io.ReadAll(r.resp.Body)
	assert.JSONEq(t, `{"error":{"message":"alternate down"}}`, string(got), "the last failure, as its upstream sent it")
	require.NoError(t, r.resp.Body.Close())
	losers := s.Finish()
	require.Len(t, losers, 1)
	assert.Equal(t, http.StatusServiceUnavailable, losers[0].Status)
	var se *StatusError
	require.ErrorAs(t, losers[0].Err, &se)
	rep := s.Representative()
	assert.Equal(t, 1, rep.Attempt)
	assert.Equal(t, hedgecore.TriggerError, rep.Trigger)
	assert.Equal(t, hedgecore.DelayNone, rep.DelaySource, "no hedge delay is armed without one")
}

func TestFatalErrorIsPassedOn(t *testing.T) {
	h := newHarness(t, Rule{Delay: time.Second, MaxAttempts: 3})
	s, out, _ := h.call(t)
	h.primary.next(t).status(http.StatusBadRequest, `{"error":{"message":"bad model"}}`)
	r := wait(t, out)
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusBadRequest, r.resp.StatusCode)
	got, _ := io.ReadAll(r.resp.Body)
	assert.JSONEq(t, `{"error":{"message":"bad model"}}`, string(got))
	require.NoError(t, r.resp.Body.Close())
	h.alt.none(t)
	assert.Empty(t, s.Finish())
	assert.Equal(t, 1, s.Attempts())
}

func TestTransportErrorsOnEveryAttempt(t *testing.T) {
	h := newHarness(t, Rule{MaxAttempts: 2})
	s, out, _ := h.call(t)
	h.primary.next(t).err <- errors.New("connection refused")
	h.alt.next(t).err <- errors.New("no route to host")
	r := wait(t, out)
	require.ErrorContains(t, r.err, "no route to host", "the last failure: the proxy answers it as it answers any")
	losers := s.Finish()
	require.Len(t, losers, 1)
	assert.ErrorContains(t, losers[0].Err, "connection refused")
}

func TestBudgetEmptyStopsHedging(t *testing.T) {
	// max_tokens 2: the first hedge takes the bucket to its threshold.
	h := newHarness(t, Rule{Delay: 100 * time.Millisecond, MaxAttempts: 2, Budgets: hedgecore.NewClientBudgets(hedgecore.ClientBudgetConfig{MaxTokens: 2, TokenRatio: 0.1})})
	s1, out1, _ := h.call(t)
	h.primary.next(t).stream(roleFrame)
	h.blockUntil(t, 1)
	h.clock.Advance(100 * time.Millisecond)
	h.alt.next(t).stream(textFrame)
	r := wait(t, out1)
	require.NoError(t, r.err)
	require.NoError(t, r.resp.Body.Close())
	s1.Finish()
	assert.Zero(t, s1.Refused())

	s2, out2, _ := h.call(t)
	p := h.primary.next(t)
	p.stream(roleFrame)
	h.blockUntil(t, 1)
	h.clock.Advance(100 * time.Millisecond)
	h.alt.none(t)
	p.write(textFrame)
	r = wait(t, out2)
	require.NoError(t, r.err)
	require.NoError(t, r.resp.Body.Close())
	s2.Finish()
	assert.Equal(t, 1, s2.Refused(), "the budget refused the hedge")
	assert.Equal(t, 1, s2.Attempts())
}

func TestTTFTTimeoutGivesUpThenAnswers504(t *testing.T) {
	h := newHarness(t, Rule{TTFTTimeout: time.Second, MaxAttempts: 2})
	s, out, _ := h.call(t)
	p := h.primary.next(t)
	p.stream(roleFrame, keepaliveFrame)
	h.blockUntil(t, 1)
	h.clock.Advance(time.Second)
	assert.ErrorIs(t, p.cancelled(t), errLoser, "the silent attempt is given up")
	a := h.alt.next(t)
	a.stream(roleFrame)
	h.blockUntil(t, 1)
	h.clock.Advance(time.Second)

	r := wait(t, out)
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusGatewayTimeout, r.resp.StatusCode)
	got, _ := io.ReadAll(r.resp.Body)
	m, err := llmstream.ParseResponse(llmstream.ShapeChatCompletions, got)
	require.NoError(t, err)
	assert.Contains(t, m.ErrorMessage, "ttft_timeout (1s)")
	require.NoError(t, r.resp.Body.Close())
	losers := s.Finish()
	assert.Equal(t, ErrTypeTTFTTimeout, s.Ended())
	require.Len(t, losers, 1)
	assert.ErrorIs(t, losers[0].Err, hedgecore.ErrTTFTTimeout)
	assert.Equal(t, hedgecore.TriggerTTFT, s.Representative().Trigger)
}

// contentClock is the test's stand-in for the proxy's tee: the test says
// when content came, as the copy loop publishes it.
type contentClock struct{ p *Progress }

func (c *contentClock) set(at time.Time, answered bool) { c.p.Content(at.UnixNano(), answered) }

// commit runs a call to a committed primary stream and starts its watchdog.
func (h *harness) commit(t *testing.T, first string) (*Session, *upstreamCall, *http.Response, *contentClock) {
	t.Helper()
	s, out, _ := h.call(t)
	p := h.primary.next(t)
	p.stream(roleFrame, first)
	r := wait(t, out)
	require.NoError(t, r.err)
	cc := &contentClock{p: s.Watch(nil)}
	require.NotNil(t, cc.p, "the stream is watched")
	assert.Equal(t, roleFrame+first, readN(t, r.resp.Body, len(roleFrame+first)))
	return s, p, r.resp, cc
}

func TestNoWatchdogBeforeCommit(t *testing.T) {
	h := newHarness(t, Rule{StallTimeout: time.Second, MaxAttempts: 1})
	_, out, _ := h.call(t)
	p := h.primary.next(t)
	p.stream(roleFrame)
	for range 5 {
		h.clock.Advance(time.Second)
		p.write(keepaliveFrame)
	}
	pending(t, out) // no content yet: the stall watchdog does not run, and nothing reached the client
	p.write(textFrame)
	r := wait(t, out)
	require.NoError(t, r.err)
	assert.Equal(t, roleFrame+strings.Repeat(keepaliveFrame, 5)+textFrame, readN(t, r.resp.Body, len(roleFrame)+5*len(keepaliveFrame)+len(textFrame)))
	require.NoError(t, r.resp.Body.Close())
}

func TestWatchdogEndsAStallWhileKeepalivesFlow(t *testing.T) {
	h := newHarness(t, Rule{StallTimeout: time.Second, MaxAttempts: 1})
	s, p, resp, cc := h.commit(t, textFrame)
	cc.set(h.clock.Now(), true)
	h.blockUntil(t, 1)

	// Content at 600 ms moves the deadline to 1.6 s; keepalives at 900 ms
	// and 1.2 s do not.
	h.clock.Advance(600 * time.Millisecond)
	p.write(textFrame)
	assert.Equal(t, textFrame, readN(t, resp.Body, len(textFrame)))
	cc.set(h.clock.Now(), true)
	h.clock.Advance(400 * time.Millisecond) // 1 s: the first deadline; the watchdog re-arms
	h.blockUntil(t, 1)
	for _, step := range []time.Duration{300 * time.Millisecond, 299 * time.Millisecond} {
		p.write(keepaliveFrame)
		assert.Equal(t, keepaliveFrame, readN(t, resp.Body, len(keepaliveFrame)))
		h.clock.Advance(step)
	}
	h.blockUntil(t, 1)
	h.clock.Advance(2 * time.Millisecond) // 1.601 s: past the deadline
	assert.ErrorIs(t, p.cancelled(t), errStalled, "the upstream request is closed")

	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the stream ends cleanly, after the frame")
	b := llmstream.NewBoundary(llmstream.ShapeChatCompletions, sse.FramingSSE) // the keepalive ended on a boundary
	frame := string(b.ErrorFrame(http.StatusGatewayTimeout, ErrTypeStallTimeout,
		"stream stalled: no content for 1.001s (stall_timeout 1s, sse_capture guard)"))
	assert.Equal(t, frame, string(rest))
	require.NoError(t, resp.Body.Close())
	s.Finish()
	assert.Equal(t, ErrTypeStallTimeout, s.Ended())
	assert.Equal(t, time.Second, s.StallTimeoutUsed())
}

func TestWatchdogSparesReasoning(t *testing.T) {
	h := newHarness(t, Rule{StallTimeout: time.Second, ReasoningStallTimeout: 5 * time.Second, MaxAttempts: 1})
	s, p, resp, cc := h.commit(t, thinkFrame)
	cc.set(h.clock.Now(), false)
	second := func() {
		h.blockUntil(t, 1)
		h.clock.Advance(time.Second)
	}
	for range 4 {
		second()
	}
	p.write(thinkFrame) // 4 s of thinking: within the reasoning timeout
	assert.Equal(t, thinkFrame, readN(t, resp.Body, len(thinkFrame)))
	cc.set(h.clock.Now(), false)
	for range 4 {
		second()
	}
	select {
	case <-p.req.Context().Done():
		t.Fatal("a reasoning silence under reasoning_stall_timeout ended the stream")
	default:
	}
	p.write(textFrame) // 8 s: answering now, stall_timeout applies
	assert.Equal(t, textFrame, readN(t, resp.Body, len(textFrame)))
	cc.set(h.clock.Now(), true)
	second()
	assert.ErrorIs(t, p.cancelled(t), errStalled, "one second after the answer chunk")
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(rest), "no content for 1s (stall_timeout 1s")
	require.NoError(t, resp.Body.Close())
	s.Finish()
	assert.Equal(t, ErrTypeStallTimeout, s.Ended())
}

func TestShutdownEndsTheStreamWithTheFrame(t *testing.T) {
	h := newHarness(t, Rule{MaxAttempts: 1})
	s, out, cancel := h.call(t)
	p := h.primary.next(t)
	p.stream(roleFrame, textFrame[:20]) // cut in the middle of a frame
	p.write(textFrame[20:] + textFrame[:10])
	r := wait(t, out)
	require.NoError(t, r.err)
	readN(t, r.resp.Body, len(roleFrame+textFrame)+10)
	h.stop()
	cancel() // the proxy cancels the request of every stream it stops
	rest, err := io.ReadAll(r.resp.Body)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(rest), "\n\ndata: {\"error\""), "the open line is closed first: %q", rest)
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
	assert.Equal(t, "shutdown", s.Ended())
}

func TestClientGoneBeforeCommit(t *testing.T) {
	h := newHarness(t, Rule{Delay: 100 * time.Millisecond, MaxAttempts: 2})
	s, out, cancel := h.call(t)
	p := h.primary.next(t)
	p.stream(roleFrame)
	cancel()
	r := wait(t, out)
	require.ErrorIs(t, r.err, context.Canceled)
	assert.ErrorIs(t, p.cancelled(t), context.Canceled, "the attempt ends with the client")
	assert.Empty(t, s.Finish())
}

func TestLearnedDelayAndModels(t *testing.T) {
	g := New(Settings{
		Default: Rule{Delay: time.Second, MaxAttempts: 2},
		Models: []Rule{
			{Model: "o3*", AutoDelay: true, Quantile: 0.5, FallbackDelay: 3 * time.Second, MinSamples: 2, MaxAttempts: 2},
			{Model: "*thinking*", StallTimeout: AutoTimeout, AutoStall: true, MaxAttempts: 1},
		},
		AutoStall: AutoStall{Multiple: 10, Floor: 30 * time.Second, MinSamples: 5},
		Clock:     clockwork.NewFakeClock(),
	})
	assert.Same(t, g.For("openai", "gpt-4o"), g.For("openai", "gpt-4o-mini"), "a fixed rule: one policy")
	o3 := g.For("openai", "o3-mini")
	assert.NotSame(t, o3, g.For("openai", "o3-mini"), "a model is kept once a call of it brought content")
	o3.admit()
	assert.Same(t, o3, g.For("openai", "o3-mini"))
	assert.NotSame(t, o3, g.For("openai", "o3-pro"), "a learning rule learns per model")
	d, src := o3.hp.DelayFrom(0)
	assert.Equal(t, int64(3*time.Second), d)
	assert.Equal(t, hedgecore.DelayFallback, src)
	o3.hp.Observe(0, 1, int64(200*time.Millisecond))
	o3.hp.Observe(0, 2, int64(200*time.Millisecond))
	d, src = o3.hp.DelayFrom(0)
	assert.InDelta(t, float64(200*time.Millisecond), float64(d), float64(5*time.Millisecond))
	assert.Equal(t, hedgecore.DelayLocal, src)

	th := g.For("openai", "claude-thinking")
	th.admit()
	assert.Equal(t, 30*time.Second, th.StallTimeout(true), "the floor until enough gaps are in")
	gaps := make([]Gap, 0, 100)
	for range 100 {
		gaps = append(gaps, Gap{Length: 5 * time.Second})
	}
	th.ObserveGaps(1, gaps)
	assert.InDelta(t, float64(50*time.Second), float64(th.StallTimeout(true)), float64(time.Second), "ten times the p99.9 gap")
	censored := make([]Gap, 10)
	for i := range censored {
		censored[i] = Gap{Length: 10 * time.Minute, Censored: true}
	}
	th.ObserveGaps(2, censored)
	assert.Greater(t, th.StallTimeout(true), 10*time.Minute, "streams cut in long silences count as long gaps")
}

// TestFinishWithoutAnAttempt: a call ReverseProxy answered itself, before
// its transport (an Upgrade header it refuses), started no attempt; its
// session still finishes, with no loser.
func TestFinishWithoutAnAttempt(t *testing.T) {
	h := newHarness(t, Rule{MaxAttempts: 2})
	in, _ := url.Parse("/v1/chat/completions")
	s := h.guard.NewSession(h.stopping, "openai", "gpt-4o", llmstream.ShapeChatCompletions, in, nil, h.clock.Now().UnixNano())
	assert.Empty(t, s.Finish())
	assert.Equal(t, 0, s.Representative().Attempt)
	assert.Zero(t, s.Attempts())
	assert.False(t, s.Won())
	assert.Empty(t, s.Ended())
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedge

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pipeSource is an in-memory Source whose streams the test feeds by hand,
// for tests on a fake clock where every instant is chosen.
type pipeSource struct {
	name   string
	opened chan *pipeStream
}

func newPipeSource(name string) *pipeSource {
	return &pipeSource{name: name, opened: make(chan *pipeStream, 5)}
}

func (s *pipeSource) Name() string     { return s.name }
func (s *pipeSource) Provider() string { return "openai" }
func (s *pipeSource) Model() string    { return s.name + "-model" }

func (s *pipeSource) Open(ctx context.Context, req *Request) (Stream, error) {
	p := &pipeStream{ctx: ctx, req: req, events: make(chan Event), errs: make(chan error, 1), closed: make(chan struct{})}
	s.opened <- p
	return p, nil
}

type pipeStream struct {
	ctx    context.Context
	req    *Request
	events chan Event
	errs   chan error
	closed chan struct{}
	recvs  atomic.Int64 // calls of Recv, counted on entry
	fed    int64        // events handed over by feed
}

func (p *pipeStream) Recv() (Event, error) {
	p.recvs.Add(1)
	select {
	case ev := <-p.events:
		return ev, nil
	case err := <-p.errs:
		return Event{}, err
	case <-p.ctx.Done():
		return Event{}, p.ctx.Err()
	}
}

func (p *pipeStream) Close() error {
	close(p.closed)
	return nil
}

// feed hands ev to the attempt's reader and returns once the reader asked
// for the next event. A send on events alone returns when the reader took
// ev, before it stamped ev's arrival on the clock: a clock advanced right
// after it could overtake the stamp. Only for events the reader loops past
// (not EventDone).
func (p *pipeStream) feed(t *testing.T, ev Event) {
	t.Helper()
	p.events <- ev
	p.fed++
	require.Eventually(t, func() bool { return p.recvs.Load() > p.fed }, 5*time.Second, time.Millisecond,
		"the reader never asked for the event after %d", p.fed)
}

func text(s string) Event { return Event{Type: EventContent, Chunk: Chunk{Text: s}} }

// consumer runs a streaming call in a goroutine and hands over its chunks.
type consumer struct {
	chunks chan Chunk
	done   chan error
	call   *Call
}

func consume(t *testing.T, h *Hedger, req Request) *consumer {
	t.Helper()
	c := &consumer{chunks: make(chan Chunk), done: make(chan error, 1)}
	call, err := h.Stream(context.Background(), req)
	require.NoError(t, err)
	c.call = call
	go func() {
		for call.Next() {
			c.chunks <- call.Chunk()
		}
		c.done <- call.Err()
	}()
	return c
}

func (c *consumer) next(t *testing.T) Chunk {
	t.Helper()
	select {
	case ch := <-c.chunks:
		return ch
	case err := <-c.done:
		t.Fatalf("call ended: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("no chunk")
	}
	return Chunk{}
}

func (c *consumer) end(t *testing.T) error {
	t.Helper()
	select {
	case err := <-c.done:
		c.call.Close()
		return err
	case ch := <-c.chunks:
		t.Fatalf("unexpected chunk %q", ch.Text)
	case <-time.After(5 * time.Second):
		t.Fatal("call did not end")
	}
	return nil
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("nothing received")
	}
	var zero T
	return zero
}

func blockUntil(t *testing.T, clock *clockwork.FakeClock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, clock.BlockUntilContext(ctx, n))
}

func TestStreamHedgeCommitsFirstDelivered(t *testing.T) {
	clock := clockwork.NewFakeClock()
	a, b := newPipeSource("a"), newPipeSource("b")
	h, err := New([]Source{a, b}, Delay(100*time.Millisecond), withClock(clock))
	require.NoError(t, err)
	c := consume(t, h, hello)

	pa := recv(t, a.opened)
	blockUntil(t, clock, 1) // the hedge timer
	clock.Advance(100 * time.Millisecond)
	pb := recv(t, b.opened)

	pb.events <- text("Hel")
	assert.Equal(t, "Hel", c.next(t).Text)
	recv(t, pa.ctx.Done()) // the primary is cancelled at commit
	recv(t, pa.closed)     // and its body closed
	pb.events <- text("lo")
	assert.Equal(t, "lo", c.next(t).Text)
	pb.events <- Event{Type: EventDone, Model: "b-2025", Usage: Usage{InputTokens: 3, OutputTokens: 2}, FinishReason: "stop"}
	require.NoError(t, c.end(t))

	res := c.call.Result()
	assert.Equal(t, Result{
		Text: "Hello", Source: "b", Model: "b-2025", Usage: Usage{InputTokens: 3, OutputTokens: 2},
		FinishReason: "stop", Attempts: 2,
	}, res)
}

func TestStreamWatchdogOnFakeClock(t *testing.T) {
	clock := clockwork.NewFakeClock()
	a := newPipeSource("a")
	h, err := New([]Source{a}, Delay(time.Hour), StallTimeout(time.Second), withClock(clock))
	require.NoError(t, err)
	c := consume(t, h, hello)
	pa := recv(t, a.opened)
	pa.events <- text("partial ")
	c.next(t)
	pa.events <- Event{Type: EventContent, Chunk: Chunk{Kind: ChunkToolCall, Text: `{"a":`}}
	c.next(t)
	blockUntil(t, clock, 1)
	clock.Advance(time.Second)
	err = c.end(t)
	var stall *StallError
	require.ErrorAs(t, err, &stall)
	assert.Equal(t, &StallError{Source: "a", Model: "a-model", Chunks: 2, Partial: "partial ", Silence: time.Second}, stall)
	recv(t, pa.closed)
}

// completed is what a Complete call returned.
type completed struct {
	res Result
	err error
}

// completeAsync runs a Complete call of hello on h; its result comes on the
// channel.
func completeAsync(h *Hedger) <-chan completed {
	done := make(chan completed, 1)
	go func() {
		res, err := h.Complete(context.Background(), hello)
		done <- completed{res, err}
	}()
	return done
}

func TestCompleteBufferedStallAfterOnFakeClock(t *testing.T) {
	clock := clockwork.NewFakeClock()
	a, b := newPipeSource("a"), newPipeSource("b")
	h, err := New([]Source{a, b}, Delay(time.Hour), StallAfter(2*time.Second), StallTimeout(time.Minute), withClock(clock))
	require.NoError(t, err)
	done := completeAsync(h)
	pa := recv(t, a.opened)
	// Buffered delivery gives the test no chunk to wait on: feed waits
	// until both arrivals were stamped, before the clock moves.
	pa.feed(t, text("one "))
	pa.feed(t, text("two "))
	blockUntil(t, clock, 1)
	clock.Advance(2 * time.Second)
	pb := recv(t, b.opened)
	assert.Empty(t, pb.req.Prefix, "a buffered hedge starts afresh")
	pb.events <- text("uno ")
	pb.events <- Event{Type: EventDone}
	o := recv(t, done)
	require.NoError(t, o.err)
	assert.Equal(t, "uno ", o.res.Text, "the first attempt to complete wins, whole")
	assert.Equal(t, "b", o.res.Source)
	recv(t, pa.closed)
}

func TestStreamContinuationSendsPrefix(t *testing.T) {
	clock := clockwork.NewFakeClock()
	a, b := newPipeSource("a"), newPipeSource("b")
	h, err := New([]Source{a, b}, Delay(time.Hour), StallAfter(2*time.Second), Continuation(), withClock(clock))
	require.NoError(t, err)
	c := consume(t, h, hello)
	pa := recv(t, a.opened)
	pa.events <- text("The answer ")
	c.next(t)
	pa.events <- text("is ")
	c.next(t)
	blockUntil(t, clock, 1)
	clock.Advance(2 * time.Second)
	pb := recv(t, b.opened)
	assert.Equal(t, "The answer is ", pb.req.Prefix)
	pb.events <- text("42.")
	assert.Equal(t, "42.", c.next(t).Text)
	recv(t, pa.closed)
	pb.events <- Event{Type: EventDone}
	require.NoError(t, c.end(t))
	assert.Equal(t, "The answer is 42.", c.call.Result().Text)
	assert.Equal(t, "b", c.call.Result().Source)
}

func TestStreamCutBeforeDoneIsAnError(t *testing.T) {
	clock := clockwork.NewFakeClock()
	a := newPipeSource("a")
	h, err := New([]Source{a}, Delay(time.Hour), withClock(clock))
	require.NoError(t, err)
	c := consume(t, h, hello)
	pa := recv(t, a.opened)
	pa.events <- text("x")
	c.next(t)
	pa.errs <- io.EOF
	assert.ErrorIs(t, c.end(t), io.ErrUnexpectedEOF)
}

func TestCloseBeforeEndLeavesNothingRunning(t *testing.T) {
	clock := clockwork.NewFakeClock()
	a := newPipeSource("a")
	h, err := New([]Source{a}, Delay(time.Hour), withClock(clock))
	require.NoError(t, err)
	call, err := h.Stream(context.Background(), hello)
	require.NoError(t, err)
	pa := recv(t, a.opened)
	call.Close()
	call.Close()
	recv(t, pa.closed)
	assert.False(t, call.Next())
	assert.ErrorIs(t, call.Err(), errCallClosed)
}

func TestNewValidates(t *testing.T) {
	_, err := New(nil)
	assert.ErrorIs(t, err, errNoSources)
	src := newPipeSource("a")
	_, err = New([]Source{src}, Continuation())
	assert.ErrorContains(t, err, "continuation needs StallAfter")
	_, err = New([]Source{src}, AdaptiveDelay(1.5, time.Second), MaxAttempts(0), StallAfter(time.Minute), StallTimeout(time.Second))
	assert.ErrorContains(t, err, "quantile")
	assert.ErrorContains(t, err, "max attempts")
	assert.ErrorContains(t, err, "shorter than the stall timeout")
	_, err = New([]Source{src}, MaxChunkEvents(3))
	assert.ErrorContains(t, err, "max chunk events 3 is below 4")
	h, err := New([]Source{src})
	require.NoError(t, err)
	_, err = h.Stream(context.Background(), Request{})
	assert.ErrorIs(t, err, errNoMessages)
	_, err = h.Complete(context.Background(), Request{})
	assert.ErrorIs(t, err, errNoMessages)
}

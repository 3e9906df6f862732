// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedge

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

// TestSlowReaderIsNoStall: the source sends a chunk every 500 ms,
// never silent for the 1 s stall timeout, but the caller takes 2 s before
// its next Next (it writes each chunk to a slow client). The chunks that
// arrived meanwhile were stamped on arrival and wait in the call's channel;
// the watchdog's deadline (1 s after the last chunk handled) is past. The
// watchdog judges the chunks that arrived, not the caller's pace: the call
// ends normally with every chunk. Were the expired timer and the pending
// chunks a coin toss (Go's select), ten calls would fail almost surely.
func TestSlowReaderIsNoStall(t *testing.T) {
	for run := range 10 {
		clock := clockwork.NewFakeClock()
		a := newPipeSource("a")
		h, err := New([]Source{a}, Delay(time.Hour), MaxAttempts(1), StallTimeout(time.Second), withClock(clock))
		require.NoError(t, err)
		call, err := h.Stream(context.Background(), hello)
		require.NoError(t, err)
		pa := recv(t, a.opened)

		pa.feed(t, text("c0 "))
		require.True(t, call.Next())
		want := "c0 "
		// The caller is busy with c0 for 2 s; the source goes on every 500 ms.
		for k := 1; k <= 4; k++ {
			clock.Advance(500 * time.Millisecond)
			s := "c" + string(rune('0'+k)) + " "
			pa.feed(t, text(s))
			want += s
		}
		var got strings.Builder
		got.WriteString(call.Chunk().Text)
		for k := 1; k <= 4; k++ {
			if !call.Next() {
				break
			}
			got.WriteString(call.Chunk().Text)
		}
		if call.Err() == nil {
			pa.events <- Event{Type: EventDone}
			for call.Next() {
				got.WriteString(call.Chunk().Text)
			}
		}
		err = call.Err()
		call.Close()
		var stall *StallError
		if errors.As(err, &stall) {
			t.Fatalf("run %d: false stall: the source was never silent for 1 s, yet the call ended with %v after %q (want %q)",
				run, err, got.String(), want)
		}
		require.NoError(t, err, "run %d", run)
		assert.Equal(t, want, got.String())
	}
}

// TestFailedAttemptSpanEndsWhenItFailed: the primary answers 503 at
// 80 ms, the retry streams for 10 s. The 503 attempt is a loser; the
// stall_metrics connector records llm.hedge.wasted_duration from its span
// duration ("how long each loser ran", docs/metrics.md), and the proxy's
// guard ends a failed attempt at its failure. The span ends at 80 ms, not
// when the call ends 10 s later.
func TestFailedAttemptSpanEndsWhenItFailed(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
	clock := clockwork.NewFakeClock()
	a, b := newPipeSource("a"), newPipeSource("b")
	h, err := New([]Source{a, b}, Delay(time.Hour), withClock(clock), TracerProvider(tp))
	require.NoError(t, err)
	c := consume(t, h, hello)
	pa := recv(t, a.opened)
	clock.Advance(80 * time.Millisecond)
	pa.errs <- &StatusError{Source: "a", StatusCode: 503}
	pb := recv(t, b.opened)
	pb.events <- text("one ")
	c.next(t)
	clock.Advance(10 * time.Second)
	pb.events <- text("two")
	c.next(t)
	pb.events <- Event{Type: EventDone}
	require.NoError(t, c.end(t))

	failed := attempt(t, exp.GetSpans(), 0)
	assert.Equal(t, "loser", attr(t, failed, semconv.AttrHedgeOutcome).AsString())
	assert.Equal(t, "503", attr(t, failed, semconv.AttrErrorType).AsString())
	assert.Equal(t, 80*time.Millisecond, failed.EndTime.Sub(failed.StartTime),
		"the failed attempt ran 80 ms; its span must not last until the end of the call")
}

// TestBrokenStreamReplacedByContinuationKeepsItsError: the committed
// stream breaks (a transport error) and a continuation takes over. The
// broken attempt failed: its span carries error.type and an error status
// ("Failed attempts get error.type", hedge/README.md), not the look of a
// clean cancelled loser.
func TestBrokenStreamReplacedByContinuationKeepsItsError(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
	clock := clockwork.NewFakeClock()
	a, b := newPipeSource("a"), newPipeSource("b")
	h, err := New([]Source{a, b}, Delay(time.Hour), StallAfter(2*time.Second), Continuation(), withClock(clock), TracerProvider(tp))
	require.NoError(t, err)
	c := consume(t, h, hello)
	pa := recv(t, a.opened)
	pa.events <- text("The answer ")
	c.next(t)
	pa.errs <- errors.New("connection reset by peer")
	pb := recv(t, b.opened)
	assert.Equal(t, "The answer ", pb.req.Prefix)
	pb.events <- text("is 42.")
	assert.Equal(t, "is 42.", c.next(t).Text)
	pb.events <- Event{Type: EventDone}
	require.NoError(t, c.end(t))

	broken := attempt(t, exp.GetSpans(), 0)
	assert.Equal(t, "loser", attr(t, broken, semconv.AttrHedgeOutcome).AsString())
	assert.True(t, hasAttr(broken, semconv.AttrErrorType), "the broken attempt's span lacks error.type")
	assert.Equal(t, codes.Error, broken.Status.Code, "the broken attempt failed")
}

// TestBufferedLeaderRefusalLeavesTheHedgeToAnswer: in buffered
// delivery nothing has reached the caller, so the leader is no committed
// stream: when it ends with a 4xx (an error event inside its stream, mapped
// to 400) while a stall hedge on another source runs, the call ends "once
// no other attempt runs" (hedge/README.md, Errors before commit: "a
// hedge's 404 leaves the primary to answer"), and the running hedge can
// still complete the whole answer.
func TestBufferedLeaderRefusalLeavesTheHedgeToAnswer(t *testing.T) {
	clock := clockwork.NewFakeClock()
	a, b := newPipeSource("a"), newPipeSource("b")
	h, err := New([]Source{a, b}, Delay(time.Hour), StallAfter(2*time.Second), StallTimeout(time.Minute), withClock(clock))
	require.NoError(t, err)
	done := completeAsync(h)
	pa := recv(t, a.opened)
	pa.feed(t, text("one "))
	blockUntil(t, clock, 1)
	clock.Advance(2 * time.Second)
	pb := recv(t, b.opened) // the stall hedge, a fresh attempt
	pa.errs <- &StatusError{Source: "a", StatusCode: 400, Body: "invalid_request_error"}
	recv(t, pa.closed) // the leader's reader handed its error to the call and returned
	for _, ev := range []Event{text("uno"), {Type: EventDone}} {
		select {
		case pb.events <- ev:
		case <-pb.ctx.Done():
		}
	}
	o := recv(t, done)
	require.NoError(t, o.err, "the leader's refusal ended the call though the hedge was running")
	assert.Equal(t, "uno", o.res.Text)
}

// TestEmptyStreamIsNoAnswer: a broken (or hostile) hedge answers 200 and
// at once "data: [DONE]": no content and not even a finish reason. The race
// commits "on the first content chunk" (hedge/README.md): the attempt fails
// as a 5xx does, and the primary, 200 ms from its answer, answers the call.
func TestEmptyStreamIsNoAnswer(t *testing.T) {
	_, url := startFakeLLM(t)
	primary := openAISource("primary", url, script(t, fakellm.Script{TTFTMillis: 200, GapsMillis: gaps(3, 1)}))
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(empty.Close)
	hedgeSrc := openAISource("empty", empty.URL+"/v1", nil)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
	h, err := New([]Source{primary, hedgeSrc}, Delay(20*time.Millisecond), TracerProvider(tp))
	require.NoError(t, err)
	res, err := h.Complete(context.Background(), hello)
	require.NoError(t, err)
	assert.Equal(t, "primary", res.Source, "an attempt without any content won the race")
	assert.NotEmpty(t, res.Text)
	assert.Equal(t, semconv.ErrorTypeEmptyAnswer, attr(t, attempt(t, exp.GetSpans(), 1), semconv.AttrErrorType).AsString(),
		"the empty answer failed, and says how")
}

// TestLongStreamKeepsItsFigures: a 300-chunk answer (an ordinary length)
// with one 3 s stall, through the hedge client with an SDK TracerProvider
// at its default limits. The SDK keeps at most 128 events per span and
// evicts the oldest: unbounded, the span would lose its first chunks, and
// the stall processor would derive llm.stream.ttft_ms from chunk 173 and
// hedge_advisor learn that TTFT. The client elides as the receiver does
// (docs/contract.md section 3): the first chunk and both chunks of the
// stall are kept, the rest counted.
func TestLongStreamKeepsItsFigures(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)) // default span limits
	defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
	clock := clockwork.NewFakeClock()
	a := newPipeSource("a")
	h, err := New([]Source{a}, Delay(time.Hour), withClock(clock), TracerProvider(tp))
	require.NoError(t, err)
	c := consume(t, h, hello)
	pa := recv(t, a.opened)
	start := clock.Now()
	clock.Advance(400 * time.Millisecond) // TTFT 400 ms
	first := clock.Now()
	for i := range 300 {
		pa.events <- text("x")
		c.next(t)
		clock.Advance(10 * time.Millisecond)
		if i == 150 {
			clock.Advance(3 * time.Second)
		}
	}
	pa.events <- Event{Type: EventDone}
	require.NoError(t, c.end(t))

	span := attempt(t, exp.GetSpans(), 0)
	require.NotEmpty(t, span.Events)
	earliest := span.Events[0].Time
	for _, e := range span.Events {
		if e.Time.Before(earliest) {
			earliest = e.Time
		}
	}
	assert.Equal(t, first.Sub(start), earliest.Sub(span.StartTime),
		"the TTFT the span gives (first chunk event - start) is the stream's (%d events kept, %d dropped)",
		len(span.Events), span.DroppedEvents)
	assert.Zero(t, span.DroppedEvents, "the SDK dropped none")
	assert.LessOrEqual(t, len(span.Events), DefaultMaxChunkEvents)
	var counted, stalls int64
	for i, e := range span.Events {
		counted++
		for _, kv := range e.Attributes {
			if kv.Key == semconv.AttrChunkElided {
				counted += kv.Value.AsInt64()
			}
		}
		if i > 0 && e.Time.Sub(span.Events[i-1].Time) > 2*time.Second {
			stalls++
		}
	}
	assert.Equal(t, int64(300), counted, "every chunk is an event or counted on one")
	assert.Equal(t, int64(1), stalls, "both chunks of the stall are kept")
	assert.Equal(t, int64(300-len(span.Events)), attr(t, span, semconv.AttrChunkEventsElided).AsInt64())
	assert.Equal(t, float64(2000), attr(t, span, semconv.AttrChunkEventsKeepGapsAboveMs).AsFloat64())
}

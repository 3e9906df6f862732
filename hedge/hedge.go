// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package hedge races streaming LLM calls across sources, the way errgroup
// runs goroutines: a small surface, context first, errors returned, no
// goroutine left behind.
//
// A call starts on the first source. When no content has arrived after the
// hedge delay, the next source starts; the first attempt to deliver a content
// chunk is committed and the others are cancelled for good, because two
// generations of one prompt diverge and can never be spliced. After commit an
// inactivity watchdog on content chunks (keepalives do not count) ends a
// stalled call with a retryable *StallError. Buffered calls (Complete) can
// hedge a mid-stream silence with a fresh attempt, and streaming calls can
// hedge it with a continuation of the text already delivered. A token bucket
// bounds all of it.
package hedge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamstall/streamstall/internal/hedgecore"
)

// Source is one LLM endpoint and model.
type Source interface {
	// Name identifies the source in results, errors and telemetry.
	Name() string
	// Provider is the gen_ai.provider.name of the source ("openai", ...).
	Provider() string
	// Model is the requested model.
	Model() string
	// Open sends the request and returns its event stream. Cancelling ctx
	// must abort the request and release its connection.
	Open(ctx context.Context, req *Request) (Stream, error)
}

// Stream is the event stream of one attempt. Recv returns io.EOF after the
// EventDone event; a stream that ends without EventDone is an error.
type Stream interface {
	Recv() (Event, error)
	Close() error
}

// Request is one logical call, sent to every source the same way.
type Request struct {
	System    string
	Messages  []Message
	MaxTokens int
	// Prefix is assistant text the model must continue. The Hedger sets it
	// on continuation attempts; sources send it as a final assistant message.
	Prefix string
}

// Message is one turn of the conversation.
type Message struct {
	Role    string // "user" or "assistant"
	Content string
}

// ChunkKind says what a content chunk carries (llm.stream.chunk.kind).
type ChunkKind uint8

const (
	ChunkText ChunkKind = iota
	ChunkToolCall
	ChunkReasoning
)

func (k ChunkKind) String() string {
	switch k {
	case ChunkToolCall:
		return "tool_call"
	case ChunkReasoning:
		return "reasoning"
	}
	return "text"
}

// Chunk is one content chunk: generated text, a tool-call delta (the
// arguments fragment) or a reasoning delta.
type Chunk struct {
	Kind ChunkKind
	Text string
}

// EventType sorts the events of a Stream.
type EventType uint8

const (
	// EventContent carries a content chunk.
	EventContent EventType = iota + 1
	// EventKeepalive is any frame without content: SSE comments, pings,
	// role-only or empty deltas, usage-only frames. It never resets a clock.
	EventKeepalive
	// EventDone ends the stream normally and carries what is known at the end.
	EventDone
)

// Event is one event of a Stream. Model is set when the frame names the
// response model.
type Event struct {
	Type         EventType
	Chunk        Chunk
	Model        string
	Usage        Usage
	FinishReason string
}

// Usage is the token usage reported by the source.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}

// Result is the outcome of a call.
type Result struct {
	// Text is the concatenated text chunks the caller got.
	Text string
	// Chunks are all content chunks, in order (Complete only).
	Chunks []Chunk
	// Source and Model name the attempt that finished the answer.
	Source string
	Model  string
	Usage  Usage
	// FinishReason is the source's stop reason, when it sent one.
	FinishReason string
	// Attempts counts the attempts started, the primary included.
	Attempts int
}

// StallError ends a call whose content stopped for longer than the stall
// timeout. A StallError always means a truncated answer: Partial is all the
// caller got. It is retryable: the source did not refuse the request.
type StallError struct {
	Source string
	Model  string
	// Chunks counts the content chunks the caller received.
	Chunks int
	// Partial is the text the caller received before the stall.
	Partial string
	// Silence is the stall timeout that fired.
	Silence time.Duration
}

func (e *StallError) Error() string {
	return fmt.Sprintf("hedge: %s (%s) stalled: no content for %s after %d chunks", e.Source, e.Model, e.Silence, e.Chunks)
}

// Timeout reports true, like net.Error: the call may be retried.
func (e *StallError) Timeout() bool { return true }

// StatusError is an HTTP error answer of a source. 408 (request timeout),
// 409 (conflict: OpenAI answers it for a lock timeout), 425 (too early),
// 429 and 5xx are retryable (the next attempt starts at once, on another
// source when this one asked to wait); other 4xx start none and end the
// call once no other attempt runs.
type StatusError struct {
	Source     string
	StatusCode int
	// Body is the start of the error body, for diagnosis.
	Body string
	// RetryAfter is how long the source asked not to be called again
	// (retry-after-ms, else Retry-After), 0 when it did not ask. No attempt
	// of the call goes to that source before then; when every source asked,
	// the call ends with this error, and its caller should wait as long.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("hedge: %s answered %d: %s", e.Source, e.StatusCode, e.Body)
}

// Fatal reports whether the status means the request itself is wrong.
func (e *StatusError) Fatal() bool {
	switch {
	case e.StatusCode == http.StatusRequestTimeout, e.StatusCode == http.StatusConflict, e.StatusCode == http.StatusTooEarly, e.StatusCode == http.StatusTooManyRequests:
		return false
	case e.StatusCode >= 400 && e.StatusCode < 500:
		return true
	}
	return false
}

var (
	errNoSources  = errors.New("hedge: no sources")
	errNoMessages = errors.New("hedge: request has no messages")
)

func classify(err error) hedgecore.Class {
	var se *StatusError
	if errors.As(err, &se) && se.Fatal() {
		return hedgecore.Fatal
	}
	return hedgecore.Retryable
}

// Hedger races calls across its sources. It is safe for concurrent use; the
// calls share the learned delays and the budget.
type Hedger struct {
	sources []Source
	policy  *hedgecore.Policy
	clock   clockwork.Clock
	tracer  trace.Tracer
	cfg     config
	advice  *adviceFetcher
}

// New returns a Hedger over sources, tried in order: the first is the
// primary, hedges go round robin to the next ones (back to the first when
// there is only one).
func New(sources []Source, opts ...Option) (*Hedger, error) {
	if len(sources) == 0 {
		return nil, errNoSources
	}
	for i, s := range sources {
		if s == nil {
			return nil, fmt.Errorf("hedge: source %d is nil", i)
		}
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("hedge: %w", err)
	}
	h := &Hedger{
		sources: append([]Source(nil), sources...),
		policy:  hedgecore.NewPolicy(cfg.core(len(sources))),
		clock:   cfg.clock,
		tracer:  cfg.tracer.Tracer(scopeName),
		cfg:     cfg,
	}
	if cfg.advice != nil {
		h.advice = newAdviceFetcher(cfg.advice, h.policy, h.sources, h.clock)
		h.advice.start()
	}
	return h, nil
}

// Close stops the background fetch of fleet advice (Advice) and waits for
// it; calls still work afterwards, on the last advice. Without Advice it
// does nothing. It is safe to call more than once.
func (h *Hedger) Close() {
	if h.advice != nil {
		h.advice.stop()
	}
}

// Stream starts a call in streaming delivery: iterate with Next and Chunk,
// then read Err and Result; always Close. The first attempt to deliver a
// content chunk is committed.
func (h *Hedger) Stream(ctx context.Context, req Request) (*Call, error) {
	if len(req.Messages) == 0 {
		return nil, errNoMessages
	}
	return h.start(ctx, req, false), nil
}

// Complete runs a call in buffered delivery: nothing is delivered before the
// end, so a mid-stream silence can be hedged with a fresh attempt
// (StallAfter), and the first attempt to complete wins.
func (h *Hedger) Complete(ctx context.Context, req Request) (Result, error) {
	if len(req.Messages) == 0 {
		return Result{}, errNoMessages
	}
	c := h.start(ctx, req, true)
	defer c.Close()
	for c.Next() {
	}
	if err := c.Err(); err != nil {
		return Result{}, err
	}
	return c.Result(), nil
}

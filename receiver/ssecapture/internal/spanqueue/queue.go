// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package spanqueue hands the proxy's spans to the next consumer from one
// background goroutine, so that a slow, blocking or failing pipeline never
// slows a user's stream.
package spanqueue // import "github.com/streamstall/streamstall/receiver/ssecapture/internal/spanqueue"

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

// Reasons a proxy span was lost, the "reason" attribute of
// otelcol_receiver_sse_capture_spans.dropped.
const (
	dropQueueFull     = "queue_full"
	dropConsumerError = "consumer_error"
	dropShutdown      = "shutdown"
)

var (
	errQueueFull = errors.New("span queue is full")
	errShutdown  = errors.New("receiver is shutting down")
)

// Queue hands spans to the next consumer from one background goroutine:
// Push never blocks, and what cannot be delivered is counted.
type Queue struct {
	format    string // the format reported through obsrecv
	next      consumer.Traces
	obsrecv   *receiverhelper.ObsReport
	telemetry *metadata.TelemetryBuilder

	items   chan ptrace.Traces
	ctx     context.Context // the drainer's own context, cancelled by Shutdown
	cancel  context.CancelFunc
	closing chan struct{}
	done    chan struct{}

	mu     sync.RWMutex
	closed bool
}

// New starts a queue of size spans in front of next; its drainer runs until
// Shutdown. format is what obsrecv reports the spans as.
func New(size int, format string, next consumer.Traces, obsrecv *receiverhelper.ObsReport, tb *metadata.TelemetryBuilder) *Queue {
	ctx, cancel := context.WithCancel(context.Background())
	q := &Queue{
		format: format, next: next, obsrecv: obsrecv, telemetry: tb,
		items: make(chan ptrace.Traces, size), ctx: ctx, cancel: cancel,
		closing: make(chan struct{}), done: make(chan struct{}),
	}
	go q.drain()
	return q
}

// Push enqueues td without ever blocking.
func (q *Queue) Push(td ptrace.Traces) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		q.drop(td, dropShutdown, errShutdown)
		return
	}
	select {
	case q.items <- td:
	default:
		q.drop(td, dropQueueFull, errQueueFull)
	}
}

func (q *Queue) drain() {
	defer close(q.done)
	for {
		select {
		case td := <-q.items:
			q.consume(td)
		case <-q.closing:
			// Deliver what is queued while Shutdown allows it; once its
			// context is cancelled, count the rest as lost.
			for {
				select {
				case td := <-q.items:
					if q.ctx.Err() != nil {
						q.drop(td, dropShutdown, errShutdown)
					} else {
						q.consume(td)
					}
				default:
					return
				}
			}
		}
	}
}

func (q *Queue) consume(td ptrace.Traces) {
	// Counted before it is handed on: from then on td is the next
	// consumer's (batch moves its spans out; others keep it and read it
	// from other goroutines).
	n := td.SpanCount()
	ctx := q.obsrecv.StartTracesOp(q.ctx)
	err := q.next.ConsumeTraces(ctx, td)
	q.obsrecv.EndTracesOp(ctx, q.format, n, err)
	if err != nil {
		q.telemetry.ReceiverSseCaptureSpansDropped.Add(q.ctx, int64(n),
			metric.WithAttributes(attribute.String("reason", dropConsumerError)))
	}
}

// drop counts spans that never reached the next consumer, in component
// telemetry and as refused in the receiver's standard ObsReport metrics.
func (q *Queue) drop(td ptrace.Traces, reason string, err error) {
	n := td.SpanCount()
	ctx := q.obsrecv.StartTracesOp(context.Background())
	q.obsrecv.EndTracesOp(ctx, q.format, n, err)
	q.telemetry.ReceiverSseCaptureSpansDropped.Add(ctx, int64(n),
		metric.WithAttributes(attribute.String("reason", reason)))
}

// Shutdown stops accepting spans, delivers the queued ones until ctx is done,
// then cancels the drainer's context and waits for it.
func (q *Queue) Shutdown(ctx context.Context) error {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.closing)
	}
	q.mu.Unlock()
	select {
	case <-q.done:
		q.cancel()
		return nil
	case <-ctx.Done():
		q.cancel()
		<-q.done
		return ctx.Err()
	}
}

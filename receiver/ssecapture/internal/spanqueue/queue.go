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
	"sync/atomic"
	"time"

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
	dropQueueBytes    = "queue_bytes"
	dropConsumerError = "consumer_error"
	dropShutdown      = "shutdown"
)

var (
	errQueueFull  = errors.New("span queue is full")
	errQueueBytes = errors.New("span queue holds its byte budget")
	errShutdown   = errors.New("receiver is shutting down")
)

// Queue hands spans to the next consumer from one background goroutine:
// Push never blocks, and what cannot be delivered is counted. It is bounded
// twice: in spans (its channel's size) and in bytes, the OTLP size of the
// spans queued or being delivered, so that a queue of long streams cannot
// hold more memory than its byte budget says.
type Queue struct {
	format    string // the format reported through obsrecv
	next      consumer.Traces
	obsrecv   *receiverhelper.ObsReport
	telemetry *metadata.TelemetryBuilder

	maxBytes int64
	bytes    atomic.Int64 // OTLP bytes of the spans held
	sizer    ptrace.ProtoMarshaler

	items   chan item
	ctx     context.Context // the drainer's own context, cancelled by Shutdown
	cancel  context.CancelFunc
	closing chan struct{}
	done    chan struct{}

	mu     sync.RWMutex
	closed bool
	// shutdownDrops counts the queued spans dropped at Shutdown.
	shutdownDrops atomic.Int64
}

type item struct {
	td    ptrace.Traces
	bytes int64
}

// New starts a queue of size spans and maxBytes OTLP bytes in front of
// next; its drainer runs until Shutdown. format is what obsrecv reports the
// spans as.
func New(size int, maxBytes int64, format string, next consumer.Traces, obsrecv *receiverhelper.ObsReport, tb *metadata.TelemetryBuilder) *Queue {
	ctx, cancel := context.WithCancel(context.Background())
	q := &Queue{
		format: format, next: next, obsrecv: obsrecv, telemetry: tb, maxBytes: maxBytes,
		items: make(chan item, size), ctx: ctx, cancel: cancel,
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
	n := int64(q.sizer.TracesSize(td))
	if q.bytes.Add(n) > q.maxBytes {
		q.bytes.Add(-n)
		q.drop(td, dropQueueBytes, errQueueBytes)
		return
	}
	select {
	case q.items <- item{td: td, bytes: n}:
	default:
		q.bytes.Add(-n)
		q.drop(td, dropQueueFull, errQueueFull)
	}
}

// Bytes is the OTLP size of the spans queued or being delivered.
func (q *Queue) Bytes() int64 { return q.bytes.Load() }

func (q *Queue) drain() {
	defer close(q.done)
	for {
		select {
		case it := <-q.items:
			q.deliver(it)
		case <-q.closing:
			// Deliver what is queued while Shutdown allows it.
			for {
				select {
				case it := <-q.items:
					q.deliver(it)
				default:
					return
				}
			}
		}
	}
}

// deliver hands it to the next consumer, or, once Shutdown has cancelled
// the drainer's context, counts it as lost at shutdown.
func (q *Queue) deliver(it item) {
	if q.ctx.Err() != nil {
		q.drop(it.td, dropShutdown, errShutdown)
		q.bytes.Add(-it.bytes)
		q.shutdownDrops.Add(int64(it.td.SpanCount()))
		return
	}
	q.consume(it)
}

func (q *Queue) consume(it item) {
	// The spans are held until the next consumer returns: a synchronous
	// pipeline works on them until then.
	defer q.bytes.Add(-it.bytes)
	// Counted before it is handed on: from then on td is the next
	// consumer's (batch moves its spans out; others keep it and read it
	// from other goroutines).
	td := it.td
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

// consumerGrace is how long Shutdown waits, once it has cancelled the
// drainer's context, for the next consumer to return the spans it holds.
const consumerGrace = time.Second

// errConsumerStuck: the next consumer held on to a delivery after its
// context was cancelled.
var errConsumerStuck = errors.New("span queue: the next consumer did not return after its context was cancelled")

// Shutdown stops accepting spans and delivers the queued ones for at most
// drain, and no longer than ctx allows. Then it cancels the drainer's
// context, so that a consumer waiting on it (an exporter's retries, a full
// queue that blocks) returns, and the spans still queued are dropped and
// counted (reason shutdown): a pipeline that cannot take them never holds
// the collector's shutdown for longer than drain. It returns how many spans
// were dropped that way, and an error when ctx ran out before drain did, or
// when the consumer did not return within consumerGrace of the
// cancellation (the drainer is then left to end on its own, dropping the
// rest).
func (q *Queue) Shutdown(ctx context.Context, drain time.Duration) (int64, error) {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.closing)
	}
	q.mu.Unlock()
	timer := time.NewTimer(drain)
	defer timer.Stop()
	var err error
	select {
	case <-q.done:
		q.cancel()
		return q.shutdownDrops.Load(), nil
	case <-timer.C:
	case <-ctx.Done():
		err = ctx.Err()
	}
	q.cancel()
	grace := time.NewTimer(consumerGrace)
	defer grace.Stop()
	select {
	case <-q.done:
	case <-grace.C:
		err = errors.Join(err, errConsumerStuck)
	}
	return q.shutdownDrops.Load(), err
}

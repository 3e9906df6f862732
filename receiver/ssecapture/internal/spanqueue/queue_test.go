// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package spanqueue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/streamstall/streamstall/internal/testbed/takingsink"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

// tracesOf returns one resource with n spans.
func tracesOf(n int) ptrace.Traces {
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for range n {
		spans.AppendEmpty().SetName("chat gpt-4o")
	}
	return td
}

// sumOf returns the value of an int64 sum metric, zero when it was never
// recorded.
func sumOf(t *testing.T, tel *componenttest.Telemetry, name string) int64 {
	t.Helper()
	m, err := tel.GetMetric(name)
	if err != nil {
		return 0
	}
	var total int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		total += dp.Value
	}
	return total
}

// TestCountedBeforeHandedOn: the accepted and refused counters say how many
// spans the next consumer got, whatever it does with them afterwards.
func TestCountedBeforeHandedOn(t *testing.T) {
	for _, tt := range []struct {
		name  string
		async bool
		err   error
	}{
		{name: "moves the spans out"},
		{name: "works on them after returning", async: true},
		{name: "moves them out and fails", err: errors.New("pipeline refused")},
		{name: "works on them after returning and fails", async: true, err: errors.New("pipeline refused")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sink := &takingsink.Sink{Async: tt.async, Err: tt.err}
			q, tel := newTestQueue(t, sink, 1<<30)
			sent := 0
			for i := range 50 {
				q.Push(tracesOf(1 + i%3))
				sent += 1 + i%3
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			atShutdown, errShut := q.Shutdown(ctx, time.Minute)
			require.NoError(t, errShut)
			assert.Zero(t, atShutdown)

			assert.Equal(t, sent, sink.Taken(), "the consumer got every span")
			accepted := sumOf(t, tel, "otelcol_receiver_accepted_spans")
			refused := sumOf(t, tel, "otelcol_receiver_refused_spans") + sumOf(t, tel, "otelcol_receiver_failed_spans")
			dropped := sumOf(t, tel, "otelcol_receiver_sse_capture_spans.dropped")
			if tt.err == nil {
				assert.Equal(t, int64(sent), accepted)
				assert.Zero(t, refused)
				assert.Zero(t, dropped)
			} else {
				assert.Zero(t, accepted)
				assert.Equal(t, int64(sent), refused)
				assert.Equal(t, int64(sent), dropped, "spans the pipeline refused are counted as dropped")
			}
		})
	}
}

// blockingSink holds every ConsumeTraces call until release is closed, as a
// black-holed exporter does.
type blockingSink struct {
	release chan struct{}
	mu      sync.Mutex
	spans   int
}

func (s *blockingSink) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (s *blockingSink) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	<-s.release
	s.mu.Lock()
	s.spans += td.SpanCount()
	s.mu.Unlock()
	return nil
}

// droppedBy returns the dropped-spans counter of one reason.
func droppedBy(t *testing.T, tel *componenttest.Telemetry, reason string) int64 {
	t.Helper()
	m, err := tel.GetMetric("otelcol_receiver_sse_capture_spans.dropped")
	if err != nil {
		return 0
	}
	var total int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if v, ok := dp.Attributes.Value("reason"); ok && v.AsString() == reason {
			total += dp.Value
		}
	}
	return total
}

// bigTraces is one span with events: about 40 KiB of OTLP.
func bigTraces() ptrace.Traces {
	td := tracesOf(1)
	span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	for i := range 1000 {
		ev := span.Events().AppendEmpty()
		ev.SetName("gen_ai.content.completion.chunk")
		ev.SetTimestamp(pcommon.Timestamp(1_767_225_600_000_000_000 + i))
	}
	return td
}

// TestQueueBoundedInBytes: with the next consumer stuck, the queue holds at
// most its byte budget (the span being delivered included); the spans past
// it are dropped and counted as queue_bytes, however few spans that is.
func TestQueueBoundedInBytes(t *testing.T) {
	size := int64((&ptrace.ProtoMarshaler{}).TracesSize(bigTraces()))
	budget := 10*size + size/2
	sink := &blockingSink{release: make(chan struct{})}
	q, tel := newTestQueue(t, sink, budget)
	for range 50 {
		q.Push(bigTraces())
		require.LessOrEqual(t, q.Bytes(), budget)
	}
	assert.Equal(t, 10*size, q.Bytes(), "ten spans fit the budget")
	assert.Equal(t, int64(40), droppedBy(t, tel, dropQueueBytes))
	assert.Zero(t, droppedBy(t, tel, dropQueueFull))

	close(sink.release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dropped, err := q.Shutdown(ctx, time.Minute)
	require.NoError(t, err)
	assert.Zero(t, dropped)
	assert.Equal(t, 10, sink.spans)
	assert.Zero(t, q.Bytes(), "delivered spans give their bytes back")
	assert.Equal(t, int64(10), sumOf(t, tel, "otelcol_receiver_accepted_spans"))
	assert.Equal(t, int64(40), sumOf(t, tel, "otelcol_receiver_refused_spans"))
}

// waitingSink holds every ConsumeTraces call until its context is done, as
// an exporter does that retries a backend that is down, and counts the
// calls it got.
type waitingSink struct {
	calls   chan struct{}
	honours bool          // returns when the context is cancelled
	release chan struct{} // else: returns when this is closed
}

func (s *waitingSink) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (s *waitingSink) ConsumeTraces(ctx context.Context, _ ptrace.Traces) error {
	s.calls <- struct{}{}
	if s.honours {
		<-ctx.Done()
		return ctx.Err()
	}
	<-s.release
	return nil
}

// newTestQueue is a queue of 1000 spans and maxBytes in front of next, with its telemetry.
func newTestQueue(t *testing.T, next consumer.Traces, maxBytes int64) (*Queue, *componenttest.Telemetry) {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	obs, err := receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID: component.NewID(metadata.Type), Transport: "http", ReceiverCreateSettings: set,
	})
	require.NoError(t, err)
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	require.NoError(t, err)
	return New(1000, maxBytes, "sse", next, obs, tb), tel
}

// TestShutdownIsBoundedByTheDrain: with a pipeline that cannot take the
// spans (its consumer waits as long as its context lets it), Shutdown with
// no deadline of its own returns once the drain time is over: the consumer's
// context is cancelled, the span it held is counted as the consumer's
// error, the queued ones as dropped at shutdown, and none is left uncounted.
// Before the drain was bounded, this Shutdown never returned.
func TestShutdownIsBoundedByTheDrain(t *testing.T) {
	sink := &waitingSink{calls: make(chan struct{}, 10), honours: true}
	q, tel := newTestQueue(t, sink, 1<<30)
	for range 5 {
		q.Push(tracesOf(2))
	}
	<-sink.calls // the first delivery is held
	done := make(chan struct{})
	var dropped int64
	var err error
	go func() {
		dropped, err = q.Shutdown(context.Background(), 50*time.Millisecond)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Shutdown did not return after its drain time")
	}
	require.NoError(t, err, "the drain running out is the configured bound, not an error")
	assert.Equal(t, int64(8), dropped, "the four spans sets still queued")
	assert.Equal(t, int64(8), droppedBy(t, tel, dropShutdown))
	assert.Equal(t, int64(2), droppedBy(t, tel, dropConsumerError), "the one the consumer gave back")
	assert.Zero(t, q.Bytes())
	assert.Empty(t, sink.calls, "nothing is delivered after the cancellation")
}

// TestShutdownDoesNotWaitForAConsumerThatIgnoresItsContext: a consumer that
// keeps its delivery after the cancellation costs Shutdown consumerGrace more,
// and an error that says so, not the collector's shutdown.
func TestShutdownDoesNotWaitForAConsumerThatIgnoresItsContext(t *testing.T) {
	sink := &waitingSink{calls: make(chan struct{}, 10), release: make(chan struct{})}
	defer close(sink.release)
	q, _ := newTestQueue(t, sink, 1<<30)
	q.Push(tracesOf(1))
	q.Push(tracesOf(1))
	<-sink.calls
	start := time.Now()
	_, err := q.Shutdown(context.Background(), 10*time.Millisecond)
	require.ErrorIs(t, err, errConsumerStuck)
	assert.Less(t, time.Since(start), 20*time.Second)
}

// TestShutdownReportsTheCallersDeadline: a ctx that runs out before the drain
// does is the caller's error, and the drain stops there.
func TestShutdownReportsTheCallersDeadline(t *testing.T) {
	sink := &waitingSink{calls: make(chan struct{}, 10), honours: true}
	q, tel := newTestQueue(t, sink, 1<<30)
	q.Push(tracesOf(1))
	q.Push(tracesOf(3))
	<-sink.calls
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	dropped, err := q.Shutdown(ctx, time.Hour)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, int64(3), dropped)
	assert.Equal(t, int64(3), droppedBy(t, tel, dropShutdown))
}

// TestShutdownWithNoDrainDropsTheQueueAtOnce: queue_drain_timeout 0.
func TestShutdownWithNoDrainDropsTheQueueAtOnce(t *testing.T) {
	sink := &waitingSink{calls: make(chan struct{}, 10), honours: true}
	q, _ := newTestQueue(t, sink, 1<<30)
	q.Push(tracesOf(1))
	q.Push(tracesOf(1))
	<-sink.calls
	dropped, err := q.Shutdown(context.Background(), 0)
	require.NoError(t, err)
	assert.Equal(t, int64(1), dropped)
}

package hedge

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/processor/stallprocessor"
)

// toPtrace converts SDK spans to pdata, as an OTLP exporter would.
func toPtrace(stubs tracetest.SpanStubs) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(semconv.AttrServiceName, "hedge-test")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(scopeName)
	for _, s := range stubs {
		span := ss.Spans().AppendEmpty()
		span.SetTraceID(pcommon.TraceID(s.SpanContext.TraceID()))
		span.SetSpanID(pcommon.SpanID(s.SpanContext.SpanID()))
		if s.Parent.HasSpanID() {
			span.SetParentSpanID(pcommon.SpanID(s.Parent.SpanID()))
		}
		span.SetName(s.Name)
		span.SetKind(map[trace.SpanKind]ptrace.SpanKind{
			trace.SpanKindInternal: ptrace.SpanKindInternal, trace.SpanKindClient: ptrace.SpanKindClient,
		}[s.SpanKind])
		span.SetStartTimestamp(pcommon.NewTimestampFromTime(s.StartTime))
		span.SetEndTimestamp(pcommon.NewTimestampFromTime(s.EndTime))
		putAttributes(span.Attributes(), s.Attributes)
		for _, e := range s.Events {
			ev := span.Events().AppendEmpty()
			ev.SetName(e.Name)
			ev.SetTimestamp(pcommon.NewTimestampFromTime(e.Time))
			putAttributes(ev.Attributes(), e.Attributes)
		}
		if s.Status.Code == codes.Error {
			span.Status().SetCode(ptrace.StatusCodeError)
			span.Status().SetMessage(s.Status.Description)
		}
	}
	return td
}

func putAttributes(m pcommon.Map, kvs []attribute.KeyValue) {
	for _, kv := range kvs {
		k := string(kv.Key)
		switch kv.Value.Type() {
		case attribute.BOOL:
			m.PutBool(k, kv.Value.AsBool())
		case attribute.INT64:
			m.PutInt(k, kv.Value.AsInt64())
		case attribute.FLOAT64:
			m.PutDouble(k, kv.Value.AsFloat64())
		case attribute.STRINGSLICE:
			s := m.PutEmptySlice(k)
			for _, v := range kv.Value.AsStringSlice() {
				s.AppendEmpty().SetStr(v)
			}
		default:
			m.PutStr(k, kv.Value.String())
		}
	}
}

func spanNamed(t *testing.T, td ptrace.Traces, attempt int64) ptrace.Span {
	t.Helper()
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := range spans.Len() {
		if v, ok := spans.At(i).Attributes().Get(semconv.AttrHedgeAttempt); ok && v.Int() == attempt {
			return spans.At(i)
		}
	}
	t.Fatalf("no span of attempt %d", attempt)
	return ptrace.Span{}
}

func attr(t *testing.T, s ptrace.Span, key string) pcommon.Value {
	t.Helper()
	v, ok := s.Attributes().Get(key)
	require.True(t, ok, "span %q lacks %s", s.Name(), key)
	return v
}

// TestTelemetryThroughStallProcessor runs a hedged call, exports its spans
// and feeds them to the stall processor: the loser is flagged, the winner
// gets its stream figures, with no processor configuration.
func TestTelemetryThroughStallProcessor(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()

	clock := clockwork.NewFakeClockAt(time.Unix(1_700_000_000, 0))
	a, b := newPipeSource("a"), newPipeSource("b")
	h, err := New([]Source{a, b}, Delay(100*time.Millisecond), withClock(clock), TracerProvider(tp), RecordKeepalives())
	require.NoError(t, err)
	c := consume(t, h, hello)
	recv(t, a.opened)
	blockUntil(t, clock, 1)
	clock.Advance(100 * time.Millisecond)
	pb := recv(t, b.opened)
	clock.Advance(50 * time.Millisecond)
	pb.events <- text("one ")
	c.next(t)
	clock.Advance(10 * time.Millisecond)
	pb.events <- text("two ")
	c.next(t)
	pb.events <- Event{Type: EventKeepalive}
	clock.Advance(3 * time.Second) // a stall, filled with a keepalive
	pb.events <- text("three")
	c.next(t)
	pb.events <- Event{Type: EventDone, Model: "b-2025", Usage: Usage{InputTokens: 7, OutputTokens: 3}, FinishReason: "stop"}
	require.NoError(t, c.end(t))

	stubs := exp.GetSpans()
	require.Len(t, stubs, 3)
	td := toPtrace(stubs)
	loser, winner := spanNamed(t, td, 0), spanNamed(t, td, 1)
	assert.Equal(t, ptrace.SpanKindClient, winner.Kind())
	assert.Equal(t, "chat b-model", winner.Name())
	assert.Equal(t, attr(t, loser, semconv.AttrHedgeGroupID).Str(), attr(t, winner, semconv.AttrHedgeGroupID).Str())
	_, hasTrigger := loser.Attributes().Get(semconv.AttrHedgeTrigger)
	assert.False(t, hasTrigger, "no trigger on the primary")
	assert.Equal(t, "ttft", attr(t, winner, semconv.AttrHedgeTrigger).Str())
	assert.Equal(t, "loser", attr(t, loser, semconv.AttrHedgeOutcome).Str())
	assert.Equal(t, "winner", attr(t, winner, semconv.AttrHedgeOutcome).Str())
	assert.Equal(t, "b-2025", attr(t, winner, semconv.AttrResponseModel).Str())
	assert.Equal(t, int64(3), attr(t, winner, semconv.AttrUsageOutputTokens).Int())
	assert.Equal(t, "openai", attr(t, winner, semconv.AttrProviderName).Str())
	assert.Equal(t, "chat", attr(t, winner, semconv.AttrOperationName).Str())
	assert.Equal(t, 4, winner.Events().Len(), "three chunks and a keepalive")
	assert.Equal(t, semconv.ChunkKindText, func() string {
		v, _ := winner.Events().At(0).Attributes().Get(semconv.AttrChunkKind)
		return v.Str()
	}())
	assert.Equal(t, ptrace.StatusCodeUnset, loser.Status().Code(), "losing is not an error")
	assert.Equal(t, 150*time.Millisecond, loser.EndTimestamp().AsTime().Sub(loser.StartTimestamp().AsTime()),
		"the loser's span ends when it is dropped, at commit")
	// The call span is the parent of both and carries no chunk and no hedge
	// attribute, so that it is never counted as one more streaming call.
	for _, s := range stubs {
		if s.SpanKind == trace.SpanKindInternal {
			assert.Empty(t, s.Events)
			assert.Equal(t, s.SpanContext.SpanID(), stubs[0].Parent.SpanID())
		}
	}

	factory := stallprocessor.NewFactory()
	sink := new(consumertest.TracesSink)
	proc, err := factory.CreateTraces(context.Background(), processortest.NewNopSettings(factory.Type()), factory.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, proc.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, proc.ConsumeTraces(context.Background(), td))
	require.NoError(t, proc.Shutdown(context.Background()))
	require.Len(t, sink.AllTraces(), 1)
	out := sink.AllTraces()[0]
	loser, winner = spanNamed(t, out, 0), spanNamed(t, out, 1)

	assert.True(t, attr(t, loser, semconv.AttrHedgeLoser).Bool())
	_, flagged := winner.Attributes().Get(semconv.AttrHedgeLoser)
	assert.False(t, flagged)
	assert.Equal(t, int64(3), attr(t, winner, semconv.AttrChunkCount).Int())
	assert.InDelta(t, 50, attr(t, winner, semconv.AttrTTFTMs).Double(), 1e-9)
	assert.InDelta(t, 3010, attr(t, winner, semconv.AttrGenerationMs).Double(), 1e-9)
	assert.Equal(t, int64(1), attr(t, winner, semconv.AttrStallCount).Int())
	assert.InDelta(t, 3000, attr(t, winner, semconv.AttrStallMs).Double(), 1e-9, "the keepalive did not break the stall")
	assert.InDelta(t, 10, attr(t, winner, semconv.AttrActiveGenerationMs).Double(), 1e-9)
}

func TestTelemetryOfAStalledCall(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
	clock := clockwork.NewFakeClock()
	a := newPipeSource("a")
	h, err := New([]Source{a}, Delay(time.Hour), StallTimeout(time.Second), withClock(clock), TracerProvider(tp))
	require.NoError(t, err)
	c := consume(t, h, hello)
	pa := recv(t, a.opened)
	pa.events <- text("x")
	c.next(t)
	blockUntil(t, clock, 1)
	clock.Advance(time.Second)
	var stall *StallError
	require.ErrorAs(t, c.end(t), &stall)

	td := toPtrace(exp.GetSpans())
	attempt := spanNamed(t, td, 0)
	// The stalled stream is what the caller got: it stands for the call, so
	// the stall is counted once, with its error.
	assert.Equal(t, "winner", attr(t, attempt, semconv.AttrHedgeOutcome).Str())
	assert.Equal(t, "stall", attr(t, attempt, semconv.AttrErrorType).Str())
	assert.Equal(t, ptrace.StatusCodeError, attempt.Status().Code())
	assert.Equal(t, "stall", attempt.Status().Message())
	assert.Equal(t, 1, attempt.Events().Len())
	for _, s := range exp.GetSpans() {
		assert.Equal(t, codes.Error, s.Status.Code, s.Name)
	}
}

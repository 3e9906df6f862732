package stallprocessor

import (
	"context"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

// fuzzEventNames are the event kinds a fuzzed span is made of: both chunk
// names, a keepalive, a stale stall event and an unrelated event.
var fuzzEventNames = []string{semconv.EventChunk, semconv.EventChunkLegacy, semconv.EventKeepalive, semconv.EventStall, "gen_ai.choice"}

const fuzzEventSize = 9 // one byte of kind, eight of timestamp

// fuzzSpans decodes data into two spans: each event is a kind byte and a raw
// little-endian uint64 timestamp, so zero, duplicate, unsorted, pre-start and
// out-of-range times all occur.
func fuzzSpans(data []byte, start uint64, outputTokens int64) ptrace.Traces {
	td, spans := newTraces()
	for range 2 {
		span := spans.AppendEmpty()
		span.SetStartTimestamp(pcommon.Timestamp(start))
		span.Attributes().PutInt(semconv.AttrUsageOutputTokens, outputTokens)
	}
	for i := 0; i+fuzzEventSize <= len(data); i += fuzzEventSize {
		span := spans.At((i / fuzzEventSize) % 2)
		ev := span.Events().AppendEmpty()
		ev.SetName(fuzzEventNames[int(data[i])%len(fuzzEventNames)])
		ev.SetTimestamp(pcommon.Timestamp(binary.LittleEndian.Uint64(data[i+1:])))
	}
	return td
}

func fuzzSeed(kind byte, start uint64, offsetsMs ...int64) []byte {
	var out []byte
	for _, off := range offsetsMs {
		out = append(out, kind)
		out = binary.LittleEndian.AppendUint64(out, uint64(int64(start)+off*ms))
	}
	return out
}

func FuzzStallProcessor(f *testing.F) {
	start := uint64(testStart)
	f.Add(fuzzSeed(0, start, 100, 150, 200, 3200, 3250, 9250, 9300, 9350), start, int64(100), uint16(2000), uint8(32))
	f.Add(fuzzSeed(1, start, 0, 5000, 10000, 10050), start, int64(4), uint16(2000), uint8(0))
	f.Add(fuzzSeed(0, start, 300, -20, 300, 0, 9000), uint64(0), int64(0), uint16(1), uint8(1))
	f.Add(append(fuzzSeed(2, start, 1000, 2000), fuzzSeed(3, start, 50)...), start, int64(-5), uint16(500), uint8(3))
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 1, 0, 0, 0, 0, 0, 0, 0x80}, uint64(math.MaxUint64), int64(math.MaxInt64), uint16(65535), uint8(255))

	f.Fuzz(func(t *testing.T, data []byte, start uint64, outputTokens int64, thresholdMs uint16, maxStallEvents uint8) {
		cfg := createDefaultConfig().(*Config)
		cfg.StallThreshold = time.Duration(max(thresholdMs, 1)) * time.Millisecond
		cfg.MaxStallEvents = int(maxStallEvents)

		td := fuzzSpans(data, start, outputTokens)
		chunkCounts := countValidChunks(td)
		sink := new(consumertest.TracesSink)
		proc, err := NewFactory().CreateTraces(context.Background(), newTestSettings(t), cfg, sink)
		require.NoError(t, err)
		require.NoError(t, proc.ConsumeTraces(context.Background(), td))
		require.Len(t, sink.AllTraces(), 1)
		once := sink.AllTraces()[0]
		require.Equal(t, 2, once.SpanCount())

		spans := firstScope(once)
		for i := 0; i < spans.Len(); i++ {
			checkInvariants(t, spans.At(i), chunkCounts[i], cfg.MaxStallEvents)
		}

		// Idempotency: a second pass gives the identical span.
		want := ptrace.NewTraces()
		once.CopyTo(want)
		require.NoError(t, proc.ConsumeTraces(context.Background(), once))
		assertSameBytes(t, want, sink.AllTraces()[1])
	})
}

func firstScope(td ptrace.Traces) ptrace.SpanSlice {
	return td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
}

func countValidChunks(td ptrace.Traces) []int64 {
	spans := firstScope(td)
	out := make([]int64, spans.Len())
	for i := 0; i < spans.Len(); i++ {
		for j := 0; j < spans.At(i).Events().Len(); j++ {
			ev := spans.At(i).Events().At(j)
			isChunk := ev.Name() == semconv.EventChunk || ev.Name() == semconv.EventChunkLegacy
			if isChunk && ev.Timestamp() != 0 && ev.Timestamp() <= math.MaxInt64 {
				out[i]++
			}
		}
	}
	return out
}

func checkInvariants(t *testing.T, span ptrace.Span, chunks int64, maxStallEvents int) {
	attrs := span.Attributes()
	n, ok := attrs.Get(semconv.AttrChunkCount)
	if chunks == 0 {
		assert.False(t, ok, "a span without chunks gets no figures")
		return
	}
	require.True(t, ok)
	require.Equal(t, chunks, n.Int())
	if ttft, ok := attrs.Get(semconv.AttrTTFTMs); ok {
		assert.GreaterOrEqual(t, ttft.Double(), 0.0)
	}
	gen, ok := attrs.Get(semconv.AttrGenerationMs)
	if chunks < 2 {
		assert.False(t, ok, "interval figures need two chunks")
		return
	}
	require.True(t, ok)
	stall := attr(t, attrs, semconv.AttrStallMs).Double()
	active := attr(t, attrs, semconv.AttrActiveGenerationMs).Double()
	maxStall := attr(t, attrs, semconv.AttrMaxStallMs).Double()
	stallCount := attr(t, attrs, semconv.AttrStallCount).Int()
	assert.GreaterOrEqual(t, active, 0.0)
	assert.InDelta(t, gen.Double()-stall, active, 1e-9*max(1, gen.Double()))
	assert.LessOrEqual(t, stallCount, chunks-1)
	assert.LessOrEqual(t, maxStall, stall)
	assert.GreaterOrEqual(t, maxStall, 0.0)

	events := int64(len(stallEvents(span)))
	assert.LessOrEqual(t, events, int64(maxStallEvents))
	dropped := int64(0)
	if v, ok := attrs.Get(semconv.AttrStallEventsDropped); ok {
		dropped = v.Int()
	}
	assert.Equal(t, stallCount, events+dropped)
	if tps, ok := attrs.Get(semconv.AttrActiveTPS); ok {
		assert.Greater(t, tps.Double(), 0.0)
	}
}

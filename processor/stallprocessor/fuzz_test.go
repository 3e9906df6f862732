// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallprocessor

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
)

// fuzzEventNames are the event kinds a fuzzed span is made of: both chunk
// names, a keepalive, a stale stall event and an unrelated event.
var fuzzEventNames = []string{semconv.EventChunk, semconv.EventChunkLegacy, semconv.EventKeepalive, semconv.EventStall, "gen_ai.choice"}

// fuzzChunkKinds are the llm.stream.chunk.kind values a fuzzed event may
// carry: none, the three kinds, and one no emitter writes.
var fuzzChunkKinds = []string{"", semconv.ChunkKindText, semconv.ChunkKindReasoning, semconv.ChunkKindToolCall, "thinking"}

const fuzzEventSize = 9 // one byte of kind, eight of timestamp

// fuzzSpans decodes data into two spans: each event is a kind byte and a raw
// little-endian uint64 timestamp, so zero, duplicate, unsorted, pre-start and
// out-of-range times all occur. The kind byte chooses the event name (modulo
// the names) and its llm.stream.chunk.kind (the quotient, modulo the kinds).
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
		if kind := fuzzChunkKinds[int(data[i])/len(fuzzEventNames)%len(fuzzChunkKinds)]; kind != "" {
			ev.Attributes().PutStr(semconv.AttrChunkKind, kind)
		}
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

// fuzzAttrNames are the attributes a fuzzed span may carry before the
// processor: every figure, and attributes that are not figures but look
// alike or sit next to them.
var fuzzAttrNames = append(figures.AttributeNames(),
	"llm.stream.oversized_frames", semconv.AttrTimeToFirstChunk, semconv.AttrHedgeOutcome, semconv.AttrUsageOutputTokens)

const fuzzAttrSize = 10 // one byte of name, one of type, eight of value

// forgeAttributes puts attributes decoded from data on the two spans of td,
// alternately: any figure, of any type and value, as a client could send.
func forgeAttributes(td ptrace.Traces, data []byte) {
	spans := firstScope(td)
	for i := 0; i+fuzzAttrSize <= len(data); i += fuzzAttrSize {
		attrs := spans.At((i / fuzzAttrSize) % 2).Attributes()
		name := fuzzAttrNames[int(data[i])%len(fuzzAttrNames)]
		bits := binary.LittleEndian.Uint64(data[i+2:])
		switch data[i+1] % 4 {
		case 0:
			attrs.PutInt(name, int64(bits))
		case 1:
			attrs.PutDouble(name, math.Float64frombits(bits))
		case 2:
			// Small values, so that consistent sets occur too.
			attrs.PutDouble(name, float64(bits%20000))
		default:
			attrs.PutBool(name, bits&1 == 1)
		}
	}
}

// forgedSeed encodes attributes for forgeAttributes: pairs of a name and a
// value; an int64 value is written as an int, a float64 as a double.
func forgedSeed(kv ...any) []byte {
	var out []byte
	for i := 0; i+1 < len(kv); i += 2 {
		idx := slices.Index(fuzzAttrNames, kv[i].(string))
		switch v := kv[i+1].(type) {
		case int:
			out = append(out, byte(idx), 0)
			out = binary.LittleEndian.AppendUint64(out, uint64(v))
		case float64:
			out = append(out, byte(idx), 1)
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v))
		case bool:
			out = append(out, byte(idx), 3, 1, 0, 0, 0, 0, 0, 0, 0)
		}
	}
	return out
}

func FuzzStallProcessor(f *testing.F) {
	start := uint64(testStart)
	f.Add(fuzzSeed(0, start, 100, 150, 200, 3200, 3250, 9250, 9300, 9350), start, int64(100), uint16(2000), uint8(32), []byte(nil))
	f.Add(fuzzSeed(1, start, 0, 5000, 10000, 10050), start, int64(4), uint16(2000), uint8(0), []byte(nil))
	f.Add(fuzzSeed(0, start, 300, -20, 300, 0, 9000), uint64(0), int64(0), uint16(1), uint8(1), []byte(nil))
	f.Add(append(fuzzSeed(2, start, 1000, 2000), fuzzSeed(3, start, 50)...), start, int64(-5), uint16(500), uint8(3), []byte(nil))
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 1, 0, 0, 0, 0, 0, 0, 0x80}, uint64(math.MaxUint64), int64(math.MaxInt64), uint16(65535), uint8(255), []byte(nil))
	// Implausible chunk times: long before the start, and two hours long.
	f.Add(append(fuzzSeed(0, start, -5000, 100), fuzzSeed(1, start, 7_200_000)...), start, int64(3), uint16(2000), uint8(32), []byte(nil))
	// One chunk event and forged stall figures on the first span; on the
	// second (no chunk), forged stall figures without a chunk count.
	f.Add(fuzzSeed(0, start, 850), start, int64(40), uint16(2000), uint8(32), forgedSeed(
		semconv.AttrStallCount, 7, semconv.AttrStallCount, 3, semconv.AttrStallMs, 50000.0, semconv.AttrStallMs, 90000.0,
		semconv.AttrActiveTPS, 9999.0, "llm.stream.oversized_frames", 1))
	// A consistent set carried by the span without chunks (the second).
	f.Add(fuzzSeed(0, start, 100), start, int64(0), uint16(2000), uint8(32), forgedSeed(
		semconv.AttrHedgeOutcome, 1, semconv.AttrChunkCount, 3,
		semconv.AttrHedgeOutcome, 1, semconv.AttrGenerationMs, 100.0,
		semconv.AttrHedgeOutcome, 1, semconv.AttrStallThresholdMs, 2000.0,
		semconv.AttrHedgeOutcome, 1, semconv.AttrStallMs, 0.0,
		semconv.AttrHedgeOutcome, 1, semconv.AttrStallCount, 0,
		semconv.AttrHedgeOutcome, 1, semconv.AttrMaxStallMs, 0.0,
		semconv.AttrHedgeOutcome, 1, semconv.AttrActiveGenerationMs, 100.0,
		semconv.AttrHedgeOutcome, 1, semconv.AttrBurst, true))

	// Reasoning chunks (kind byte 10), then answer chunks (5), with a stall
	// inside the reasoning; and reasoning after the answer began.
	f.Add(append(fuzzSeed(10, start, 200, 250, 3000, 3050), fuzzSeed(5, start, 3100, 3150, 3200)...), start, int64(20), uint16(2000), uint8(32), []byte(nil))
	f.Add(append(fuzzSeed(15, start, 100, 150), fuzzSeed(10, start, 200, 250)...), start, int64(5), uint16(2000), uint8(32), []byte(nil))
	// Forged reasoning figures on a span without chunks.
	f.Add(fuzzSeed(10, start, 100), start, int64(0), uint16(2000), uint8(32), forgedSeed(
		semconv.AttrHedgeOutcome, 1, semconv.AttrChunkCount, 1,
		semconv.AttrHedgeOutcome, 1, semconv.AttrTimeToFirstAnswerMs, 100.0,
		semconv.AttrHedgeOutcome, 1, semconv.AttrReasoningChunkCount, 1))

	f.Fuzz(func(t *testing.T, data []byte, start uint64, outputTokens int64, thresholdMs uint16, maxStallEvents uint8, forged []byte) {
		cfg := createDefaultConfig().(*Config)
		cfg.StallThreshold = time.Duration(max(thresholdMs, 1)) * time.Millisecond
		cfg.MaxStallEvents = int(maxStallEvents)

		td := fuzzSpans(data, start, outputTokens)
		forgeAttributes(td, forged)
		input := ptrace.NewTraces()
		td.CopyTo(input)
		chunkCounts := countValidChunks(td)
		wantReasoning := make([]figures.Reasoning, 2)
		for i := range wantReasoning {
			wantReasoning[i] = referenceReasoning(firstScope(td).At(i))
		}
		sink := new(consumertest.TracesSink)
		proc, err := NewFactory().CreateTraces(context.Background(), newTestSettings(t), cfg, sink)
		require.NoError(t, err)
		require.NoError(t, proc.ConsumeTraces(context.Background(), td))
		require.Len(t, sink.AllTraces(), 1)
		once := sink.AllTraces()[0]
		require.Equal(t, 2, once.SpanCount())

		spans, inSpans := firstScope(once), firstScope(input)
		for i := 0; i < spans.Len(); i++ {
			checkInvariants(t, spans.At(i), chunkCounts[i], cfg.MaxStallEvents)
			if chunkCounts[i] > 0 {
				checkReasoning(t, spans.At(i), wantReasoning[i])
			}
			checkCarried(t, inSpans.At(i), spans.At(i), chunkCounts[i])
		}

		// Idempotency: a second pass gives the identical span.
		want := ptrace.NewTraces()
		once.CopyTo(want)
		require.NoError(t, proc.ConsumeTraces(context.Background(), once))
		assertSameBytes(t, want, sink.AllTraces()[1])
	})
}

// sameValue is Value.Equal, except that NaN equals NaN: an attribute that
// passed through untouched is the same value even when it is not a number.
func sameValue(a, b pcommon.Value) bool {
	if a.Type() == pcommon.ValueTypeDouble && b.Type() == pcommon.ValueTypeDouble && math.IsNaN(a.Double()) {
		return math.IsNaN(b.Double())
	}
	return a.Equal(b)
}

// checkCarried holds the rules on what a span brought: what is not a figure
// is never changed (gen_ai.response.time_to_first_chunk may only be added);
// a span without chunks either is unchanged or has lost every figure and
// stall event.
func checkCarried(t *testing.T, in, out ptrace.Span, chunks int64) {
	for k, v := range in.Attributes().All() {
		if figures.IsAttribute(k) {
			continue
		}
		got, ok := out.Attributes().Get(k)
		require.True(t, ok, "%s was removed", k)
		assert.True(t, sameValue(v, got), "%s changed from %v to %v", k, v.AsRaw(), got.AsRaw())
	}
	if chunks > 0 {
		return
	}
	var m ptrace.ProtoMarshaler
	inBytes, err := m.MarshalTraces(spanTraces(in))
	require.NoError(t, err)
	outBytes, err := m.MarshalTraces(spanTraces(out))
	require.NoError(t, err)
	if bytes.Equal(inBytes, outBytes) {
		return
	}
	for k := range out.Attributes().All() {
		assert.False(t, figures.IsAttribute(k), "an inconsistent set kept %s", k)
	}
	assert.Empty(t, stallEvents(out), "an inconsistent set kept its stall events")
}

func spanTraces(span ptrace.Span) ptrace.Traces {
	td, spans := newTraces()
	span.CopyTo(spans.AppendEmpty())
	return td
}

func firstScope(td ptrace.Traces) ptrace.SpanSlice {
	return td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
}

// countValidChunks counts the measurable chunk events of each span, 0 for a
// span whose chunk times are implausible (docs/contract.md section 3,
// reimplemented apart from internal/figures): a chunk time past MaxInt64,
// a chunk more than a second before a known start (the fuzzed spans have no
// end), or more than an hour from the start (or the first chunk, when
// earlier) to the last chunk. Such a span gets no figure.
func countValidChunks(td ptrace.Traces) []int64 {
	const skew, maxDuration = uint64(time.Second), uint64(time.Hour)
	spans := firstScope(td)
	out := make([]int64, spans.Len())
	for i := 0; i < spans.Len(); i++ {
		var first, last uint64
		implausible := false
		for j := 0; j < spans.At(i).Events().Len(); j++ {
			ev := spans.At(i).Events().At(j)
			ts := uint64(ev.Timestamp())
			if (ev.Name() != semconv.EventChunk && ev.Name() != semconv.EventChunkLegacy) || ts == 0 {
				continue
			}
			implausible = implausible || ts > math.MaxInt64
			if out[i] == 0 || ts < first {
				first = ts
			}
			last = max(last, ts)
			out[i]++
		}
		if start := uint64(spans.At(i).StartTimestamp()); out[i] > 0 && start != 0 && start <= math.MaxInt64 {
			implausible = implausible || (first < start && start-first > skew)
			first = min(first, start)
		}
		if implausible || last-first > maxDuration {
			out[i] = 0
		}
	}
	return out
}

func checkInvariants(t *testing.T, span ptrace.Span, chunks int64, maxStallEvents int) {
	attrs := span.Attributes()
	// Whatever came in, what goes out is a consistent figure set.
	r := figures.ReadAttributes(attrs)
	r.ReadStallEvents(span.Events())
	require.NoError(t, r.Check())
	if chunks == 0 {
		return // checkCarried holds the rest
	}
	n, ok := attrs.Get(semconv.AttrChunkCount)
	require.True(t, ok)
	require.Equal(t, chunks, n.Int())
	if ttft, ok := attrs.Get(semconv.AttrTTFTMs); ok {
		assert.GreaterOrEqual(t, ttft.Double(), 0.0)
	}
	gen, ok := attrs.Get(semconv.AttrGenerationMs)
	if chunks < 2 {
		assert.False(t, ok, "interval figures need two chunks")
		for _, absent := range []string{semconv.AttrBurst, semconv.AttrActiveTPS, semconv.AttrStallEventsDropped, semconv.AttrStallCount, semconv.AttrStallMs} {
			_, ok := attrs.Get(absent)
			assert.False(t, ok, "%s needs two chunks", absent)
		}
		assert.Empty(t, stallEvents(span))
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

// referenceReasoning computes the reasoning figures of a span straight from
// docs/contract.md section 4, apart from the processor's code path: over the
// measurable chunk events, a1 is the first chunk whose kind is not
// reasoning and r1 the first reasoning chunk.
func referenceReasoning(span ptrace.Span) figures.Reasoning {
	var r figures.Reasoning
	var a1, r1 uint64
	hasAnswer := false
	for _, ev := range span.Events().All() {
		ts := uint64(ev.Timestamp())
		if (ev.Name() != semconv.EventChunk && ev.Name() != semconv.EventChunkLegacy) || ts == 0 || ts > math.MaxInt64 {
			continue
		}
		kind, _ := ev.Attributes().Get(semconv.AttrChunkKind)
		if kind.Str() == semconv.ChunkKindReasoning {
			if r.ReasoningChunks == 0 || ts < r1 {
				r1 = ts
			}
			r.ReasoningChunks++
			continue
		}
		if !hasAnswer || ts < a1 {
			a1 = ts
		}
		hasAnswer = true
	}
	start := uint64(span.StartTimestamp())
	if hasAnswer && start != 0 && start <= math.MaxInt64 && a1 >= start {
		r.HasTTFA, r.TTFA = true, int64(a1-start)
	}
	if hasAnswer && r.ReasoningChunks > 0 && r1 <= a1 {
		r.HasReasoningTime, r.ReasoningTime = true, int64(a1-r1)
	}
	return r
}

// checkReasoning holds the reasoning figures of a span with chunks to the
// reference: each present exactly under its rule, with its value.
func checkReasoning(t *testing.T, span ptrace.Span, want figures.Reasoning) {
	attrs := span.Attributes()
	ttfa, ok := attrs.Get(semconv.AttrTimeToFirstAnswerMs)
	require.Equal(t, want.HasTTFA, ok, semconv.AttrTimeToFirstAnswerMs)
	if ok {
		assert.Equal(t, figures.Millis(want.TTFA), ttfa.Double())
	}
	reasoning, ok := attrs.Get(semconv.AttrReasoningMs)
	require.Equal(t, want.HasReasoningTime, ok, semconv.AttrReasoningMs)
	if ok {
		assert.Equal(t, figures.Millis(want.ReasoningTime), reasoning.Double())
	}
	count, ok := attrs.Get(semconv.AttrReasoningChunkCount)
	require.Equal(t, want.ReasoningChunks > 0, ok, semconv.AttrReasoningChunkCount)
	if ok {
		assert.Equal(t, int64(want.ReasoningChunks), count.Int())
	}
}

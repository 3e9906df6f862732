// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallprocessor

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/figures/figurestest"
	"github.com/streamstall/streamstall/internal/semconv"
)

const (
	benchSpans  = 1000
	benchChunks = 200
)

// benchStallAfter are the chunks (1-based) after which each benchmark span
// goes silent for 3 s; elsewhere chunks are 20 ms apart.
var benchStallAfter = [3]int{50, 100, 150}

// benchmarkInput is 1,000 streaming spans of 200 chunk events with three
// stalls each, every chunk event carrying llm.stream.chunk.kind as
// streamstall's proxy writes it.
func benchmarkInput() ptrace.Traces {
	td, spans := newTraces()
	for s := range benchSpans {
		span := spans.AppendEmpty()
		span.SetName("chat gpt-4o")
		span.SetKind(ptrace.SpanKindClient)
		start := testStart + int64(s)*ms
		span.SetStartTimestamp(pcommon.Timestamp(start))
		attrs := span.Attributes()
		attrs.PutStr(semconv.AttrOperationName, "chat")
		attrs.PutStr(semconv.AttrProviderName, "openai")
		attrs.PutStr(semconv.AttrRequestModel, "gpt-4o")
		attrs.PutStr(semconv.AttrResponseModel, "gpt-4o-2024-08-06")
		attrs.PutInt(semconv.AttrUsageOutputTokens, 260)
		at := start + 400*ms
		for c := 1; c <= benchChunks; c++ {
			ev := span.Events().AppendEmpty()
			ev.SetName(semconv.EventChunk)
			ev.SetTimestamp(pcommon.Timestamp(at))
			ev.Attributes().PutStr(semconv.AttrChunkKind, semconv.ChunkKindText)
			at += 20 * ms
			for _, after := range benchStallAfter {
				if c == after {
					at += 3000 * ms
				}
			}
		}
		span.SetEndTimestamp(pcommon.Timestamp(at))
	}
	return td
}

// baselineEnrich is the floor any implementation pays: it reads every event
// timestamp and chunk kind and writes the same attributes and stall events as
// the processor, reading the stalls at the positions the input is known to
// have them instead of looking for them.
func baselineEnrich(td ptrace.Traces, times []int64) []int64 {
	spans := firstScope(td)
	for i := 0; i < spans.Len(); i++ {
		span := spans.At(i)
		events := span.Events()
		times = times[:0]
		firstAnswer := int64(-1)
		for j := 0; j < events.Len(); j++ {
			ev := events.At(j)
			times = append(times, int64(ev.Timestamp()))
			if kind, ok := ev.Attributes().Get(semconv.AttrChunkKind); firstAnswer < 0 && (!ok || kind.Str() != semconv.ChunkKindReasoning) {
				firstAnswer = int64(ev.Timestamp())
			}
		}
		figurestest.WriteFloor(span, times, firstAnswer, benchStallAfter[:], defaultStallThreshold)
	}
	return times
}

// The baseline writes exactly what the processor writes, so the two
// benchmarks compare equal work.
func TestBaselineMatchesProcessor(t *testing.T) {
	want := benchmarkInput()
	baselineEnrich(want, nil)
	got := runProcessor(t, createDefaultConfig().(*Config), benchmarkInput())
	// The seal is the one thing the baseline does not write (its cost is
	// the processor's to pay).
	for _, span := range firstScope(got).All() {
		span.Attributes().Remove(semconv.AttrFiguresSeal)
	}
	assertSameBytes(t, want, got)
}

// freshCopy copies input outside the timer: the processor mutates its input,
// so every iteration needs its own. The copies are 200,000 events each: the
// collection that follows, and the collector paused while the clock runs,
// keep their garbage from being marked and swept on the timed path of either
// benchmark at random moments. Both benchmarks allocate the same (27 objects
// a span), so pausing the collector hides no difference between them.
func freshCopy(b *testing.B, input ptrace.Traces) ptrace.Traces {
	b.StopTimer()
	debug.SetGCPercent(gcPercent)
	td := ptrace.NewTraces()
	input.CopyTo(td)
	runtime.GC()
	debug.SetGCPercent(-1)
	b.StartTimer()
	return td
}

// gcPercent is the collector's setting outside the timed regions.
var gcPercent = debug.SetGCPercent(100)

// restoreGC turns the collector back on after a benchmark.
func restoreGC(b *testing.B) { b.Cleanup(func() { debug.SetGCPercent(gcPercent) }) }

func reportPerSpan(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchSpans), "ns/span")
}

func BenchmarkStallProcessor(b *testing.B) {
	restoreGC(b)
	proc, err := NewFactory().CreateTraces(context.Background(), newTestSettings(b), createDefaultConfig(), consumertest.NewNop())
	require.NoError(b, err)
	input := benchmarkInput()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		td := freshCopy(b, input)
		if err := proc.ConsumeTraces(ctx, td); err != nil {
			b.Fatal(err)
		}
	}
	reportPerSpan(b)
}

func BenchmarkStallBaseline(b *testing.B) {
	restoreGC(b)
	input := benchmarkInput()
	var times []int64
	b.ReportAllocs()
	for b.Loop() {
		td := freshCopy(b, input)
		times = baselineEnrich(td, times)
	}
	reportPerSpan(b)
}

// BenchmarkStallVsBaseline alternates the two on fresh copies in every
// iteration, so that both see the same interference from other processes on
// a shared machine, and reports their ratio.
func BenchmarkStallVsBaseline(b *testing.B) {
	restoreGC(b)
	proc, err := NewFactory().CreateTraces(context.Background(), newTestSettings(b), createDefaultConfig(), consumertest.NewNop())
	require.NoError(b, err)
	input := benchmarkInput()
	ctx := context.Background()
	var times []int64
	var procTime, baseTime time.Duration
	for b.Loop() {
		td := freshCopy(b, input)
		start := time.Now()
		if err := proc.ConsumeTraces(ctx, td); err != nil {
			b.Fatal(err)
		}
		procTime += time.Since(start)
		td = freshCopy(b, input)
		start = time.Now()
		times = baselineEnrich(td, times)
		baseTime += time.Since(start)
	}
	b.ReportMetric(float64(procTime.Nanoseconds())/float64(b.N*benchSpans), "processor-ns/span")
	b.ReportMetric(float64(baseTime.Nanoseconds())/float64(b.N*benchSpans), "baseline-ns/span")
	b.ReportMetric(float64(procTime)/float64(baseTime), "ratio")
}

// Allocations depend on the spans and the stalls written, never on the number
// of chunk events: a span of 2,000 chunks allocates what a span of 20 does.
func TestNoAllocationPerChunkEvent(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	sp, err := newStallProcessor(newTestSettings(t), createDefaultConfig().(*Config))
	require.NoError(t, err)
	assert.Nil(t, sp.conditions.chunkEvent, "the default config must not evaluate OTTL per event")

	allocsFor := func(chunks int) float64 {
		const runs = 20
		batches := make([]ptrace.Traces, runs+1) // AllocsPerRun adds a warm-up run
		for i := range batches {
			td, spans := newTraces()
			for range 10 {
				offsets := make([]int64, chunks)
				for c := range offsets {
					offsets[c] = 100 + int64(c)*20
					if c >= chunks/2 {
						offsets[c] += 3000 // one stall in the middle
					}
				}
				streamSpan(spans, offsets...)
			}
			batches[i] = td
		}
		next := 0
		return testing.AllocsPerRun(runs, func() {
			if _, err := sp.processTraces(context.Background(), batches[next]); err != nil {
				t.Fatal(err)
			}
			next++
		})
	}
	few, many := allocsFor(20), allocsFor(2000)
	t.Logf("allocations per batch of 10 spans: %v with 20 chunks per span, %v with 2000", few, many)
	assert.InDelta(t, few, many, 1, "allocations per batch: %v with 20 chunks per span, %v with 2000", few, many)
}

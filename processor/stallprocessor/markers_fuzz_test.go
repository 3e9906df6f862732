// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

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

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
)

// fuzzMarkerNames are the event kinds of a fuzzed marker span: both
// markers, a chunk (chunk evidence wins), a stale stall event and an
// unrelated event.
var fuzzMarkerNames = []string{semconv.EventVercelFirstChunk, semconv.EventVercelFinish, semconv.EventChunk, semconv.EventStall, "ai.toolCall"}

// fuzzMarkerSpans decodes data into two spans as fuzzSpans does, with the
// marker names.
func fuzzMarkerSpans(data []byte, start uint64) ptrace.Traces {
	td, spans := newTraces()
	for range 2 {
		spans.AppendEmpty().SetStartTimestamp(pcommon.Timestamp(start))
	}
	for i := 0; i+fuzzEventSize <= len(data); i += fuzzEventSize {
		ev := spans.At((i / fuzzEventSize) % 2).Events().AppendEmpty()
		ev.SetName(fuzzMarkerNames[int(data[i])%len(fuzzMarkerNames)])
		ev.SetTimestamp(pcommon.Timestamp(binary.LittleEndian.Uint64(data[i+1:])))
	}
	return td
}

// markerWant is what docs/contract.md sections 3 and 4 give a span with
// marker events, reimplemented apart from internal/figures.
type markerWant struct {
	evidence, implausible bool
	hasTTFT, hasGen       bool
	ttft, gen             uint64
}

func referenceMarkers(span ptrace.Span) (w markerWant, hasChunk bool) {
	var first, finish uint64
	hasFirst, hasFinish := false, false
	for _, ev := range span.Events().All() {
		ts := uint64(ev.Timestamp())
		if ts == 0 {
			continue
		}
		switch ev.Name() {
		case semconv.EventChunk:
			hasChunk = true
		case semconv.EventVercelFirstChunk:
			w.implausible = w.implausible || ts > math.MaxInt64
			if !hasFirst || ts < first {
				first, hasFirst = ts, true
			}
		case semconv.EventVercelFinish:
			w.implausible = w.implausible || ts > math.MaxInt64
			if !hasFinish || ts > finish {
				finish, hasFinish = ts, true
			}
		}
	}
	if !hasFirst && !w.implausible {
		return markerWant{}, hasChunk
	}
	w.evidence = true
	const skew, maxDuration = uint64(time.Second), uint64(time.Hour)
	last, from := first, first
	if hasFinish {
		w.implausible = w.implausible || finish < first
		last = max(last, finish)
	}
	if start := uint64(span.StartTimestamp()); start != 0 && start <= math.MaxInt64 {
		w.implausible = w.implausible || (first < start && start-first > skew)
		if first >= start {
			w.hasTTFT, w.ttft = true, first-start
		}
		from = min(from, start)
	}
	w.implausible = w.implausible || last-from > maxDuration
	if hasFinish && finish >= first {
		w.hasGen, w.gen = true, finish-first
	}
	return w, hasChunk
}

// FuzzStallProcessorMarkers sends spans of marker events, chunk events and
// forged figures through the processor: what comes out is consistent,
// marker spans get exactly the marker figure set of the reference, and a
// second pass changes nothing.
func FuzzStallProcessorMarkers(f *testing.F) {
	start := uint64(1_767_225_600_000_000_000)
	f.Add(append(fuzzSeed(0, start, 400), fuzzSeed(1, start, 5400)...), start, []byte(nil))
	f.Add(append(fuzzSeed(1, start, 400), fuzzSeed(0, start, 5400)...), start, []byte(nil))
	f.Add(append(fuzzSeed(0, start, -40), fuzzSeed(3, start, 900)...), start, forgedSeed(semconv.AttrStallMs, 900.0))
	f.Add(append(fuzzSeed(0, start, 400), fuzzSeed(2, start, 500, 600)...), uint64(0), []byte(nil))
	f.Add(append(fuzzSeed(0, start, 100), fuzzSeed(1, start, 3_600_001)...), start, []byte(nil))
	f.Add(fuzzSeed(1, start, 400), start, forgedSeed(semconv.AttrTTFTMs, 400.0, semconv.AttrEvidence, 1))
	f.Fuzz(func(t *testing.T, data []byte, start uint64, forged []byte) {
		td := fuzzMarkerSpans(data, start)
		forgeAttributes(td, forged)
		in := firstScope(td)
		wants := make([]markerWant, in.Len())
		hasChunks := make([]bool, in.Len())
		for i := range wants {
			wants[i], hasChunks[i] = referenceMarkers(in.At(i))
		}
		sink := new(consumertest.TracesSink)
		proc, err := NewFactory().CreateTraces(context.Background(), newTestSettings(t), createDefaultConfig(), sink)
		require.NoError(t, err)
		require.NoError(t, proc.ConsumeTraces(context.Background(), td))
		once := sink.AllTraces()[0]
		spans := firstScope(once)
		for i := 0; i < spans.Len(); i++ {
			span := spans.At(i)
			r := figures.ReadAttributes(span.Attributes())
			r.ReadStallEvents(span.Events())
			require.NoError(t, r.Check())
			if hasChunks[i] || !wants[i].evidence {
				continue // the chunk rules and the carried-figure rules hold
			}
			w := wants[i]
			if w.implausible {
				assert.False(t, r.Any(), "an implausible marker span kept figures")
				continue
			}
			require.True(t, r.Has(figures.IdxEvidence))
			assert.Empty(t, stallEvents(span))
			require.Equal(t, w.hasTTFT, r.Has(figures.IdxTTFTMs))
			if w.hasTTFT {
				assert.Equal(t, figures.Millis(int64(w.ttft)), r.Float(figures.IdxTTFTMs))
			}
			require.Equal(t, w.hasGen, r.Has(figures.IdxGenerationMs))
			if w.hasGen {
				assert.Equal(t, figures.Millis(int64(w.gen)), r.Float(figures.IdxGenerationMs))
			}
		}
		want := ptrace.NewTraces()
		once.CopyTo(want)
		require.NoError(t, proc.ConsumeTraces(context.Background(), once))
		assertSameBytes(t, want, sink.AllTraces()[1])
	})
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

const keepStart = int64(1_767_225_600_000_000_000)

type chunk struct {
	at   int64
	kind string
}

// randomStream draws a stream of up to maxChunks chunks: mostly short gaps,
// some long ones (a few of them in runs, trickles in a silence), zero
// gaps, and reasoning before or among the answer chunks.
func randomStream(rng *rand.Rand, maxChunks int) []chunk {
	n := 1 + rng.IntN(maxChunks)
	at := keepStart + rng.Int64N(int64(2*time.Second))
	reasoningUntil := -1
	if rng.IntN(2) == 0 {
		reasoningUntil = rng.IntN(n)
	}
	out := make([]chunk, n)
	for i := range out {
		switch p := rng.IntN(100); {
		case p < 5:
			at += int64(time.Second) + rng.Int64N(int64(5*time.Second))
		case p < 10:
			// no gap
		case p < 20:
			at += rng.Int64N(int64(300 * time.Millisecond))
		default:
			at += rng.Int64N(int64(30 * time.Millisecond))
		}
		kind := semconv.ChunkKindText
		switch {
		case i <= reasoningUntil:
			kind = semconv.ChunkKindReasoning
		case rng.IntN(20) == 0:
			kind = semconv.ChunkKindReasoning
		case rng.IntN(10) == 0:
			kind = semconv.ChunkKindToolCall
		}
		out[i] = chunk{at: at, kind: kind}
	}
	return out
}

// spanOf makes the span a receiver would emit: every chunk, or the chunks
// a keeper kept.
func spanOf(cs []chunk, k *Keeper) ptrace.Span {
	span := ptrace.NewSpan()
	span.SetStartTimestamp(pcommon.Timestamp(keepStart))
	span.SetEndTimestamp(pcommon.Timestamp(cs[len(cs)-1].at))
	if k == nil {
		for _, c := range cs {
			ev := span.Events().AppendEmpty()
			ev.SetName(semconv.EventChunk)
			ev.SetTimestamp(pcommon.Timestamp(c.at))
			ev.Attributes().PutStr(semconv.AttrChunkKind, c.kind)
		}
		return span
	}
	for _, c := range cs {
		k.Add(c.at, c.kind)
	}
	AppendChunkEvents(k, span.Events())
	PutElision(k, span.Attributes())
	return span
}

func readSpan(t *testing.T, span ptrace.Span) *Chunks {
	t.Helper()
	var c Chunks
	require.NoError(t, NewChunkReader(DefaultChunkEventsConfig()).Read(span, &c))
	return &c
}

// TestKeeperFiguresEqualTheFullStream is the property the elision rests on:
// for random streams, bounds and thresholds at least the gap the keeper
// kept, the figures of the kept events equal those of every chunk event.
// Below that gap, the threshold in force is the kept gap, and the figures
// are those of the full stream at it.
func TestKeeperFiguresEqualTheFullStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 2))
	keepGaps := []time.Duration{0, 10 * time.Millisecond, 100 * time.Millisecond, 2 * time.Second}
	elidedStreams, raised := 0, 0
	for iter := range 3000 {
		cs := randomStream(rng, 3000)
		maxEvents := 4 + rng.IntN(200)
		keepAbove := keepGaps[rng.IntN(len(keepGaps))]
		k := NewKeeper(maxEvents, keepAbove)
		kept := readSpan(t, spanOf(cs, k))
		full := readSpan(t, spanOf(cs, nil))

		require.LessOrEqual(t, len(kept.Times), maxEvents, "iteration %d", iter)
		require.Equal(t, full.Count(), kept.Count())
		require.Equal(t, int64(len(cs)), k.Total())
		if k.Elided() > 0 {
			elidedStreams++
			require.GreaterOrEqual(t, k.KeepGapsAbove(), keepAbove)
			if k.KeepGapsAbove() > keepAbove {
				raised++
			}
		}
		inForce := k.KeepGapsAbove().Nanoseconds()
		for _, threshold := range []int64{inForce, inForce + 1, 2 * inForce, inForce + rng.Int64N(int64(3*time.Second)), inForce / 2} {
			fk, rk := kept.Derive(threshold, nil)
			if k.Elided() > 0 {
				threshold = max(threshold, inForce)
			}
			ff, rf := full.Derive(threshold, nil)
			require.Equal(t, ff, fk, "iteration %d: %d chunks, %d kept, keep_gaps_above %v, threshold %v", iter, len(cs), len(kept.Times), k.KeepGapsAbove(), time.Duration(threshold))
			require.Equal(t, rf, rk, "iteration %d", iter)
		}
	}
	// The draw must exercise what it claims to.
	assert.Greater(t, elidedStreams, 1000)
	assert.Greater(t, raised, 50)
}

func TestKeeperBelowTheBoundKeepsEveryChunk(t *testing.T) {
	k := NewKeeper(8, time.Second)
	for i := range int64(8) {
		k.Add(keepStart+i, semconv.ChunkKindText)
	}
	assert.Len(t, k.Chunks(), 8)
	assert.Zero(t, k.Elided())
	span := ptrace.NewSpan()
	PutElision(k, span.Attributes())
	assert.Zero(t, span.Attributes().Len(), "a span with every chunk says nothing of elision")
}

func TestKeeperTwoMillionChunksStayBounded(t *testing.T) {
	k := NewKeeper(DefaultMaxChunkEvents, DefaultKeepGapsAbove)
	at := keepStart
	for i := range 2_000_000 {
		at += int64(time.Millisecond)
		if i%100_000 == 0 {
			at += int64(3 * time.Second)
		}
		k.Add(at, semconv.ChunkKindText)
		require.LessOrEqual(t, len(k.Chunks()), DefaultMaxChunkEvents)
	}
	// The first and last chunks and both chunks of the 19 long gaps.
	assert.Len(t, k.Chunks(), 2+2*19)
	assert.Equal(t, DefaultKeepGapsAbove, k.KeepGapsAbove())
	assert.Equal(t, int64(2_000_000-40), k.Elided())
}

func TestElisionCountsAreJudged(t *testing.T) {
	good := func() ptrace.Span {
		k := NewKeeper(4, time.Second)
		for i := range int64(10) {
			kind := semconv.ChunkKindText
			if i < 3 {
				kind = semconv.ChunkKindReasoning
			}
			k.Add(keepStart+i*int64(time.Millisecond), kind)
		}
		span := ptrace.NewSpan()
		span.SetStartTimestamp(pcommon.Timestamp(keepStart))
		AppendChunkEvents(k, span.Events())
		PutElision(k, span.Attributes())
		return span
	}
	reader := NewChunkReader(DefaultChunkEventsConfig())
	var c Chunks
	require.NoError(t, reader.Read(good(), &c))
	require.Equal(t, int64(10), c.Count())

	cases := map[string]func(ptrace.Span){
		"no keep_gaps_above_ms": func(s ptrace.Span) { s.Attributes().Remove(semconv.AttrChunkEventsKeepGapsAboveMs) },
		"keep_gaps_above_ms a string": func(s ptrace.Span) {
			s.Attributes().PutStr(semconv.AttrChunkEventsKeepGapsAboveMs, "1000")
		},
		"negative keep_gaps_above_ms": func(s ptrace.Span) { s.Attributes().PutDouble(semconv.AttrChunkEventsKeepGapsAboveMs, -1) },
		"elided before the first": func(s ptrace.Span) {
			s.Events().At(0).Attributes().PutInt(semconv.AttrChunkElided, 3)
		},
		"a negative count": func(s ptrace.Span) {
			s.Events().At(s.Events().Len()-1).Attributes().PutInt(semconv.AttrChunkElided, -3)
		},
		"a count past 2^40": func(s ptrace.Span) {
			s.Events().At(s.Events().Len()-1).Attributes().PutInt(semconv.AttrChunkElided, 1<<41)
		},
		"a double count": func(s ptrace.Span) {
			s.Events().At(s.Events().Len()-1).Attributes().PutDouble(semconv.AttrChunkElided, 3)
		},
		"more reasoning than elided": func(s ptrace.Span) {
			s.Events().At(s.Events().Len()-1).Attributes().PutInt(semconv.AttrChunkElidedReasoning, 1000)
		},
		"reasoning elided before the first reasoning chunk": func(s ptrace.Span) {
			last := s.Events().At(s.Events().Len() - 1)
			last.Attributes().PutInt(semconv.AttrChunkElided, 5)
			last.Attributes().PutInt(semconv.AttrChunkElidedReasoning, 5)
			s.Events().RemoveIf(func(ev ptrace.SpanEvent) bool {
				v, _ := ev.Attributes().Get(semconv.AttrChunkKind)
				return v.Str() == semconv.ChunkKindReasoning
			})
		},
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			span := good()
			spoil(span)
			assert.ErrorIs(t, reader.Read(span, &c), ErrImplausible)
		})
	}
}

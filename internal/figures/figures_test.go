// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ms = int64(1_000_000)

func millis(vs ...int64) []int64 {
	out := make([]int64, len(vs))
	for i, v := range vs {
		out[i] = v * ms
	}
	return out
}

// The worked examples of docs/contract.md section 4.
func TestDeriveSpecExamples(t *testing.T) {
	f := Derive(0, millis(100, 150, 200, 3200, 3250, 9250, 9300, 9350), 2000*ms, nil)
	assert.Equal(t, 8, f.ChunkCount)
	assert.True(t, f.HasTTFT)
	assert.Equal(t, 100.0, Millis(f.TTFT))
	assert.Equal(t, 9250.0, Millis(f.Generation))
	assert.Equal(t, 2, f.StallCount)
	assert.Equal(t, 9000.0, Millis(f.StallTotal))
	assert.Equal(t, 6000.0, Millis(f.MaxStall))
	assert.Equal(t, 250.0, Millis(f.Active()))
	assert.False(t, f.Burst)
	assert.Equal(t, []Stall{
		{AfterChunk: 3, At: 200 * ms, Duration: 3000 * ms, Gaps: 1},
		{AfterChunk: 5, At: 3250 * ms, Duration: 6000 * ms, Gaps: 1},
	}, f.Stalls)

	f = Derive(0, millis(0, 5000, 10000, 10050), 2000*ms, nil)
	assert.Equal(t, 1, f.StallCount)
	assert.Equal(t, 2, f.StallGaps)
	assert.Equal(t, 10000.0, Millis(f.StallTotal))
	assert.Equal(t, 50.0, Millis(f.Active()))
	assert.Equal(t, []Stall{{AfterChunk: 1, At: 0, Duration: 10000 * ms, Gaps: 2}}, f.Stalls)
}

func TestDeriveEdges(t *testing.T) {
	f := Derive(0, nil, 2000*ms, nil)
	assert.Equal(t, 0, f.ChunkCount)
	assert.False(t, f.HasTTFT)
	assert.False(t, f.HasGeneration())

	f = Derive(10*ms, millis(5), 2000*ms, nil)
	assert.Equal(t, 1, f.ChunkCount)
	assert.False(t, f.HasTTFT, "a chunk before the span start leaves TTFT unknown")
	assert.False(t, f.HasGeneration())

	// A gap equal to the threshold is not a stall (strictly greater).
	f = Derive(0, millis(0, 2000, 2001), 2000*ms, nil)
	assert.Equal(t, 0, f.StallCount)

	// Three chunks in the same millisecond: a burst.
	f = Derive(0, []int64{ms, ms + 10, ms + 20}, 2000*ms, nil)
	assert.True(t, f.Burst)
	_, ok := f.ActiveTPS(100)
	assert.False(t, ok)
}

func TestActiveTPS(t *testing.T) {
	f := Derive(0, millis(100, 600, 1100), 2000*ms, nil)
	tps, ok := f.ActiveTPS(11)
	require.True(t, ok)
	assert.InDelta(t, 10.0, tps, 1e-9) // 10 tokens over 1 s
	_, ok = f.ActiveTPS(1)
	assert.False(t, ok)
}

func TestPrepareChunkTimes(t *testing.T) {
	assert.Equal(t, []int64{1, 2, 3}, PrepareChunkTimes([]int64{3, 0, 1, 2, 0}))
	assert.Empty(t, PrepareChunkTimes([]int64{0, 0}))
}

func TestNanos(t *testing.T) {
	for _, ns := range []int64{0, 1, 999_999, 2000 * ms, 3_600_000 * ms, 86_400_000*ms + 1} {
		assert.Equal(t, ns, Nanos(Millis(ns)), "%d ns", ns)
	}
	assert.Equal(t, int64(math.MaxInt64), Nanos(1e300))
	assert.Equal(t, int64(math.MaxInt64), Nanos(math.Inf(1)))
	assert.Zero(t, Nanos(-5))
	assert.Zero(t, Nanos(math.NaN()))
}

func TestDeriveReusesBufferNoAllocs(t *testing.T) {
	buf := make([]Stall, 0, 8)
	ts := millis(0, 5000, 5001, 9000)
	allocs := testing.AllocsPerRun(100, func() {
		f := Derive(0, ts, 2000*ms, buf)
		buf = f.Stalls
	})
	assert.Zero(t, allocs)
}

func FuzzDerive(f *testing.F) {
	f.Add(int64(0), int64(2000), []byte{1, 2, 3, 200, 4})
	f.Add(int64(-5), int64(1), []byte{})
	f.Fuzz(func(t *testing.T, start, threshold int64, raw []byte) {
		if threshold <= 0 {
			threshold = 1
		}
		ts := make([]int64, 0, len(raw))
		var at int64
		for _, b := range raw {
			at += int64(b) * int64(b) * ms / 10 // uneven gaps, some huge
			ts = append(ts, at)
		}
		slices.Sort(ts)
		fg := Derive(start, ts, threshold, nil)
		require.Equal(t, len(ts), fg.ChunkCount)
		require.GreaterOrEqual(t, fg.Active(), int64(0))
		require.LessOrEqual(t, fg.StallCount, fg.StallGaps)
		if len(ts) > 0 {
			require.LessOrEqual(t, fg.StallGaps, len(ts)-1)
		}
		require.LessOrEqual(t, fg.MaxStall, fg.StallTotal)
		require.Len(t, fg.Stalls, fg.StallCount)
		var sum int64
		for _, s := range fg.Stalls {
			require.GreaterOrEqual(t, s.AfterChunk, 1)
			require.Less(t, s.AfterChunk, len(ts))
			sum += s.Duration
		}
		require.Equal(t, fg.StallTotal, sum)
	})
}

func TestDeriveReasoning(t *testing.T) {
	kinds := func(chunks ...any) Kinds {
		var k Kinds
		for i := 0; i < len(chunks); i += 2 {
			k.Add(chunks[i].(int64)*ms, chunks[i+1].(bool))
		}
		return k
	}
	const R, A = true, false
	tests := []struct {
		name  string
		start int64
		k     Kinds
		want  Reasoning
	}{
		{name: "no chunk", k: kinds(), want: Reasoning{}},
		{name: "answer only", k: kinds(int64(100), A, int64(150), A), want: Reasoning{HasTTFA: true, TTFA: 100 * ms}},
		{
			name: "reasoning, then the answer", k: kinds(int64(100), R, int64(200), R, int64(900), A, int64(950), A),
			want: Reasoning{HasTTFA: true, TTFA: 900 * ms, HasReasoningTime: true, ReasoningTime: 800 * ms, ReasoningChunks: 2},
		},
		{
			name: "out of order", k: kinds(int64(950), A, int64(200), R, int64(900), A, int64(100), R),
			want: Reasoning{HasTTFA: true, TTFA: 900 * ms, HasReasoningTime: true, ReasoningTime: 800 * ms, ReasoningChunks: 2},
		},
		{name: "reasoning only", k: kinds(int64(100), R, int64(200), R), want: Reasoning{ReasoningChunks: 2}},
		{
			name: "reasoning after the answer started", k: kinds(int64(100), A, int64(200), R),
			want: Reasoning{HasTTFA: true, TTFA: 100 * ms, ReasoningChunks: 1},
		},
		{
			name: "reasoning and answer at the same instant", k: kinds(int64(300), R, int64(300), A),
			want: Reasoning{HasTTFA: true, TTFA: 300 * ms, HasReasoningTime: true, ReasoningChunks: 1},
		},
		{
			name: "answer before the span start", start: 500 * ms, k: kinds(int64(100), R, int64(400), A),
			want: Reasoning{HasReasoningTime: true, ReasoningTime: 300 * ms, ReasoningChunks: 1},
		},
		{
			name: "reasoning before the span start", start: 500 * ms, k: kinds(int64(100), R, int64(700), A),
			want: Reasoning{HasTTFA: true, TTFA: 200 * ms, HasReasoningTime: true, ReasoningTime: 600 * ms, ReasoningChunks: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, DeriveReasoning(tt.start, tt.k))
		})
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package figures is the one definition of streamstall's stream figures
// (docs/contract.md section 4): TTFT, wall-clock and active generation time, stall time,
// stall count, stall positions, active tokens per second, and the time to the
// first answer chunk past the reasoning. Everything that needs a figure (the
// stall processor, the metrics connector, the hedging client, the demo)
// computes it here, from timestamps and chunk kinds alone.
package figures

import (
	"math"
	"slices"
)

// Burst detection: chunks spaced less than this on average were delivered in
// one buffered burst, so their pacing says nothing about generation.
const burstGapNanos = int64(1_000_000)

// Stall is one stall: a maximal run of consecutive gaps longer than the
// threshold. A single chunk trickling in during a silence does not end it.
type Stall struct {
	// AfterChunk is the 1-based index of the chunk that precedes the silence.
	AfterChunk int
	// At is the timestamp of that chunk (unix nanoseconds).
	At int64
	// Duration is the sum of the run's gaps, in nanoseconds.
	Duration int64
	// Gaps is the number of stall gaps in the run.
	Gaps int
}

// Figures are the derived figures of one stream. Durations are nanoseconds;
// the Ms methods give the milliseconds the contract writes.
type Figures struct {
	ChunkCount int
	// HasTTFT is false when there is no chunk or the first chunk precedes the
	// span start (clock skew): TTFT is then unknown, not zero.
	HasTTFT bool
	TTFT    int64
	// Generation is the wall clock from first to last chunk; it is never
	// reduced by the stalls.
	Generation int64
	Threshold  int64
	StallTotal int64
	StallCount int
	MaxStall   int64
	// StallGaps counts the individual gaps longer than the threshold.
	StallGaps int
	Burst     bool
	// Stalls lists every stall in stream order.
	Stalls []Stall
	// Cut is the silence a stall cut ended the stream in (docs/contract.md
	// section 4), 0 when none did: from the last chunk to the span end, a
	// lower bound of a gap whose end never came. It is the last stall gap,
	// counted in StallTotal, StallGaps, the last stall and Generation, which
	// runs to the cut.
	Cut int64
}

// HasGeneration reports whether the interval figures exist (two chunks or
// more, or one and a cut silence); with fewer every interval figure is
// absent, never zero.
func (f *Figures) HasGeneration() bool { return f.ChunkCount >= 2 || f.Cut > 0 }

// Active is the net generation time: wall clock minus the stalls.
func (f *Figures) Active() int64 { return f.Generation - f.StallTotal }

// ActiveTPS is (outputTokens - 1) per second of active generation. It is
// absent (false) for bursts, fewer than two chunks or tokens, and active
// generation under 1 ms, where the rate is not identifiable.
func (f *Figures) ActiveTPS(outputTokens int64) (float64, bool) {
	active := f.Active()
	if !f.HasGeneration() || f.Burst || active < 1_000_000 || outputTokens < 2 {
		return 0, false
	}
	return float64(outputTokens-1) / (float64(active) / 1e9), true
}

// Millis converts nanoseconds to the contract's double milliseconds.
func Millis(nanos int64) float64 { return float64(nanos) / 1e6 }

// Nanos converts the contract's double milliseconds back to nanoseconds,
// rounded, so that Nanos(Millis(n)) is n for any duration a stream has. A
// value past MaxInt64 nanoseconds (292 years) saturates; a negative or NaN
// one is 0.
func Nanos(ms float64) int64 {
	ns := math.Round(ms * 1e6)
	switch {
	case !(ns > 0):
		return 0
	case ns >= math.MaxInt64:
		return math.MaxInt64
	default:
		return int64(ns)
	}
}

// Derive computes the figures of one stream from its span start, its chunk
// timestamps (unix nanoseconds, sorted ascending, zeros removed: Chunks
// holds them so once judged) and the stall threshold in nanoseconds. Stalls are
// appended to stalls[:0], so a caller that reuses the buffer allocates nothing.
func Derive(start int64, chunkTimes []int64, threshold int64, stalls []Stall) Figures {
	return derive(start, chunkTimes, nil, threshold, 0, stalls)
}

// DeriveCut is Derive for a stream a stall cut ended (the hedging client's
// watchdog, the proxy's guard): cut is the silence from its last chunk to
// its end, a lower bound of its last gap. The cut silence is a stall
// whatever the threshold: the stream never resumed.
func DeriveCut(start int64, chunkTimes []int64, threshold, cut int64, stalls []Stall) Figures {
	return derive(start, chunkTimes, nil, threshold, cut, stalls)
}

// derive is Derive over kept chunk times with the chunks elided before each
// (runs, parallel to chunkTimes; nil when none was): elided chunks count in
// the chunk count and the stall positions, and a gap across them is no
// stall gap.
func derive(start int64, chunkTimes []int64, runs []elidedRun, threshold, cut int64, stalls []Stall) Figures {
	n := len(chunkTimes)
	total := n
	for _, r := range runs {
		total += int(r.elided)
	}
	f := Figures{ChunkCount: total, Threshold: threshold, Stalls: stalls[:0]}
	if n == 0 {
		return f
	}
	if chunkTimes[0] >= start {
		f.HasTTFT = true
		f.TTFT = chunkTimes[0] - start
	}
	if n < 2 && cut <= 0 {
		return f
	}
	f.Generation = chunkTimes[n-1] - chunkTimes[0]
	f.Burst = n >= 2 && f.Generation < int64(total-1)*burstGapNanos
	inStall := false
	elided := 0 // chunks elided up to chunkTimes[i-1]
	for i := 1; i < n; i++ {
		gap := chunkTimes[i] - chunkTimes[i-1]
		if runs != nil && runs[i].elided > 0 {
			elided += int(runs[i].elided)
			inStall = false
			continue
		}
		if gap <= threshold {
			inStall = false
			continue
		}
		f.StallGaps++
		f.StallTotal += gap
		if !inStall {
			inStall = true
			f.Stalls = append(f.Stalls, Stall{AfterChunk: i + elided, At: chunkTimes[i-1]})
		}
		s := &f.Stalls[len(f.Stalls)-1]
		s.Duration += gap
		s.Gaps++
		f.MaxStall = max(f.MaxStall, s.Duration)
	}
	if cut > 0 {
		// The silence the stream was cut in ends the stall in progress, or
		// is one of its own; the stream's wall clock runs to the cut.
		f.Cut = cut
		f.Generation += cut
		f.StallGaps++
		f.StallTotal += cut
		if !inStall {
			f.Stalls = append(f.Stalls, Stall{AfterChunk: total, At: chunkTimes[n-1]})
		}
		s := &f.Stalls[len(f.Stalls)-1]
		s.Duration += cut
		s.Gaps++
		f.MaxStall = max(f.MaxStall, s.Duration)
	}
	f.StallCount = len(f.Stalls)
	return f
}

// PrepareChunkTimes drops zero timestamps (unset in OTLP) and sorts the rest
// in place, returning the usable prefix: for callers that hold bare chunk
// times rather than span events. Spans are read with ChunkReader, which
// also judges the times.
func PrepareChunkTimes(ts []int64) []int64 {
	out := ts[:0]
	for _, t := range ts {
		if t != 0 {
			out = append(out, t)
		}
	}
	if !slices.IsSorted(out) {
		slices.Sort(out)
	}
	return out
}

// Kinds summarizes the kinds of a stream's chunks, in any order: what the
// reasoning figures need. An answer chunk is any chunk whose
// llm.stream.chunk.kind is not reasoning (text, tool_call, or no kind at
// all). The zero value is an empty stream.
type Kinds struct {
	// ReasoningChunks counts the reasoning chunks.
	ReasoningChunks int
	// FirstReasoning is the earliest reasoning chunk (valid when
	// ReasoningChunks > 0).
	FirstReasoning int64
	// HasAnswer says whether an answer chunk exists; FirstAnswer is the
	// earliest one.
	HasAnswer   bool
	FirstAnswer int64
}

// Add counts one chunk at time t (unix nanoseconds).
func (k *Kinds) Add(t int64, reasoning bool) {
	if reasoning {
		if k.ReasoningChunks == 0 || t < k.FirstReasoning {
			k.FirstReasoning = t
		}
		k.ReasoningChunks++
		return
	}
	if !k.HasAnswer || t < k.FirstAnswer {
		k.FirstAnswer = t
	}
	k.HasAnswer = true
}

// Reasoning are the reasoning-aware figures of one stream (docs/contract.md
// section 4). Durations are nanoseconds.
type Reasoning struct {
	// HasTTFA is true when an answer chunk exists at or after the span
	// start; TTFA is then the time from the start to the first answer chunk.
	HasTTFA bool
	TTFA    int64
	// HasReasoningTime is true when a reasoning chunk and an answer chunk
	// exist and the first reasoning chunk is not after the first answer
	// chunk; ReasoningTime is then the time between the two.
	HasReasoningTime bool
	ReasoningTime    int64
	// ReasoningChunks is the number of reasoning chunks (the figure is
	// present only when it is at least 1).
	ReasoningChunks int
}

// DeriveReasoning computes the reasoning figures of one stream from its span
// start and the kinds of its chunks. Stalls do not depend on kinds: Derive
// computes them over every content chunk, reasoning ones included.
func DeriveReasoning(start int64, k Kinds) Reasoning {
	r := Reasoning{ReasoningChunks: k.ReasoningChunks}
	if k.HasAnswer && k.FirstAnswer >= start {
		r.HasTTFA, r.TTFA = true, k.FirstAnswer-start
	}
	if k.HasAnswer && k.ReasoningChunks > 0 && k.FirstReasoning <= k.FirstAnswer {
		r.HasReasoningTime, r.ReasoningTime = true, k.FirstAnswer-k.FirstReasoning
	}
	return r
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

// streamSpan is a span starting at 0 with chunk events (kind text, or none
// when bare) at the offsets given in milliseconds, ending at endMs.
func streamSpan(endMs int64, bare bool, offsetsMs ...int64) ptrace.Span {
	span := ptrace.NewSpan()
	span.SetTraceID(pcommon.TraceID{1})
	span.SetSpanID(pcommon.SpanID{2})
	span.SetStartTimestamp(pcommon.Timestamp(1_767_225_600 * 1e9))
	span.SetEndTimestamp(span.StartTimestamp() + pcommon.Timestamp(endMs*ms))
	for _, o := range offsetsMs {
		ev := span.Events().AppendEmpty()
		ev.SetName(semconv.EventChunk)
		ev.SetTimestamp(span.StartTimestamp() + pcommon.Timestamp(o*ms))
		if !bare {
			ev.Attributes().PutStr(semconv.AttrChunkKind, semconv.ChunkKindText)
		}
	}
	return span
}

func markCut(span ptrace.Span, timeoutMs float64) {
	span.Attributes().PutStr(semconv.AttrErrorType, semconv.ErrorTypeStallTimeout)
	span.Attributes().PutDouble(semconv.AttrStallTimeoutMs, timeoutMs)
}

func readAndDerive(t *testing.T, span ptrace.Span) (Figures, Reasoning, *Chunks) {
	t.Helper()
	c := new(Chunks)
	require.NoError(t, NewChunkReader(DefaultChunkEventsConfig()).Read(span, c))
	f, r := c.Derive(2000*ms, nil)
	return f, r, c
}

// The silence a stall cut ended a stream in is its last stall, whatever the
// threshold, and only with both marks.
func TestStallCutIsTheLastStall(t *testing.T) {
	span := streamSpan(480+1000, false, 400, 420, 440, 460, 480)
	markCut(span, 1000)
	f, _, c := readAndDerive(t, span)
	assert.Equal(t, 1000*ms, c.Cut())
	assert.Equal(t, 1, f.StallCount, "a 1 s cut under a 2 s threshold is a stall")
	assert.Equal(t, 1000*ms, f.StallTotal)
	assert.Equal(t, 1000*ms, f.MaxStall)
	assert.Equal(t, 1080*ms, f.Generation, "the wall clock runs to the cut")
	assert.Equal(t, 80*ms, f.Active())
	require.Len(t, f.Stalls, 1)
	assert.Equal(t, Stall{AfterChunk: 5, At: c.Times[4], Duration: 1000 * ms, Gaps: 1}, f.Stalls[0])

	// A stall in progress goes on into the cut silence.
	span = streamSpan(2820+30000, false, 300, 320, 2820)
	markCut(span, 30000)
	f, _, _ = readAndDerive(t, span)
	assert.Equal(t, 1, f.StallCount)
	assert.Equal(t, 32500*ms, f.MaxStall)
	assert.Equal(t, 2, f.Stalls[0].Gaps)

	// One chunk and a cut: the interval figures of one gap.
	span = streamSpan(1500, false, 500)
	markCut(span, 1000)
	f, _, _ = readAndDerive(t, span)
	assert.True(t, f.HasGeneration())
	assert.Equal(t, 1, f.StallCount)
	assert.False(t, f.Burst)

	for name, change := range map[string]func(ptrace.Span){
		"no timeout":        func(s ptrace.Span) { s.Attributes().Remove(semconv.AttrStallTimeoutMs) },
		"a string timeout":  func(s ptrace.Span) { s.Attributes().PutStr(semconv.AttrStallTimeoutMs, "1000") },
		"a zero timeout":    func(s ptrace.Span) { s.Attributes().PutDouble(semconv.AttrStallTimeoutMs, 0) },
		"another error":     func(s ptrace.Span) { s.Attributes().PutStr(semconv.AttrErrorType, "ttft_timeout") },
		"no end":            func(s ptrace.Span) { s.SetEndTimestamp(0) },
		"ends at the chunk": func(s ptrace.Span) { s.SetEndTimestamp(s.Events().At(0).Timestamp()) },
	} {
		span := streamSpan(1500, false, 500)
		markCut(span, 1000)
		change(span)
		f, _, c := readAndDerive(t, span)
		assert.Zero(t, c.Cut(), name)
		assert.False(t, f.HasGeneration(), name)
	}
}

// OpenLLMetry's frames: the opening burst is left out and no TTFT is known.
func TestFramesLeaveTheOpeningBurstOut(t *testing.T) {
	span := streamSpan(5000, true, 18, 1500, 1520, 1540, 4540, 4560, 4561)
	span.Attributes().PutBool(semconv.AttrOpenLLMetryIsStreaming, true)
	f, r, c := readAndDerive(t, span)
	assert.True(t, c.Frames())
	assert.Equal(t, int64(6), c.Count())
	assert.False(t, f.HasTTFT)
	assert.False(t, r.HasTTFA)
	assert.Equal(t, 1, f.StallCount, "the TTFT wait is no stall")
	assert.Equal(t, 3000*ms, f.StallTotal)
	assert.Equal(t, 3061*ms, f.Generation)

	// Frames sent at once open a Responses stream: all left out.
	span = streamSpan(5000, true, 12, 12, 1500, 1520)
	span.Attributes().PutBool(semconv.AttrOpenLLMetryIsStreaming, true)
	_, _, c = readAndDerive(t, span)
	assert.Equal(t, int64(2), c.Count())

	for name, change := range map[string]func(ptrace.Span){
		"no llm.is_streaming":     func(s ptrace.Span) { s.Attributes().Remove(semconv.AttrOpenLLMetryIsStreaming) },
		"llm.is_streaming string": func(s ptrace.Span) { s.Attributes().PutStr(semconv.AttrOpenLLMetryIsStreaming, "true") },
		"a chunk with its kind":   func(s ptrace.Span) { s.Events().At(3).Attributes().PutStr(semconv.AttrChunkKind, "text") },
	} {
		span := streamSpan(5000, true, 18, 1500, 1520, 1540)
		span.Attributes().PutBool(semconv.AttrOpenLLMetryIsStreaming, true)
		change(span)
		f, _, c := readAndDerive(t, span)
		assert.False(t, c.Frames(), name)
		assert.True(t, f.HasTTFT, name)
		assert.Equal(t, int64(4), c.Count(), name)
	}
}

// cutFigureSpan is what the stall processor writes for the first stream of
// TestStallCutIsTheLastStall, its chunk events dropped.
func cutFigureSpan() ptrace.Span {
	span := ptrace.NewSpan()
	attrs := span.Attributes()
	attrs.PutInt(semconv.AttrChunkCount, 5)
	attrs.PutDouble(semconv.AttrTTFTMs, 400)
	attrs.PutDouble(semconv.AttrGenerationMs, 1080)
	attrs.PutDouble(semconv.AttrStallThresholdMs, 2000)
	attrs.PutDouble(semconv.AttrStallMs, 1000)
	attrs.PutInt(semconv.AttrStallCount, 1)
	attrs.PutDouble(semconv.AttrMaxStallMs, 1000)
	attrs.PutDouble(semconv.AttrActiveGenerationMs, 80)
	attrs.PutDouble(semconv.AttrStallCutMs, 1000)
	ev := span.Events().AppendEmpty()
	ev.SetName(semconv.EventStall)
	ev.Attributes().PutDouble(semconv.AttrStallEventDurationMs, 1000)
	ev.Attributes().PutBool(semconv.AttrStallEventCut, true)
	return span
}

func TestCheckCutAndFrameSets(t *testing.T) {
	for _, tt := range []struct {
		name    string
		change  func(ptrace.Span)
		wantErr string
	}{
		{name: "the processor's cut set", change: func(ptrace.Span) {}},
		{name: "one chunk and a cut", change: func(s ptrace.Span) {
			a := s.Attributes()
			a.PutInt(semconv.AttrChunkCount, 1)
			a.PutDouble(semconv.AttrGenerationMs, 1000)
			a.PutDouble(semconv.AttrActiveGenerationMs, 0)
		}},
		{name: "one chunk without a cut", change: func(s ptrace.Span) {
			s.Attributes().PutInt(semconv.AttrChunkCount, 1)
			s.Attributes().Remove(semconv.AttrStallCutMs)
		}, wantErr: "interval figures need at least 2"},
		{name: "more stalls than gaps with the cut", change: func(s ptrace.Span) {
			s.Attributes().PutInt(semconv.AttrChunkCount, 1)
			s.Attributes().PutInt(semconv.AttrStallCount, 2)
		}, wantErr: "exceeds the 1 gaps of 1 chunks"},
		{name: "a cut longer than the longest stall", change: func(s ptrace.Span) {
			s.Attributes().PutDouble(semconv.AttrStallCutMs, 1001)
		}, wantErr: "llm.stream.stall_cut_ms 1001 exceeds"},
		{name: "a zero cut", change: func(s ptrace.Span) {
			s.Attributes().PutDouble(semconv.AttrStallCutMs, 0)
		}, wantErr: "llm.stream.stall_cut_ms: must be positive"},
		{name: "a cut without the interval figures", change: func(s ptrace.Span) {
			for _, k := range []string{semconv.AttrGenerationMs, semconv.AttrStallThresholdMs, semconv.AttrStallMs, semconv.AttrStallCount, semconv.AttrMaxStallMs, semconv.AttrActiveGenerationMs} {
				s.Attributes().Remove(k)
			}
			s.Events().RemoveIf(func(ptrace.SpanEvent) bool { return true })
		}, wantErr: "present without the interval figures"},
		{name: "a frame set", change: func(s ptrace.Span) {
			s.Attributes().Remove(semconv.AttrTTFTMs)
			s.Attributes().PutStr(semconv.AttrEvidence, semconv.EvidenceFrames)
		}},
		{name: "a frame set with a TTFT", change: func(s ptrace.Span) {
			s.Attributes().PutStr(semconv.AttrEvidence, semconv.EvidenceFrames)
		}, wantErr: "llm.stream.ttft_ms: present in a figure set derived from frames"},
		{name: "a frame-marker set with a figure", change: func(s ptrace.Span) {
			s.Attributes().PutStr(semconv.AttrEvidence, semconv.EvidenceFrameMarkers)
		}, wantErr: "present in a figure set derived from frame_markers"},
		{name: "a lone seal", change: func(s ptrace.Span) {
			s.Attributes().Clear()
			s.Events().RemoveIf(func(ptrace.SpanEvent) bool { return true })
			s.Attributes().PutEmptyBytes(semconv.AttrFiguresSeal).FromRaw(make([]byte, SealSize))
		}, wantErr: "llm.stream.chunk_count: absent"},
	} {
		span := cutFigureSpan()
		tt.change(span)
		err := check(span)
		if tt.wantErr == "" {
			assert.NoError(t, err, tt.name)
			continue
		}
		if assert.Error(t, err, tt.name) {
			assert.Contains(t, err.Error(), tt.wantErr, tt.name)
		}
	}
	only := ptrace.NewSpan()
	only.Attributes().PutStr(semconv.AttrEvidence, semconv.EvidenceFrameMarkers)
	assert.NoError(t, check(only), "a frame-marker set alone")
}

// sealed seals span as the processor does once it wrote the figures.
func sealed(t *testing.T, span ptrace.Span) {
	t.Helper()
	c := new(Chunks)
	require.NoError(t, NewChunkReader(DefaultChunkEventsConfig()).Read(span, c))
	span.Attributes().PutInt(semconv.AttrChunkCount, c.Count())
	span.Attributes().PutEmptyBytes(semconv.AttrFiguresSeal).FromRaw(NewSealer().Seal(span, c))
}

func readSealed(span ptrace.Span) bool {
	rep := ReadAttributes(span.Attributes())
	return NewChunkReader(DefaultChunkEventsConfig()).ReadSealed(span, new(Chunks), &rep, NewSealer())
}

// A seal verifies on the span it was made for, and on nothing changed: the
// connector then reads that span in full. The figures are not sealed: they
// are checked on every span.
func TestSealVerifiesOnlyWhatItSealed(t *testing.T) {
	span := streamSpan(5000, false, 400, 420, 3440, 3460)
	markCut(span, 1000)
	sealed(t, span)
	assert.True(t, readSealed(span))

	for name, change := range map[string]func(ptrace.Span){
		"a chunk time": func(s ptrace.Span) { s.Events().At(2).SetTimestamp(s.Events().At(2).Timestamp() + 1) },
		"a chunk more": func(s ptrace.Span) { s.Events().At(3).CopyTo(s.Events().AppendEmpty()) },
		"the span end": func(s ptrace.Span) { s.SetEndTimestamp(s.EndTimestamp() + 1) },
		"the span id":  func(s ptrace.Span) { s.SetSpanID(pcommon.SpanID{3}) },
		"the cut mark": func(s ptrace.Span) { s.Attributes().Remove(semconv.AttrErrorType) },
		"another seal": func(s ptrace.Span) {
			v, _ := s.Attributes().Get(semconv.AttrFiguresSeal)
			v.Bytes().FromRaw(make([]byte, SealSize))
		},
		"a short seal":      func(s ptrace.Span) { v, _ := s.Attributes().Get(semconv.AttrFiguresSeal); v.Bytes().FromRaw([]byte{1}) },
		"elision counts":    func(s ptrace.Span) { s.Events().At(1).Attributes().PutInt(semconv.AttrChunkElided, 0) },
		"unsorted chunks":   func(s ptrace.Span) { s.Events().At(0).SetTimestamp(s.Events().At(3).Timestamp() + 1) },
		"no seal":           func(s ptrace.Span) { s.Attributes().Remove(semconv.AttrFiguresSeal) },
		"a renamed chunk":   func(s ptrace.Span) { s.Events().At(1).SetName(semconv.EventKeepalive) },
		"the first chunk":   func(s ptrace.Span) { s.Events().At(0).SetTimestamp(s.Events().At(0).Timestamp() - 1) },
		"a chunk unstamped": func(s ptrace.Span) { s.Events().At(3).SetTimestamp(0) },
	} {
		cp := ptrace.NewSpan()
		span.CopyTo(cp)
		change(cp)
		assert.False(t, readSealed(cp), name)
	}
}

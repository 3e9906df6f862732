// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

// workedExampleSpan is what the stall processor writes for the first worked
// example of docs/metrics.md (two stalls, 3 s and 6 s), with its two stall
// events, after a first tier dropped the chunk events.
func workedExampleSpan() ptrace.Span {
	span := ptrace.NewSpan()
	attrs := span.Attributes()
	attrs.PutStr(semconv.AttrRequestModel, "gpt-4o")
	attrs.PutInt(semconv.AttrUsageOutputTokens, 100)
	attrs.PutInt(semconv.AttrChunkCount, 8)
	attrs.PutDouble(semconv.AttrTTFTMs, 100)
	attrs.PutDouble(semconv.AttrTimeToFirstChunk, 0.1)
	attrs.PutDouble(semconv.AttrGenerationMs, 9250)
	attrs.PutDouble(semconv.AttrStallThresholdMs, 2000)
	attrs.PutDouble(semconv.AttrStallMs, 9000)
	attrs.PutInt(semconv.AttrStallCount, 2)
	attrs.PutDouble(semconv.AttrMaxStallMs, 6000)
	attrs.PutDouble(semconv.AttrActiveGenerationMs, 250)
	attrs.PutDouble(semconv.AttrActiveTPS, 396)
	attrs.PutStr("llm.stream.oversized_frames", "not a figure: any type")
	attrs.PutStr(semconv.AttrHedgeOutcome, "loser")
	for _, d := range []float64{3000, 6000} {
		ev := span.Events().AppendEmpty()
		ev.SetName(semconv.EventStall)
		ev.Attributes().PutDouble(semconv.AttrStallEventDurationMs, d)
	}
	return span
}

func check(span ptrace.Span) error {
	r := ReadAttributes(span.Attributes())
	r.ReadStallEvents(span.Events())
	return r.Check()
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		change func(ptrace.Span)
		// wantErr is a part of the error, "" for a consistent set.
		wantErr string
	}{
		{name: "the processor's output", change: func(ptrace.Span) {}},
		{name: "no figure at all", change: func(s ptrace.Span) {
			s.Attributes().RemoveIf(func(k string, _ pcommon.Value) bool { return IsAttribute(k) })
			s.Events().RemoveIf(func(ptrace.SpanEvent) bool { return true })
		}},
		{name: "one chunk", change: func(s ptrace.Span) {
			keepOnly(s, semconv.AttrChunkCount, semconv.AttrTTFTMs)
			s.Attributes().PutInt(semconv.AttrChunkCount, 1)
			s.Events().RemoveIf(func(ptrace.SpanEvent) bool { return true })
		}},
		{name: "a burst without active_tps", change: func(s ptrace.Span) {
			s.Attributes().Remove(semconv.AttrActiveTPS)
			s.Attributes().PutBool(semconv.AttrBurst, true)
		}},
		{name: "stall events dropped", change: func(s ptrace.Span) {
			s.Events().RemoveIf(func(ev ptrace.SpanEvent) bool {
				return ev.Attributes().AsRaw()[semconv.AttrStallEventDurationMs] == 6000.0
			})
			s.Attributes().PutInt(semconv.AttrStallEventsDropped, 1)
		}},
		{name: "rounding inside the tolerance", change: func(s ptrace.Span) {
			s.Attributes().PutDouble(semconv.AttrActiveGenerationMs, 250+5e-7)
		}},
		{name: "no stall", change: func(s ptrace.Span) {
			a := s.Attributes()
			a.PutDouble(semconv.AttrStallMs, 0)
			a.PutInt(semconv.AttrStallCount, 0)
			a.PutDouble(semconv.AttrMaxStallMs, 0)
			a.PutDouble(semconv.AttrActiveGenerationMs, 9250)
			s.Events().RemoveIf(func(ptrace.SpanEvent) bool { return true })
		}},
		{name: "reasoning figures", change: func(s ptrace.Span) {
			a := s.Attributes()
			a.PutDouble(semconv.AttrTimeToFirstAnswerMs, 150)
			a.PutDouble(semconv.AttrReasoningMs, 50)
			a.PutInt(semconv.AttrReasoningChunkCount, 1)
		}},
		{name: "reasoning after the answer started", change: func(s ptrace.Span) {
			a := s.Attributes()
			a.PutDouble(semconv.AttrTimeToFirstAnswerMs, 100)
			a.PutInt(semconv.AttrReasoningChunkCount, 3)
		}},
		{name: "only reasoning chunks", change: func(s ptrace.Span) {
			s.Attributes().PutInt(semconv.AttrReasoningChunkCount, 8)
		}},
		{name: "reasoning began before the span start", change: func(s ptrace.Span) {
			a := s.Attributes()
			a.Remove(semconv.AttrTTFTMs)
			a.PutDouble(semconv.AttrTimeToFirstAnswerMs, 100)
			a.PutDouble(semconv.AttrReasoningMs, 250)
			a.PutInt(semconv.AttrReasoningChunkCount, 2)
		}},
		{name: "a first tier without reasoning figures", change: func(s ptrace.Span) {
			s.Attributes().Remove(semconv.AttrTimeToFirstAnswerMs)
		}},

		// Issue rows: forged figures with no chunk evidence.
		{name: "forged stall figures without chunk_count", change: func(s ptrace.Span) {
			keepOnly(s)
			s.Attributes().PutInt(semconv.AttrStallCount, 3)
			s.Attributes().PutDouble(semconv.AttrStallMs, 90000)
		}, wantErr: "llm.stream.chunk_count: absent"},
		{name: "forged stall figures on one chunk", change: func(s ptrace.Span) {
			s.Attributes().PutInt(semconv.AttrChunkCount, 1)
		}, wantErr: "interval figures need at least 2"},
		{name: "stall figures without the other interval figures", change: func(s ptrace.Span) {
			keepOnly(s, semconv.AttrChunkCount, semconv.AttrStallCount, semconv.AttrStallMs)
		}, wantErr: "absent, but other interval figures are present"},
		{name: "stall events without interval figures", change: func(s ptrace.Span) {
			keepOnly(s, semconv.AttrChunkCount)
		}, wantErr: "events: present without the interval figures"},
		{name: "only stall events", change: func(s ptrace.Span) { keepOnly(s) }, wantErr: "chunk_count: absent"},

		{name: "chunk_count zero", change: func(s ptrace.Span) { s.Attributes().PutInt(semconv.AttrChunkCount, 0) }, wantErr: "want at least 1"},
		{name: "chunk_count a double", change: func(s ptrace.Span) { s.Attributes().PutDouble(semconv.AttrChunkCount, 8) }, wantErr: "want Int, got Double"},
		{name: "stall_ms an int", change: func(s ptrace.Span) { s.Attributes().PutInt(semconv.AttrStallMs, 9000) }, wantErr: "want Double, got Int"},
		{name: "stall_ms a string", change: func(s ptrace.Span) { s.Attributes().PutStr(semconv.AttrStallMs, "9000") }, wantErr: "want Double, got Str"},
		{name: "burst false", change: func(s ptrace.Span) { s.Attributes().PutBool(semconv.AttrBurst, false) }, wantErr: "written only as true"},
		{name: "negative ttft", change: func(s ptrace.Span) { s.Attributes().PutDouble(semconv.AttrTTFTMs, -1) }, wantErr: "not a finite, non-negative"},
		{name: "NaN generation", change: func(s ptrace.Span) { s.Attributes().PutDouble(semconv.AttrGenerationMs, math.NaN()) }, wantErr: "not a finite"},
		{name: "infinite stall", change: func(s ptrace.Span) { s.Attributes().PutDouble(semconv.AttrStallMs, math.Inf(1)) }, wantErr: "not a finite"},
		{name: "negative stall count", change: func(s ptrace.Span) { s.Attributes().PutInt(semconv.AttrStallCount, -2) }, wantErr: "is negative"},
		{name: "zero threshold", change: func(s ptrace.Span) { s.Attributes().PutDouble(semconv.AttrStallThresholdMs, 0) }, wantErr: "must be positive"},
		{name: "stall longer than generation", change: func(s ptrace.Span) {
			a := s.Attributes()
			a.PutDouble(semconv.AttrStallMs, 50000)
			a.PutDouble(semconv.AttrActiveGenerationMs, 0)
		}, wantErr: "exceeds llm.stream.generation_ms"},
		{name: "active is not generation minus stall", change: func(s ptrace.Span) {
			s.Attributes().PutDouble(semconv.AttrActiveGenerationMs, 250.01)
		}, wantErr: "is not llm.stream.generation_ms - llm.stream.stall_ms"},
		{name: "max stall above the stall time", change: func(s ptrace.Span) {
			s.Attributes().PutDouble(semconv.AttrMaxStallMs, 9001)
		}, wantErr: "exceeds llm.stream.stall_ms"},
		{name: "more stalls than gaps", change: func(s ptrace.Span) {
			s.Attributes().PutInt(semconv.AttrStallCount, 8)
		}, wantErr: "exceeds the 7 gaps"},
		{name: "stall time without a stall", change: func(s ptrace.Span) {
			s.Attributes().PutInt(semconv.AttrStallCount, 0)
			s.Events().RemoveIf(func(ptrace.SpanEvent) bool { return true })
		}, wantErr: "zero stalls go with zero stall time"},
		{name: "stalls without stall time", change: func(s ptrace.Span) {
			a := s.Attributes()
			a.PutDouble(semconv.AttrStallMs, 0)
			a.PutDouble(semconv.AttrMaxStallMs, 0)
			a.PutDouble(semconv.AttrActiveGenerationMs, 9250)
			s.Events().RemoveIf(func(ptrace.SpanEvent) bool { return true })
		}, wantErr: "zero stalls go with zero stall time"},
		{name: "active_tps on a burst", change: func(s ptrace.Span) { s.Attributes().PutBool(semconv.AttrBurst, true) }, wantErr: "present on a burst"},
		{name: "active_tps zero", change: func(s ptrace.Span) { s.Attributes().PutDouble(semconv.AttrActiveTPS, 0) }, wantErr: "must be positive"},
		{name: "active_tps under 1 ms of active generation", change: func(s ptrace.Span) {
			a := s.Attributes()
			a.PutDouble(semconv.AttrGenerationMs, 9000.5)
			a.PutDouble(semconv.AttrActiveGenerationMs, 0.5)
		}, wantErr: "under 1 ms"},
		{name: "stall_events_dropped zero", change: func(s ptrace.Span) { s.Attributes().PutInt(semconv.AttrStallEventsDropped, 0) }, wantErr: "written only when positive"},
		{name: "more stall events than stalls", change: func(s ptrace.Span) {
			s.Events().AppendEmpty().SetName(semconv.EventStall)
			s.Events().At(2).Attributes().PutDouble(semconv.AttrStallEventDurationMs, 1)
		}, wantErr: "exceed llm.stream.stall_count 2"},
		{name: "events and dropped exceed the stalls", change: func(s ptrace.Span) {
			s.Attributes().PutInt(semconv.AttrStallEventsDropped, 1)
		}, wantErr: "and 1 dropped exceed"},
		{name: "a stall event longer than the longest stall", change: func(s ptrace.Span) {
			s.Events().At(0).Attributes().PutDouble(semconv.AttrStallEventDurationMs, 7000)
		}, wantErr: "exceeds llm.stream.max_stall_ms"},
		{name: "stall events longer than the stall time", change: func(s ptrace.Span) {
			s.Events().At(0).Attributes().PutDouble(semconv.AttrStallEventDurationMs, 5000)
		}, wantErr: "more than llm.stream.stall_ms"},
		{name: "a stall event without a duration", change: func(s ptrace.Span) {
			s.Events().At(1).Attributes().Clear()
		}, wantErr: "is not a double"},
		{name: "a stall event of zero", change: func(s ptrace.Span) {
			s.Events().At(1).Attributes().PutDouble(semconv.AttrStallEventDurationMs, 0)
		}, wantErr: "not a positive duration"},
		{name: "a stall event of NaN", change: func(s ptrace.Span) {
			s.Events().At(1).Attributes().PutDouble(semconv.AttrStallEventDurationMs, math.NaN())
		}, wantErr: "not a positive duration"},
		{name: "more reasoning chunks than chunks", change: func(s ptrace.Span) {
			s.Attributes().PutInt(semconv.AttrReasoningChunkCount, 9)
		}, wantErr: "exceeds llm.stream.chunk_count 8"},
		{name: "first answer before the first chunk", change: func(s ptrace.Span) {
			s.Attributes().PutDouble(semconv.AttrTimeToFirstAnswerMs, 99)
		}, wantErr: "is not llm.stream.ttft_ms + llm.stream.reasoning_ms = 100"},
		{name: "first answer later than ttft without reasoning", change: func(s ptrace.Span) {
			s.Attributes().PutDouble(semconv.AttrTimeToFirstAnswerMs, 150)
		}, wantErr: "is not llm.stream.ttft_ms + llm.stream.reasoning_ms = 100"},
		{name: "reasoning time that does not add up", change: func(s ptrace.Span) {
			a := s.Attributes()
			a.PutDouble(semconv.AttrTimeToFirstAnswerMs, 150)
			a.PutDouble(semconv.AttrReasoningMs, 40)
			a.PutInt(semconv.AttrReasoningChunkCount, 1)
		}, wantErr: "= 140"},
		{name: "reasoning_chunk_count zero", change: func(s ptrace.Span) {
			s.Attributes().PutInt(semconv.AttrReasoningChunkCount, 0)
		}, wantErr: "reasoning_chunk_count: written only when positive"},
		{name: "reasoning_chunk_count a double", change: func(s ptrace.Span) {
			s.Attributes().PutDouble(semconv.AttrReasoningChunkCount, 1)
		}, wantErr: "want Int, got Double"},
		{name: "first answer when every chunk is reasoning", change: func(s ptrace.Span) {
			a := s.Attributes()
			a.PutInt(semconv.AttrReasoningChunkCount, 8)
			a.PutDouble(semconv.AttrTimeToFirstAnswerMs, 100)
		}, wantErr: "time_to_first_answer_ms: present, but every chunk is a reasoning chunk"},
		{name: "reasoning time when every chunk is reasoning", change: func(s ptrace.Span) {
			a := s.Attributes()
			a.PutInt(semconv.AttrReasoningChunkCount, 8)
			a.PutDouble(semconv.AttrReasoningMs, 10)
		}, wantErr: "reasoning_ms: present, but every chunk is a reasoning chunk"},
		{name: "reasoning time without reasoning chunks", change: func(s ptrace.Span) {
			a := s.Attributes()
			a.PutDouble(semconv.AttrTimeToFirstAnswerMs, 150)
			a.PutDouble(semconv.AttrReasoningMs, 50)
		}, wantErr: "present without llm.stream.reasoning_chunk_count"},
		{name: "reasoning time longer than generation", change: func(s ptrace.Span) {
			a := s.Attributes()
			a.PutDouble(semconv.AttrTimeToFirstAnswerMs, 9451)
			a.PutDouble(semconv.AttrReasoningMs, 9351)
			a.PutInt(semconv.AttrReasoningChunkCount, 1)
		}, wantErr: "exceeds llm.stream.generation_ms"},
		{name: "reasoning time without interval figures", change: func(s ptrace.Span) {
			keepOnly(s, semconv.AttrChunkCount, semconv.AttrTTFTMs)
			s.Events().RemoveIf(func(ptrace.SpanEvent) bool { return true })
			a := s.Attributes()
			a.PutDouble(semconv.AttrTimeToFirstAnswerMs, 150)
			a.PutDouble(semconv.AttrReasoningMs, 50)
			a.PutInt(semconv.AttrReasoningChunkCount, 1)
		}, wantErr: "reasoning_ms: present without the interval figures"},
		{name: "reasoning time with ttft but no first answer", change: func(s ptrace.Span) {
			a := s.Attributes()
			a.PutDouble(semconv.AttrReasoningMs, 50)
			a.PutInt(semconv.AttrReasoningChunkCount, 1)
		}, wantErr: "time_to_first_answer_ms: absent, but"},
		{name: "first answer without ttft nor reasoning", change: func(s ptrace.Span) {
			s.Attributes().Remove(semconv.AttrTTFTMs)
			s.Attributes().PutDouble(semconv.AttrTimeToFirstAnswerMs, 100)
		}, wantErr: "needs a longer llm.stream.reasoning_ms"},
		{name: "first answer without ttft, reasoning too short", change: func(s ptrace.Span) {
			a := s.Attributes()
			a.Remove(semconv.AttrTTFTMs)
			a.PutDouble(semconv.AttrTimeToFirstAnswerMs, 100)
			a.PutDouble(semconv.AttrReasoningMs, 90)
			a.PutInt(semconv.AttrReasoningChunkCount, 2)
		}, wantErr: "needs a longer llm.stream.reasoning_ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			span := workedExampleSpan()
			tt.change(span)
			err := check(span)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func keepOnly(s ptrace.Span, names ...string) {
	s.Attributes().RemoveIf(func(k string, _ pcommon.Value) bool {
		if !IsAttribute(k) {
			return false
		}
		for _, n := range names {
			if n == k {
				return false
			}
		}
		return true
	})
}

// OTLP can carry a key twice (pcommon.Map cannot make it, a decoder can):
// the set is inconsistent, whichever copy a reader would see.
func TestCheckDuplicateFigure(t *testing.T) {
	const body = `{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[
		{"key":"llm.stream.chunk_count","value":{"intValue":"1"}},
		{"key":"llm.stream.ttft_ms","value":{"doubleValue":100}},
		{"key":"llm.stream.ttft_ms","value":{"doubleValue":5}}]}]}]}]}`
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces([]byte(body))
	require.NoError(t, err)
	span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	require.Equal(t, 3, span.Attributes().Len())
	err = check(span)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "llm.stream.ttft_ms: given twice")
}

func TestAttributeIndex(t *testing.T) {
	names := AttributeNames()
	require.Len(t, names, numAttributes)
	for i, n := range names {
		got, ok := AttributeIndex(n)
		assert.True(t, ok, n)
		assert.Equal(t, i, got, n)
	}
	for _, n := range []string{
		"llm.stream.oversized_frames", semconv.AttrTimeToFirstChunk, semconv.AttrHedgeLoser,
		semconv.AttrHedgeOutcome, semconv.AttrChunkKind, semconv.AttrStallEventDurationMs, "llm.stream.", "",
	} {
		assert.False(t, IsAttribute(n), n)
	}
}

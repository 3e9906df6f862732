// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

const markerStart = int64(1_767_225_600_000_000_000)

type marker struct {
	name string
	at   pcommon.Timestamp
}

func atMs(ms int64) pcommon.Timestamp {
	return pcommon.Timestamp(markerStart + ms*int64(time.Millisecond))
}

func markerSpan(start, end pcommon.Timestamp, events ...marker) ptrace.Span {
	span := ptrace.NewSpan()
	span.SetStartTimestamp(start)
	span.SetEndTimestamp(end)
	for _, m := range events {
		ev := span.Events().AppendEmpty()
		ev.SetName(m.name)
		ev.SetTimestamp(m.at)
	}
	return span
}

func TestMarkerReader(t *testing.T) {
	first := func(ms int64) marker { return marker{semconv.EventVercelFirstChunk, atMs(ms)} }
	finish := func(ms int64) marker { return marker{semconv.EventVercelFinish, atMs(ms)} }
	ms := int64(time.Millisecond)
	start, end := atMs(0), atMs(10_000)
	tests := []struct {
		name        string
		span        ptrace.Span
		noEvidence  bool
		implausible string
		want        MarkerFigures
	}{
		{
			name: "first chunk and finish", span: markerSpan(start, end, first(420), finish(5420)),
			want: MarkerFigures{HasTTFT: true, TTFT: 420 * ms, HasGeneration: true, Generation: 5000 * ms},
		},
		{
			name: "finish recorded first", span: markerSpan(start, end, finish(5420), first(420)),
			want: MarkerFigures{HasTTFT: true, TTFT: 420 * ms, HasGeneration: true, Generation: 5000 * ms},
		},
		{
			name: "first chunk only", span: markerSpan(start, end, first(420)),
			want: MarkerFigures{HasTTFT: true, TTFT: 420 * ms},
		},
		{
			name: "first chunk and finish at once", span: markerSpan(start, end, first(420), finish(420)),
			want: MarkerFigures{HasTTFT: true, TTFT: 420 * ms, HasGeneration: true},
		},
		{
			name: "two first chunks: the earliest", span: markerSpan(start, end, first(900), first(420), finish(5420)),
			want: MarkerFigures{HasTTFT: true, TTFT: 420 * ms, HasGeneration: true, Generation: 5000 * ms},
		},
		{
			name: "two finishes: the latest", span: markerSpan(start, end, first(420), finish(3000), finish(5420)),
			want: MarkerFigures{HasTTFT: true, TTFT: 420 * ms, HasGeneration: true, Generation: 5000 * ms},
		},
		{
			name: "first chunk before the start, within the skew", span: markerSpan(start, end, first(-40), finish(960)),
			want: MarkerFigures{HasGeneration: true, Generation: 1000 * ms},
		},
		{
			name: "no start", span: markerSpan(0, end, first(420), finish(5420)),
			want: MarkerFigures{HasGeneration: true, Generation: 5000 * ms},
		},
		{name: "zero-time first chunk is none", span: markerSpan(start, end, marker{semconv.EventVercelFirstChunk, 0}, finish(5420)), noEvidence: true},
		{name: "finish alone is no evidence", span: markerSpan(start, end, finish(5420)), noEvidence: true},
		{name: "no marker", span: markerSpan(start, end, marker{"ai.toolCall", atMs(5)}), noEvidence: true},
		{name: "finish before the first chunk", span: markerSpan(start, end, first(5420), finish(420)), implausible: "before the first chunk"},
		{name: "first chunk beyond the skew before the start", span: markerSpan(start, end, first(-5000)), implausible: "before the span start"},
		{name: "finish beyond the skew after the end", span: markerSpan(start, end, first(420), finish(12_000)), implausible: "after the span end"},
		{name: "longer than max_duration", span: markerSpan(start, 0, first(420), finish(3_600_001)), implausible: "more than max_duration"},
		{name: "a marker time past int64", span: markerSpan(start, end, first(420), marker{semconv.EventVercelFinish, math.MaxUint64}), implausible: "past the year 2262"},
	}
	reader := NewMarkerReader(DefaultMarkerEventsConfig(), NewChunkReader(DefaultChunkEventsConfig()))
	var m Markers
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := reader.Read(tt.span, &m)
			if tt.implausible != "" {
				require.ErrorIs(t, err, ErrImplausible)
				assert.Contains(t, err.Error(), tt.implausible)
				return
			}
			require.NoError(t, err)
			if tt.noEvidence {
				assert.False(t, m.HasFirst)
				return
			}
			require.True(t, m.HasFirst)
			assert.Equal(t, tt.want, m.Derive())
		})
	}
}

func TestMarkerReaderOff(t *testing.T) {
	assert.Nil(t, NewMarkerReader(MarkerEventsConfig{}, NewChunkReader(DefaultChunkEventsConfig())))
}

func TestMarkerEventsConfigCheck(t *testing.T) {
	chunkNames := semconv.DefaultChunkEventNames()
	def := DefaultMarkerEventsConfig()
	assert.Empty(t, def.Check(chunkNames))
	off := MarkerEventsConfig{}
	assert.Empty(t, off.Check(chunkNames))
	firstOnly := MarkerEventsConfig{FirstChunk: []string{"my.first"}}
	assert.Empty(t, firstOnly.Check(chunkNames))

	tests := []struct {
		name string
		cfg  MarkerEventsConfig
		want []string
	}{
		{name: "finish without first chunk", cfg: MarkerEventsConfig{Finish: []string{"x"}}, want: []string{"marker_events::finish: needs a first_chunk marker"}},
		{
			name: "empty names", cfg: MarkerEventsConfig{FirstChunk: []string{""}, Finish: []string{"x", ""}},
			want: []string{"marker_events::first_chunk[0]: must not be empty", "marker_events::finish[1]: must not be empty"},
		},
		{
			name: "stall and keepalive", cfg: MarkerEventsConfig{FirstChunk: []string{semconv.EventStall}, Finish: []string{semconv.EventKeepalive}},
			want: []string{`first_chunk[0]: "llm.stream.stall" is never a marker`, `finish[0]: "llm.stream.keepalive" is never a marker`},
		},
		{
			name: "a chunk event name", cfg: MarkerEventsConfig{FirstChunk: []string{semconv.EventChunk}},
			want: []string{`first_chunk[0]: "gen_ai.content.completion.chunk" is a chunk_events name too`},
		},
		{
			name: "first chunk and finish alike", cfg: MarkerEventsConfig{FirstChunk: []string{"a", "b"}, Finish: []string{"b"}},
			want: []string{`first_chunk[1]: "b" is a finish marker too`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := tt.cfg.Check(chunkNames)
			require.Len(t, errs, len(tt.want))
			for i, want := range tt.want {
				assert.Contains(t, errs[i].Error(), want)
			}
		})
	}
}

// markerFigureSpan is what the stall processor writes for a span with a
// first-chunk marker 420 ms after its start and a finish 5 s later.
func markerFigureSpan() ptrace.Span {
	span := ptrace.NewSpan()
	attrs := span.Attributes()
	attrs.PutStr(semconv.AttrEvidence, semconv.EvidenceMarkers)
	attrs.PutDouble(semconv.AttrTTFTMs, 420)
	attrs.PutDouble(semconv.AttrTimeToFirstChunk, 0.42)
	attrs.PutDouble(semconv.AttrGenerationMs, 5000)
	attrs.PutStr(semconv.AttrVercelModelID, "gpt-4o-mini")
	return span
}

// The marker figure set is consistent as the processor writes it, and with
// either figure missing; a set that claims markers and carries anything
// more, or that carries ttft and generation without claiming them, is not.
func TestCheckMarkerSet(t *testing.T) {
	tests := []struct {
		name    string
		change  func(ptrace.Span)
		wantErr string
	}{
		{name: "the processor's output", change: func(ptrace.Span) {}},
		{name: "no finish", change: func(s ptrace.Span) { s.Attributes().Remove(semconv.AttrGenerationMs) }},
		{name: "first chunk before the start", change: func(s ptrace.Span) { s.Attributes().Remove(semconv.AttrTTFTMs) }},
		{name: "evidence alone", change: func(s ptrace.Span) {
			s.Attributes().Remove(semconv.AttrTTFTMs)
			s.Attributes().Remove(semconv.AttrGenerationMs)
		}},

		{name: "forged stall figures", change: func(s ptrace.Span) {
			s.Attributes().PutDouble(semconv.AttrStallMs, 4000)
			s.Attributes().PutInt(semconv.AttrStallCount, 1)
		}, wantErr: "llm.stream.stall_ms: present in a figure set derived from markers"},
		{
			name: "a chunk count", change: func(s ptrace.Span) { s.Attributes().PutInt(semconv.AttrChunkCount, 1) },
			wantErr: "llm.stream.chunk_count: present in a figure set derived from markers",
		},
		{
			name: "active generation", change: func(s ptrace.Span) { s.Attributes().PutDouble(semconv.AttrActiveGenerationMs, 5000) },
			wantErr: "active_generation_ms: present in a figure set derived from markers",
		},
		{
			name: "a time to first answer", change: func(s ptrace.Span) { s.Attributes().PutDouble(semconv.AttrTimeToFirstAnswerMs, 420) },
			wantErr: "time_to_first_answer_ms: present in a figure set",
		},
		{name: "a stall event", change: func(s ptrace.Span) {
			ev := s.Events().AppendEmpty()
			ev.SetName(semconv.EventStall)
			ev.Attributes().PutDouble(semconv.AttrStallEventDurationMs, 3000)
		}, wantErr: "llm.stream.stall events: present in a figure set derived from markers"},
		{
			name: "another evidence", change: func(s ptrace.Span) { s.Attributes().PutStr(semconv.AttrEvidence, "chunks") },
			wantErr: `llm.stream.evidence: "chunks" is none of`,
		},
		{
			name: "evidence not a string", change: func(s ptrace.Span) { s.Attributes().PutBool(semconv.AttrEvidence, true) },
			wantErr: "want Str, got Bool",
		},
		{
			name: "negative ttft", change: func(s ptrace.Span) { s.Attributes().PutDouble(semconv.AttrTTFTMs, -1) },
			wantErr: "llm.stream.ttft_ms: -1 is not a finite, non-negative value",
		},
		{
			name: "NaN generation", change: func(s ptrace.Span) { s.Attributes().PutDouble(semconv.AttrGenerationMs, math.NaN()) },
			wantErr: "llm.stream.generation_ms: NaN is not a finite",
		},
		{
			name: "infinite generation", change: func(s ptrace.Span) { s.Attributes().PutDouble(semconv.AttrGenerationMs, math.Inf(1)) },
			wantErr: "is not a finite",
		},
		{
			name: "ttft and generation without the evidence", change: func(s ptrace.Span) { s.Attributes().Remove(semconv.AttrEvidence) },
			wantErr: "llm.stream.chunk_count: absent",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			span := markerFigureSpan()
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

// A consistent marker set is still bounded by max_duration.
func TestCheckFiguresMarkerSetDuration(t *testing.T) {
	reader := NewChunkReader(DefaultChunkEventsConfig())
	span := markerFigureSpan()
	r := ReadAttributes(span.Attributes())
	require.NoError(t, reader.CheckFigures(&r))

	span.Attributes().PutDouble(semconv.AttrGenerationMs, float64(time.Hour.Milliseconds()))
	r = ReadAttributes(span.Attributes())
	err := reader.CheckFigures(&r)
	require.ErrorIs(t, err, ErrImplausible)
}

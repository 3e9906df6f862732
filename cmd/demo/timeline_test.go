// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/harness"
)

var t0 = time.Unix(1_790_000_000, 0)

// at builds chunks at millisecond offsets from t0, all reasoning or all not.
func at(reasoning bool, ms ...int) []chunk {
	out := make([]chunk, len(ms))
	for i, m := range ms {
		out[i] = chunk{at: t0.Add(time.Duration(m) * time.Millisecond), reasoning: reasoning}
	}
	return out
}

func TestTimeline(t *testing.T) {
	for _, tc := range []struct {
		name      string
		chunks    []chunk
		end       time.Time
		threshold time.Duration
		width     int
		want      string
	}{
		{"steady", at(false, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000), time.Time{}, 2 * time.Second, 11, "-##########"},
		{"a stall is a gap", at(false, 1000, 1100, 5100, 5200), time.Time{}, 2 * time.Second, 11, "-##      ##"},
		{"a gap at the threshold is no stall", at(false, 1000, 3000), time.Time{}, 2 * time.Second, 5, "-#..#"},
		{"sparse chunks below the threshold", at(false, 500, 1000, 2000), time.Time{}, 2 * time.Second, 5, "-##.#"},
		{"no threshold, no stall", at(false, 1000, 1100, 5100, 5200), time.Time{}, 0, 11, "-##......##"},
		{"reasoning, then the answer", append(at(true, 100, 200, 300, 400, 500), at(false, 600, 700, 800, 900, 1000)...), time.Time{}, 2 * time.Second, 11, "-rrrrr#####"},
		{"an answer chunk wins its cell", append(at(true, 100, 900), at(false, 905, 1000)...), time.Time{}, 2 * time.Second, 11, "-r.......##"},
		{"one chunk: the wait shows", at(false, 500), time.Time{}, 2 * time.Second, 10, "---------#"},
		{"a chunk at the start", at(false, 0, 0), time.Time{}, 2 * time.Second, 4, "#..."},
		{"a chunk before the start", at(false, -5, 100), time.Time{}, 2 * time.Second, 4, "#..#"},
		{"no chunk, no time", nil, time.Time{}, 2 * time.Second, 10, ""},
		{"no chunk: waited till the end", nil, t0.Add(time.Second), 2 * time.Second, 10, "----------"},
		{"cancelled while stalled", at(false, 100, 200, 300), t0.Add(3300 * time.Millisecond), 2 * time.Second, 12, "##          "},
		{"ended soon after the last chunk", at(false, 100, 200, 300), t0.Add(1300 * time.Millisecond), 2 * time.Second, 14, "-###.........."},
		{"closing frames after the last chunk", at(false, 100, 200, 300), t0.Add(310 * time.Millisecond), 2 * time.Second, 4, "-###"},
		{"a chunk after the end", at(false, 100, 1000), t0.Add(500 * time.Millisecond), 2 * time.Second, 11, "-#........#"},
		{"too narrow", at(false, 100), time.Time{}, 2 * time.Second, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := timeline(t0, tc.end, tc.chunks, tc.threshold, tc.width)
			assert.Equal(t, tc.want, got)
			if tc.want != "" {
				assert.Len(t, got, tc.width)
			}
		})
	}
}

// enrichedSpan is a span as the demo's sink receives it: chunk events (out
// of order, both names, with their kind), a stall event, the threshold.
func enrichedSpan() ptrace.Span {
	sp := ptrace.NewSpan()
	sp.SetName("chat o3")
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(3900 * time.Millisecond)))
	add := func(name string, ms int, kind string) {
		ev := sp.Events().AppendEmpty()
		ev.SetName(name)
		ev.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Duration(ms) * time.Millisecond)))
		if kind != "" {
			ev.Attributes().PutStr(semconv.AttrChunkKind, kind)
		}
	}
	add(semconv.EventChunk, 3000, semconv.ChunkKindText)
	add(semconv.EventChunk, 400, semconv.ChunkKindReasoning)
	add(semconv.EventChunkLegacy, 600, semconv.ChunkKindReasoning)
	add(semconv.EventStall, 700, "")
	add(semconv.EventChunk, 700, semconv.ChunkKindText)
	add(semconv.EventChunk, 3900, "")
	add(semconv.EventChunk, 0, semconv.ChunkKindText) // no timestamp: skipped
	sp.Events().At(sp.Events().Len() - 1).SetTimestamp(0)
	a := sp.Attributes()
	a.PutInt(semconv.AttrChunkCount, 5)
	a.PutDouble(semconv.AttrStallThresholdMs, 2000)
	return sp
}

func TestSpanTimeline(t *testing.T) {
	sp := enrichedSpan()
	// 40 cells over 3.9 s: cell i holds [100*i, 100*(i+1)) ms; the gap
	// 700 -> 3000 ms is a stall.
	assert.Equal(t, "|----r.r#                      #........#|", spanTimeline(sp))

	sp.Attributes().PutInt(semconv.AttrStallThresholdMs, 3000)
	assert.Equal(t, "|----r.r#......................#........#|", spanTimeline(sp), "an int threshold, no stall at 3 s")

	assert.Equal(t, "-", spanTimeline(ptrace.NewSpan()), "no chunk events, no duration")
}

func TestSummaryHasTimeline(t *testing.T) {
	var buf bytes.Buffer
	sp := enrichedSpan()
	require.NoError(t, printSummary(&buf, []harness.ReceivedSpan{{Span: sp, Service: "demo"}}, pmetric.NewMetrics()))
	lines := strings.Split(buf.String(), "\n")
	var header, row string
	for i, l := range lines {
		if strings.Contains(l, "timeline") && strings.Contains(l, "chunks") {
			header, row = l, lines[i+1]
		}
	}
	require.NotEmpty(t, header, buf.String())
	assert.True(t, strings.HasSuffix(strings.TrimRight(row, " "), spanTimeline(sp)), row)
	assert.Equal(t, strings.Index(header, "timeline")+len("timeline"), strings.Index(row, spanTimeline(sp))+len(spanTimeline(sp)),
		"the column is right-aligned under its header")
	assert.Contains(t, buf.String(), timelineLegend)
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

// timelineWidth is the number of cells of a timeline.
const timelineWidth = 40

// The cells of a timeline, from the most to the least telling: a cell shows
// the first of these that happened in its slice of time.
const (
	cellAnswer    = '#' // a text or tool-call chunk arrived
	cellReasoning = 'r' // a reasoning chunk arrived
	cellStall     = ' ' // inside a gap longer than the stall threshold, or such a silence at the end
	cellQuiet     = '.' // no chunk, but no stall either (sparse chunks)
	cellWaiting   = '-' // before the first chunk
)

// timelineLegend explains the column under the table.
const timelineLegend = "timeline: each call from its start (left) to its end (right), scaled per call: '-' waiting for\n" +
	"  the first chunk, 'r' reasoning chunks, '#' answer chunks, ' ' a stall (or such a silence before the end),\n" +
	"  '.' no chunk in that slice"

// chunk is one chunk event: its time and whether it carried reasoning.
type chunk struct {
	at        time.Time
	reasoning bool
}

// spanChunks reads the chunk events of a span (both chunk event names) in
// time order; events without a timestamp are skipped.
func spanChunks(sp ptrace.Span) []chunk {
	var out []chunk
	for i := 0; i < sp.Events().Len(); i++ {
		ev := sp.Events().At(i)
		if (ev.Name() != semconv.EventChunk && ev.Name() != semconv.EventChunkLegacy) || ev.Timestamp() == 0 {
			continue
		}
		kind, _ := ev.Attributes().Get(semconv.AttrChunkKind)
		out = append(out, chunk{at: ev.Timestamp().AsTime(), reasoning: kind.Str() == semconv.ChunkKindReasoning})
	}
	slices.SortStableFunc(out, func(a, b chunk) int { return a.at.Compare(b.at) })
	return out
}

// timeline draws chunk arrivals in width cells from start to end (to the
// last chunk if it is later, or if the time after it is under 5 % of the
// whole). A gap between consecutive chunks longer than
// threshold (strictly, as the processor judges a stall) leaves its cells
// blank, and so does a silence longer than threshold between the last chunk
// and end (a call cancelled while stalled); a threshold of 0 marks neither.
// Without chunks the line is all waiting. It returns "" when width < 2 or
// there is nothing to draw (no chunk and end not after start).
func timeline(start, end time.Time, chunks []chunk, threshold time.Duration, width int) string {
	if width < 2 {
		return ""
	}
	if len(chunks) == 0 {
		if !end.After(start) {
			return ""
		}
		return strings.Repeat(string(cellWaiting), width)
	}
	last := chunks[len(chunks)-1].at
	if last.After(end) || 20*end.Sub(last) < end.Sub(start) {
		// A tail under 5 % of the call (the stream's closing frames) is not
		// drawn: the last chunk takes the last cell.
		end = last
	}
	span := end.Sub(start)
	cell := func(t time.Time) int {
		if span <= 0 || !t.After(start) {
			return 0
		}
		return min(width-1, int(int64(width-1)*int64(t.Sub(start))/int64(span)))
	}
	cells := make([]rune, width)
	first := cell(chunks[0].at)
	for i := range cells {
		if i < first {
			cells[i] = cellWaiting
		} else {
			cells[i] = cellQuiet
		}
	}
	stall := func(from, to time.Time, through int) {
		if threshold > 0 && to.Sub(from) > threshold {
			for c := cell(from) + 1; c < through; c++ {
				cells[c] = cellStall
			}
		}
	}
	for i := 1; i < len(chunks); i++ {
		stall(chunks[i-1].at, chunks[i].at, cell(chunks[i].at))
	}
	stall(last, end, width)
	for _, ch := range chunks {
		c := cell(ch.at)
		switch {
		case !ch.reasoning:
			cells[c] = cellAnswer
		case cells[c] != cellAnswer:
			cells[c] = cellReasoning
		}
	}
	return string(cells)
}

// spanTimeline is the timeline of an enriched span from its start to its
// end, at the stall threshold the processor wrote on it; "-" when there is
// nothing to draw.
func spanTimeline(sp ptrace.Span) string {
	var threshold time.Duration
	if v, ok := sp.Attributes().Get(semconv.AttrStallThresholdMs); ok {
		switch v.Type() {
		case pcommon.ValueTypeDouble:
			threshold = time.Duration(v.Double() * float64(time.Millisecond))
		case pcommon.ValueTypeInt:
			threshold = time.Duration(v.Int()) * time.Millisecond
		}
	}
	line := timeline(sp.StartTimestamp().AsTime(), sp.EndTimestamp().AsTime(), spanChunks(sp), threshold, timelineWidth)
	if line == "" {
		return "-"
	}
	return "|" + line + "|"
}

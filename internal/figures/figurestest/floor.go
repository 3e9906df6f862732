// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figurestest

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
)

// WriteFloor writes on span what the stall processor writes for its sorted
// chunk times, as the floor of the benchmarks that compare an implementation
// with the least any implementation pays: the stalls are known beforehand to
// follow the chunks stallAfter (1-based) instead of being looked for, and no
// seal is written. firstAnswer is the time of the first answer chunk;
// gen_ai.usage.output_tokens is read from the span. The stall processor's
// TestBaselineMatchesProcessor keeps it writing exactly what the processor
// writes.
func WriteFloor(span ptrace.Span, times []int64, firstAnswer int64, stallAfter []int, threshold time.Duration) {
	start := int64(span.StartTimestamp())
	first, last := times[0], times[len(times)-1]
	ttft := first - start
	var stallTotal, maxStall int64
	for _, after := range stallAfter {
		gap := times[after] - times[after-1]
		stallTotal += gap
		maxStall = max(maxStall, gap)
	}
	attrs := span.Attributes()
	attrs.EnsureCapacity(attrs.Len() + 15)
	attrs.PutInt(semconv.AttrChunkCount, int64(len(times)))
	attrs.PutDouble(semconv.AttrTTFTMs, figures.Millis(ttft))
	attrs.PutDouble(semconv.AttrTimeToFirstChunk, float64(ttft)/1e9)
	attrs.PutDouble(semconv.AttrGenerationMs, figures.Millis(last-first))
	attrs.PutDouble(semconv.AttrStallThresholdMs, figures.Millis(threshold.Nanoseconds()))
	attrs.PutDouble(semconv.AttrStallMs, figures.Millis(stallTotal))
	attrs.PutInt(semconv.AttrStallCount, int64(len(stallAfter)))
	attrs.PutDouble(semconv.AttrMaxStallMs, figures.Millis(maxStall))
	attrs.PutDouble(semconv.AttrActiveGenerationMs, figures.Millis(last-first-stallTotal))
	tokens, _ := attrs.Get(semconv.AttrUsageOutputTokens)
	attrs.PutDouble(semconv.AttrActiveTPS, float64(tokens.Int()-1)/(float64(last-first-stallTotal)/1e9))
	attrs.PutDouble(semconv.AttrTimeToFirstAnswerMs, figures.Millis(firstAnswer-start))
	events := span.Events()
	events.EnsureCapacity(events.Len() + len(stallAfter))
	for _, after := range stallAfter {
		ev := events.AppendEmpty()
		ev.SetName(semconv.EventStall)
		ev.SetTimestamp(pcommon.Timestamp(times[after-1]))
		evAttrs := ev.Attributes()
		evAttrs.EnsureCapacity(3)
		evAttrs.PutDouble(semconv.AttrStallEventDurationMs, figures.Millis(times[after]-times[after-1]))
		evAttrs.PutInt(semconv.AttrStallEventAfterChunk, int64(after))
		evAttrs.PutInt(semconv.AttrStallEventGaps, 1)
	}
}

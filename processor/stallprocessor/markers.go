// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallprocessor // import "github.com/streamstall/streamstall/processor/stallprocessor"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
)

// enrichFromMarkers derives the figures of a span without chunk evidence
// from its marker events (docs/contract.md section 4), and returns the
// first chunk time for hedge-outcome inference. A span without a
// first-chunk marker has its carried figures judged as before; one whose
// marker times are implausible loses its figures.
func (p *stallProcessor) enrichFromMarkers(s *scratch, span ptrace.Span, tally *batchTally) (first int64, hasChunk bool, err error) {
	hasStallEvents := s.chunks.StallEvents
	if p.markers == nil {
		p.checkCarried(span, hasStallEvents, tally)
		return 0, false, nil
	}
	m := &s.markers
	if implausible := p.markers.Read(span, m); implausible != nil {
		p.removeFigures(span, hasStallEvents, implausible, tally)
		return 0, false, nil
	}
	if !m.HasFirst {
		p.checkCarried(span, hasStallEvents, tally)
		return 0, false, nil
	}
	attrs := span.Attributes()
	figures.FillGenAI(attrs)
	if m.MarksFirstFrame(attrs) {
		writeFrameMarkers(attrs)
	} else {
		writeMarkerFigures(attrs, m.Derive())
	}
	if hasStallEvents {
		// Markers say nothing of stalls: no stall event stays.
		span.Events().RemoveIf(func(ev ptrace.SpanEvent) bool { return ev.Name() == semconv.EventStall })
	}
	tally.enriched++
	return m.First, true, nil
}

// writeMarkerFigures writes the marker figure set: llm.stream.evidence, and
// TTFT and wall generation when known. Every other figure is removed: markers
// measure no chunk count, no gap and no stall, and none is guessed.
func writeMarkerFigures(attrs pcommon.Map, f figures.MarkerFigures) {
	var produced figures.Set
	attrs.PutStr(semconv.AttrEvidence, semconv.EvidenceMarkers)
	produced.Add(figures.IdxEvidence)
	if f.HasTTFT {
		attrs.PutDouble(semconv.AttrTTFTMs, figures.Millis(f.TTFT))
		produced.Add(figures.IdxTTFTMs)
		if _, ok := attrs.Get(semconv.AttrTimeToFirstChunk); !ok {
			attrs.PutDouble(semconv.AttrTimeToFirstChunk, float64(f.TTFT)/1e9)
		}
	}
	if f.HasGeneration {
		attrs.PutDouble(semconv.AttrGenerationMs, figures.Millis(f.Generation))
		produced.Add(figures.IdxGenerationMs)
	}
	removeOtherFigures(attrs, produced)
}

// writeFrameMarkers writes the figure set of markers that mark the stream's
// first frame rather than its first content: llm.stream.evidence alone. The
// wait for the first content is unknown, and so is the wall clock from it.
func writeFrameMarkers(attrs pcommon.Map) {
	attrs.PutStr(semconv.AttrEvidence, semconv.EvidenceFrameMarkers)
	removeOtherFigures(attrs, figures.Set(1<<figures.IdxEvidence))
}

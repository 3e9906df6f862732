// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

// MarkerEventsConfig is the marker_events key of the stall processor: which
// span events mark the first chunk and the finish of a stream, on spans of
// instrumentations that record no event per chunk (docs/contract.md
// section 3). Such a span supports TTFT and the wall clock from its first
// chunk to its finish, and nothing about the gaps in between.
type MarkerEventsConfig struct {
	// FirstChunk are the event names that mark the first chunk; empty turns
	// marker evidence off.
	FirstChunk []string `mapstructure:"first_chunk"`
	// Finish are the event names that mark the end of the stream.
	Finish []string `mapstructure:"finish"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// DefaultMarkerEventsConfig is the marker_events default: the Vercel AI
// SDK's ai.stream.firstChunk and ai.stream.finish.
func DefaultMarkerEventsConfig() MarkerEventsConfig {
	return MarkerEventsConfig{FirstChunk: semconv.DefaultFirstChunkMarkerNames(), Finish: semconv.DefaultFinishMarkerNames()}
}

// Check returns an error for each problem of the configuration, named by
// its key under marker_events. chunkNames are chunk_events::names: an event
// is a chunk or a marker, never both.
func (c *MarkerEventsConfig) Check(chunkNames []string) []error {
	var errs []error
	if len(c.FirstChunk) == 0 && len(c.Finish) > 0 {
		errs = append(errs, errors.New("marker_events::finish: needs a first_chunk marker, the start of the wall clock it ends"))
	}
	check := func(key string, names, others []string, otherKey string) {
		for i, name := range names {
			switch {
			case name == "":
				errs = append(errs, fmt.Errorf("marker_events::%s[%d]: must not be empty", key, i))
			case name == semconv.EventStall || name == semconv.EventKeepalive:
				errs = append(errs, fmt.Errorf("marker_events::%s[%d]: %q is never a marker", key, i, name))
			case slices.Contains(chunkNames, name):
				errs = append(errs, fmt.Errorf("marker_events::%s[%d]: %q is a chunk_events name too", key, i, name))
			case slices.Contains(others, name):
				errs = append(errs, fmt.Errorf("marker_events::%s[%d]: %q is a %s marker too", key, i, name, otherKey))
			}
		}
	}
	check("first_chunk", c.FirstChunk, c.Finish, "finish")
	check("finish", c.Finish, nil, "")
	return errs
}

// MarkerReader selects the marker events of spans and judges their times
// with the rules of chunk times (ChunkReader.Judge). It holds no per-span
// state and is safe for concurrent use.
type MarkerReader struct {
	first, finish nameSet
	chunks        *ChunkReader
}

// NewMarkerReader returns the reader of a checked configuration, or nil
// when it has no first_chunk marker: marker evidence is off.
func NewMarkerReader(cfg MarkerEventsConfig, chunks *ChunkReader) *MarkerReader {
	if len(cfg.FirstChunk) == 0 {
		return nil
	}
	return &MarkerReader{first: newNameSet(cfg.FirstChunk), finish: newNameSet(cfg.Finish), chunks: chunks}
}

// Markers is the marker evidence of one span. Its buffer is reused from span
// to span.
type Markers struct {
	// HasFirst says whether a first-chunk marker with a time was found;
	// First is the earliest (unix nanoseconds).
	HasFirst bool
	First    int64
	// HasFinish says whether a finish marker with a time was found; Finish
	// is the latest.
	HasFinish bool
	Finish    int64

	// firstFrame says the earliest first-chunk marker is one that marks
	// the stream's first frame by its name (OpenInference's).
	firstFrame bool

	judged Chunks
}

// Read selects the marker events of span into m and judges them. A span
// without a first-chunk marker that has a time (a finish alone marks no
// stream) has no marker evidence: m.HasFirst is false and the error nil.
// The error wraps ErrImplausible when a marker time is past the year 2262,
// the finish precedes the first chunk, or the times break a rule of
// ChunkReader.Judge (outside the span beyond ClockSkew, longer than
// max_duration).
func (r *MarkerReader) Read(span ptrace.Span, m *Markers) error {
	m.HasFirst, m.First, m.HasFinish, m.Finish, m.firstFrame = false, 0, false, 0, false
	overflow := 0
	for _, ev := range span.Events().All() {
		name := ev.Name()
		isFirst := r.first.contains(name)
		if !isFirst && !r.finish.contains(name) {
			continue
		}
		ts := ev.Timestamp()
		switch {
		case ts == 0:
			continue
		case ts > math.MaxInt64:
			overflow++
			continue
		}
		t := int64(ts)
		if isFirst {
			if !m.HasFirst || t < m.First {
				m.HasFirst, m.First = true, t
				m.firstFrame = name == semconv.EventOpenInferenceFirstToken
			}
		} else if !m.HasFinish || t > m.Finish {
			m.HasFinish, m.Finish = true, t
		}
	}
	if overflow > 0 {
		return fmt.Errorf("%w: %d marker times past the year 2262", ErrImplausible, overflow)
	}
	if !m.HasFirst {
		return nil
	}
	m.judged.Reset()
	m.judged.Times = append(m.judged.Times, m.First)
	if m.HasFinish {
		if m.Finish < m.First {
			return fmt.Errorf("%w: the finish marker %v before the first chunk", ErrImplausible, time.Duration(m.First-m.Finish))
		}
		m.judged.Times = append(m.judged.Times, m.Finish)
	}
	return r.chunks.Judge(span, &m.judged)
}

// MarksFirstFrame reports whether the marker events m read of a span with
// these attributes mark its first frame, not its first content:
// OpenInference's first-token event fires on the first streamed item, and
// the Vercel AI SDK's Responses providers (ai.model.provider
// openai.responses) fire ai.stream.firstChunk on response.created; both are
// sent before the TTFT wait.
func (m *Markers) MarksFirstFrame(attrs pcommon.Map) bool {
	if m.firstFrame {
		return true
	}
	v, ok := attrs.Get(semconv.AttrVercelModelProvider)
	return ok && v.Type() == pcommon.ValueTypeStr && strings.HasSuffix(v.Str(), semconv.VercelResponsesProviderSuffix)
}

// MarkerFigures are the figures marker evidence supports (docs/contract.md
// section 4). Durations are nanoseconds.
type MarkerFigures struct {
	// HasTTFT is false when the span start is unknown or the first chunk
	// precedes it (clock skew).
	HasTTFT bool
	TTFT    int64
	// HasGeneration is true with a finish marker; Generation is the wall
	// clock from the first chunk to the finish.
	HasGeneration bool
	Generation    int64
}

// Derive computes the figures of marker evidence that Read judged
// plausible. It needs m.HasFirst.
func (m *Markers) Derive() MarkerFigures {
	var f MarkerFigures
	if start := m.judged.start; start > 0 && m.First >= start {
		f.HasTTFT, f.TTFT = true, m.First-start
	}
	if m.HasFinish {
		f.HasGeneration, f.Generation = true, m.Finish-m.First
	}
	return f
}

// MarkerSet is the figure set of marker evidence: llm.stream.evidence with
// ttft_ms and generation_ms.
const MarkerSet = Set(1<<IdxEvidence | 1<<IdxTTFTMs | 1<<IdxGenerationMs)

// checkMarkers checks a figure set that says it was derived from markers:
// nothing but MarkerSet, no llm.stream.stall event, no negative or
// non-finite duration. No stall figure is derived from markers, so none may
// come with them.
func (r *Reported) checkMarkers() error {
	if err := r.checkOnly(MarkerSet, semconv.EvidenceMarkers); err != nil {
		return err
	}
	for _, i := range []int{IdxTTFTMs, IdxGenerationMs} {
		if v := r.floats[i]; r.Has(i) && (!(v >= 0) || math.IsInf(v, 1)) {
			return fmt.Errorf("%s: %v is not a finite, non-negative value", attributeNames[i], v)
		}
	}
	return nil
}

// checkOnly checks that a set of the evidence named holds no figure outside
// allowed and no llm.stream.stall event: no stall figure comes with it.
func (r *Reported) checkOnly(allowed Set, evidence string) error {
	for i := range numAttributes {
		if r.Has(i) && !allowed.Has(i) {
			return fmt.Errorf("%s: present in a figure set derived from %s (%s = %s)", attributeNames[i], evidence, semconv.AttrEvidence, evidence)
		}
	}
	if r.stallEvents > 0 {
		return fmt.Errorf("%s events: present in a figure set derived from %s", semconv.EventStall, evidence)
	}
	return nil
}

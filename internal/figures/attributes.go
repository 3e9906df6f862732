// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"strings"

	"github.com/streamstall/streamstall/internal/semconv"
)

// The figure attributes: every span attribute the stall processor derives
// from chunk evidence, and only it writes. Attributes written by others are
// not figures, even under llm.stream.* (the proxy's
// llm.stream.oversized_frames), nor is gen_ai.response.time_to_first_chunk,
// which an instrumentation may write itself, nor any llm.hedge.* attribute.
const (
	IdxChunkCount = iota
	IdxTTFTMs
	IdxGenerationMs
	IdxStallThresholdMs
	IdxStallMs
	IdxStallCount
	IdxMaxStallMs
	IdxActiveGenerationMs
	IdxBurst
	IdxActiveTPS
	IdxStallEventsDropped
	IdxTimeToFirstAnswerMs
	IdxReasoningMs
	IdxReasoningChunkCount
	IdxEvidence
	IdxStallCutMs
	IdxSeal
	numAttributes
)

var attributeNames = [numAttributes]string{
	IdxChunkCount:          semconv.AttrChunkCount,
	IdxTTFTMs:              semconv.AttrTTFTMs,
	IdxGenerationMs:        semconv.AttrGenerationMs,
	IdxStallThresholdMs:    semconv.AttrStallThresholdMs,
	IdxStallMs:             semconv.AttrStallMs,
	IdxStallCount:          semconv.AttrStallCount,
	IdxMaxStallMs:          semconv.AttrMaxStallMs,
	IdxActiveGenerationMs:  semconv.AttrActiveGenerationMs,
	IdxBurst:               semconv.AttrBurst,
	IdxActiveTPS:           semconv.AttrActiveTPS,
	IdxStallEventsDropped:  semconv.AttrStallEventsDropped,
	IdxTimeToFirstAnswerMs: semconv.AttrTimeToFirstAnswerMs,
	IdxReasoningMs:         semconv.AttrReasoningMs,
	IdxReasoningChunkCount: semconv.AttrReasoningChunkCount,
	IdxEvidence:            semconv.AttrEvidence,
	IdxStallCutMs:          semconv.AttrStallCutMs,
	IdxSeal:                semconv.AttrFiguresSeal,
}

// IntervalFigures are the figures present exactly when a span has two chunks
// or more.
const IntervalFigures = Set(1<<IdxGenerationMs | 1<<IdxStallThresholdMs | 1<<IdxStallMs |
	1<<IdxStallCount | 1<<IdxMaxStallMs | 1<<IdxActiveGenerationMs)

// Set is a set of figure attributes, by index.
type Set uint32

// Add adds the figure of index i.
func (s *Set) Add(i int) { *s |= 1 << i }

// Has reports whether the figure of index i is in the set.
func (s Set) Has(i int) bool { return s&(1<<i) != 0 }

// AttributeNames returns the names of every figure attribute (a copy).
func AttributeNames() []string { return append([]string(nil), attributeNames[:]...) }

// AttributeIndex returns the index of a figure attribute; ok is false for
// any other name. It costs a prefix comparison for most names, and one
// string comparison for almost every figure (those of its length).
func AttributeIndex(name string) (i int, ok bool) {
	if len(name) >= len(attributesByLength) || !strings.HasPrefix(name, semconv.StreamNamespace) {
		return 0, false
	}
	for _, i := range attributesByLength[len(name)] {
		if attributeNames[i] == name {
			return int(i), true
		}
	}
	return 0, false
}

// attributesByLength are the indexes of the figure attributes by the
// length of their names.
var attributesByLength = func() (byLength [64][]uint8) {
	for i, n := range attributeNames {
		byLength[len(n)] = append(byLength[len(n)], uint8(i))
	}
	return byLength
}()

// IsAttribute reports whether name is a figure attribute: one only the stall
// processor writes.
func IsAttribute(name string) bool {
	_, ok := AttributeIndex(name)
	return ok
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/hedgecore"
	"github.com/streamstall/streamstall/internal/semconv"
)

// DefaultMaxChunkEvents is the default of the receiver's max_chunk_events
// (hedgecore.DefaultMaxChunkEvents).
const DefaultMaxChunkEvents = hedgecore.DefaultMaxChunkEvents

// DefaultKeepGapsAbove is the default of the receiver's keep_gaps_above
// (hedgecore.DefaultKeepGapsAbove).
const DefaultKeepGapsAbove = hedgecore.DefaultKeepGapsAbove

// Keeper bounds the chunk events of one stream (hedgecore.Keeper, the one
// elision of every emitter).
type Keeper = hedgecore.Keeper

// KeptChunk is a chunk event a Keeper keeps.
type KeptChunk = hedgecore.KeptChunk

// NewKeeper returns a keeper of at most maxEvents chunk events that keeps
// the chunks of gaps above keepGapsAbove once it elides.
func NewKeeper(maxEvents int, keepGapsAbove time.Duration) *Keeper {
	return hedgecore.NewKeeper(maxEvents, keepGapsAbove)
}

// AppendChunkEvents appends the chunks k kept to events as chunk events:
// each with its kind (when the emitter classified it) and the counts of the
// chunks elided before it.
func AppendChunkEvents(k *Keeper, events ptrace.SpanEventSlice) {
	kept := k.Chunks()
	events.EnsureCapacity(events.Len() + len(kept))
	for _, c := range kept {
		ev := events.AppendEmpty()
		ev.SetName(semconv.EventChunk)
		ev.SetTimestamp(pcommon.Timestamp(c.At))
		attrs := ev.Attributes()
		if c.Kind != "" {
			attrs.PutStr(semconv.AttrChunkKind, c.Kind)
		}
		if c.Elided > 0 {
			attrs.PutInt(semconv.AttrChunkElided, c.Elided)
		}
		if c.ElidedReasoning > 0 {
			attrs.PutInt(semconv.AttrChunkElidedReasoning, c.ElidedReasoning)
		}
	}
}

// PutElision writes what a span says of the chunks k elided, when it
// elided any: how many, and the gap above which both chunks were kept.
func PutElision(k *Keeper, attrs pcommon.Map) {
	if n := k.Elided(); n > 0 {
		attrs.PutInt(semconv.AttrChunkEventsElided, n)
		attrs.PutDouble(semconv.AttrChunkEventsKeepGapsAboveMs, Millis(k.KeepGapsAbove().Nanoseconds()))
	}
}

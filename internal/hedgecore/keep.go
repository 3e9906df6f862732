// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

import (
	"math"
	"time"

	"github.com/streamstall/streamstall/internal/semconv"
)

// DefaultMaxChunkEvents is the default of the receiver's max_chunk_events:
// the chunk events one span keeps at most. A chunk event costs about 80
// bytes of OTLP (160 with the elision counts), so a span of 2048 stays
// under 350 KiB, far below the 4 MiB a default gRPC receiver takes.
const DefaultMaxChunkEvents = 2048

// DefaultKeepGapsAbove is the default of the receiver's keep_gaps_above:
// the stall processor's default stall_threshold. It must be at most the
// smallest stall threshold in use for the figures of elided spans to be
// exact at that threshold.
const DefaultKeepGapsAbove = 2 * time.Second

// KeptChunk is a chunk event a Keeper keeps, with the chunks it elided just
// before it.
type KeptChunk struct {
	// At is the chunk's arrival, unix nanoseconds.
	At int64
	// Kind is its llm.stream.chunk.kind, as the emitter classified it.
	Kind string
	// Elided counts the chunks elided between the previous kept chunk and
	// this one; ElidedReasoning the reasoning chunks among them.
	Elided, ElidedReasoning int64

	reasoning bool
	special   bool // the first chunk, or the first of its kind
	must      bool // special, or next to a gap above the keeper's threshold
}

// Keeper bounds the chunk events of one stream while keeping its figures
// exact (docs/contract.md section 3): the one elision of every emitter of
// chunk events, the receiver's proxy and ingest endpoint and the hedging
// client alike. Below max events it keeps every
// chunk. At the bound it elides: it keeps the first chunk, the first
// answer and the first reasoning chunk, the last chunk, and both chunks of
// every gap longer than keep_gaps_above, and counts the elided chunks on
// the kept chunk that follows them. It decides online, with one pending
// chunk (the last one, whose next gap is not known yet). When even those
// chunks exceed the bound (more long gaps than it holds), it doubles the
// gap it keeps until they fit: the span then says the larger gap, and its
// figures are exact for stall thresholds at least that long. Memory is
// bounded by max events whatever the stream's length.
type Keeper struct {
	max        int
	configured int64 // keep_gaps_above, nanoseconds
	gapsAbove  int64 // in force; -1 keeps every chunk (below the bound)
	chunks     []KeptChunk
	total      int64
	seenAnswer bool
	seenReason bool
}

// NewKeeper returns a keeper of at most maxEvents chunk events (at least 4:
// the first, first answer, first reasoning and last chunk) that keeps the
// chunks of gaps above keepGapsAbove once it elides.
func NewKeeper(maxEvents int, keepGapsAbove time.Duration) *Keeper {
	return &Keeper{max: max(maxEvents, 4), configured: max(keepGapsAbove.Nanoseconds(), 0), gapsAbove: -1}
}

// Add counts one chunk, in arrival order.
func (k *Keeper) Add(at int64, kind string) {
	c := KeptChunk{At: at, Kind: kind, reasoning: kind == semconv.ChunkKindReasoning}
	if k.total == 0 {
		c.special = true
	}
	if c.reasoning && !k.seenReason {
		c.special, k.seenReason = true, true
	}
	if !c.reasoning && !k.seenAnswer {
		c.special, k.seenAnswer = true, true
	}
	c.must = c.special
	k.total++
	if n := len(k.chunks); n > 0 {
		prev := &k.chunks[n-1]
		if gap := at - prev.At; gap > k.gapsAbove || gap < 0 {
			// A long gap keeps both its chunks; so does time going back
			// (a stepped clock), so that no elided run hides it.
			prev.must, c.must = true, true
		} else if !prev.must {
			c.Elided, c.ElidedReasoning = prev.Elided+1, prev.ElidedReasoning+b2i(prev.reasoning)
			k.chunks = k.chunks[:n-1]
		}
	}
	k.chunks = append(k.chunks, c)
	if len(k.chunks) > k.max {
		k.compact()
	}
}

// compact elides what the gap in force allows, raising that gap until at
// most three quarters of the bound are kept, so that compacting stays rare.
func (k *Keeper) compact() {
	if k.gapsAbove < 0 {
		k.gapsAbove = k.configured
	} else {
		k.gapsAbove = nextGap(k.gapsAbove)
	}
	for {
		k.elide()
		if len(k.chunks) <= k.max*3/4 || k.gapsAbove == math.MaxInt64 {
			return
		}
		k.gapsAbove = nextGap(k.gapsAbove)
	}
}

func nextGap(g int64) int64 {
	switch {
	case g < int64(time.Millisecond):
		return int64(time.Millisecond)
	case g > math.MaxInt64/2:
		return math.MaxInt64
	default:
		return 2 * g
	}
}

// elide rejudges every kept chunk under the gap in force and removes those
// it no longer needs, in place. The last chunk stays pending.
func (k *Keeper) elide() {
	cs := k.chunks
	n := len(cs)
	for i := range cs {
		c := &cs[i]
		c.must = c.special ||
			(i > 0 && c.Elided == 0 && k.long(cs[i-1].At, c.At)) ||
			(i+1 < n && cs[i+1].Elided == 0 && k.long(c.At, cs[i+1].At))
	}
	out := cs[:0]
	var carried, carriedReasoning int64
	for i := range cs {
		c := cs[i]
		if !c.must && i+1 < n {
			carried += c.Elided + 1
			carriedReasoning += c.ElidedReasoning + b2i(c.reasoning)
			continue
		}
		c.Elided += carried
		c.ElidedReasoning += carriedReasoning
		carried, carriedReasoning = 0, 0
		out = append(out, c)
	}
	clear(cs[len(out):])
	k.chunks = out
}

func (k *Keeper) long(from, to int64) bool {
	gap := to - from
	return gap > k.gapsAbove || gap < 0
}

// Chunks returns the kept chunks in arrival order; the slice is the
// keeper's own, valid until the next Add.
func (k *Keeper) Chunks() []KeptChunk { return k.chunks }

// Total is the number of chunks added, kept or elided.
func (k *Keeper) Total() int64 { return k.total }

// Elided is the number of chunks elided.
func (k *Keeper) Elided() int64 { return k.total - int64(len(k.chunks)) }

// KeepGapsAbove is the gap above which both chunks were kept: the
// configured keep_gaps_above, or more when the stream had more long gaps
// than max events hold. It is meaningful when Elided is not zero.
func (k *Keeper) KeepGapsAbove() time.Duration { return time.Duration(max(k.gapsAbove, 0)) }

// Reset empties k for another stream, keeping its buffer.
func (k *Keeper) Reset() {
	*k = Keeper{max: k.max, configured: k.configured, gapsAbove: -1, chunks: k.chunks[:0]}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

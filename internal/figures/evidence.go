// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

// ClockSkew is how far a chunk time may lie before its span's start or after
// its end and still be a time of that span (docs/contract.md section 3). The
// span and its chunk events are stamped by one process, but often from
// separate clock reads (a span start taken before the request is written,
// chunk times from a reader goroutine, wall clock stepped by NTP): a few
// milliseconds apart, never a second. Past it, the times are not of one
// stream.
const ClockSkew = time.Second

// DefaultMaxDuration is the default of chunk_events::max_duration: the
// longest a stream may run, from its span start (or first chunk) to its last
// chunk. Streaming LLM calls last seconds to minutes; an hour is far past
// any of them and far below the years a broken clock gives.
const DefaultMaxDuration = time.Hour

// ErrImplausible is wrapped by the errors of chunk times or figures no
// stream can have: outside their span, or longer than max_duration. Callers
// tell it apart from an inconsistent figure set to count it separately.
var ErrImplausible = errors.New("implausible stream times")

// ChunkEventsConfig is the chunk_events key of the stall processor, the
// stall_metrics connector and the hedge_advisor exporter: which span events
// are content chunks, and how long a stream may be. The three components
// read chunk evidence with it through one ChunkReader, so that with the same
// configuration they select the same chunks and refuse the same spans.
type ChunkEventsConfig struct {
	// Names are the span event names of content chunks.
	Names []string `mapstructure:"names"`
	// MaxDuration bounds a stream: a span whose chunks run longer (from its
	// start, or its first chunk when that comes first) is implausible.
	MaxDuration time.Duration `mapstructure:"max_duration"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// DefaultChunkEventsConfig is the chunk_events default of every component.
func DefaultChunkEventsConfig() ChunkEventsConfig {
	return ChunkEventsConfig{Names: semconv.DefaultChunkEventNames(), MaxDuration: DefaultMaxDuration}
}

// Check returns an error for each problem of the configuration, named by
// its key under chunk_events.
func (c *ChunkEventsConfig) Check() []error {
	var errs []error
	if len(c.Names) == 0 {
		errs = append(errs, errors.New("chunk_events::names: must name at least one chunk event"))
	}
	for i, name := range c.Names {
		switch name {
		case "":
			errs = append(errs, fmt.Errorf("chunk_events::names[%d]: must not be empty", i))
		case semconv.EventStall, semconv.EventKeepalive:
			// Counting these as chunks would break idempotency (stall events)
			// or the rule that a keepalive never resets a stall (docs/contract.md section 3).
			errs = append(errs, fmt.Errorf("chunk_events::names[%d]: %q is never a content chunk", i, name))
		}
	}
	if c.MaxDuration <= 0 {
		errs = append(errs, fmt.Errorf("chunk_events::max_duration: must be positive, got %v", c.MaxDuration))
	}
	return errs
}

// ChunkReader selects the chunk events of spans and judges their times: the
// one reading of chunk evidence. It holds no per-span state and is safe for
// concurrent use; the state of one span is in a Chunks.
type ChunkReader struct {
	names       nameSet
	maxDuration int64
}

// NewChunkReader returns the reader of a checked configuration.
func NewChunkReader(cfg ChunkEventsConfig) *ChunkReader {
	return &ChunkReader{names: newNameSet(cfg.Names), maxDuration: cfg.MaxDuration.Nanoseconds()}
}

// IsChunk reports whether an event of this name is a chunk event. Callers
// that select chunks further (the processor's OTTL conditions) call Add for
// the events they keep, then Judge.
func (r *ChunkReader) IsChunk(name string) bool { return r.names.contains(name) }

// MaxDuration is the bound of chunk_events::max_duration.
func (r *ChunkReader) MaxDuration() time.Duration { return time.Duration(r.maxDuration) }

// Read selects the chunk events of span by name into c and judges them.
// A span without a usable chunk event leaves c.Times empty and is not
// implausible: it has no chunk evidence.
func (r *ChunkReader) Read(span ptrace.Span, c *Chunks) error {
	c.Reset()
	for _, ev := range span.Events().All() {
		if name := ev.Name(); r.names.contains(name) {
			c.Add(ev)
		} else if name == semconv.EventStall {
			c.StallEvents = true
		}
	}
	return r.Judge(span, c)
}

// Judge sorts the chunk times added to c and checks them against span; the
// error wraps ErrImplausible. The span start is known when it is set and
// fits the signed nanoseconds of the figures, its end likewise:
//   - a chunk time past the year 2262 (above MaxInt64 ns) is no time;
//   - a chunk more than ClockSkew before a known start, or after a known
//     end, is not of this span;
//   - from the known start, or the first chunk when that is earlier or the
//     start is unknown, to the last chunk is at most max_duration.
func (r *ChunkReader) Judge(span ptrace.Span, c *Chunks) error {
	if c.unsorted {
		slices.Sort(c.Times)
		c.unsorted = false
	}
	c.start = knownTime(span.StartTimestamp())
	if c.overflow > 0 {
		return fmt.Errorf("%w: %d chunk times past the year 2262", ErrImplausible, c.overflow)
	}
	n := len(c.Times)
	if n == 0 {
		return nil
	}
	first, last := c.Times[0], c.Times[n-1]
	skew := ClockSkew.Nanoseconds()
	if c.start > 0 && c.start-first > skew {
		return fmt.Errorf("%w: a chunk %v before the span start", ErrImplausible, time.Duration(c.start-first))
	}
	if end := knownTime(span.EndTimestamp()); end > 0 && last-end > skew {
		return fmt.Errorf("%w: a chunk %v after the span end", ErrImplausible, time.Duration(last-end))
	}
	from := first
	if c.start > 0 {
		from = min(from, c.start)
	}
	if d := last - from; d > r.maxDuration {
		return fmt.Errorf("%w: the chunks run %v, more than max_duration %v", ErrImplausible, time.Duration(d), r.MaxDuration())
	}
	return nil
}

// CheckFigures reports whether a figure set carried without chunk evidence
// could have come from the stall processor under this configuration: it is
// consistent (Reported.Check), and its stream, ttft_ms + generation_ms (0
// for an absent one), is at most max_duration (the error then wraps
// ErrImplausible). In a consistent set every other duration figure is
// bounded by these two.
func (r *ChunkReader) CheckFigures(rep *Reported) error {
	if err := rep.Check(); err != nil {
		return err
	}
	if d := rep.Float(IdxTTFTMs) + rep.Float(IdxGenerationMs); d > Millis(r.maxDuration) {
		return fmt.Errorf("%w: %s + %s is %v ms, more than max_duration %v", ErrImplausible, semconv.AttrTTFTMs, semconv.AttrGenerationMs, d, r.MaxDuration())
	}
	return nil
}

// knownTime is t as signed nanoseconds, or 0 when t is unset or does not
// fit them.
func knownTime(t pcommon.Timestamp) int64 {
	if t > math.MaxInt64 {
		return 0
	}
	return int64(t)
}

// Chunks is the chunk evidence of one span: its chunk times, sorted once
// judged, and the summary of their kinds. Its buffer is reused from span to
// span, so that reading allocates nothing once it has grown.
type Chunks struct {
	// Times are the chunk times, unix nanoseconds, ascending once judged;
	// zero (unset) times are left out.
	Times []int64
	// Kinds summarizes the chunk kinds.
	Kinds Kinds
	// StallEvents says whether Read saw an llm.stream.stall event.
	StallEvents bool

	start    int64
	last     int64
	unsorted bool
	overflow int
}

// Reset empties c for the next span, keeping its buffer.
func (c *Chunks) Reset() {
	*c = Chunks{Times: c.Times[:0]}
}

// Add counts ev as a chunk: its time, unless unset, and its kind. A chunk
// carries a reasoning delta when its llm.stream.chunk.kind is the string
// reasoning; any other value, of any type, or none, is an answer chunk
// (docs/contract.md section 3).
func (c *Chunks) Add(ev ptrace.SpanEvent) {
	ts := ev.Timestamp()
	switch {
	case ts == 0:
		return
	case ts > math.MaxInt64:
		c.overflow++
		return
	}
	t := int64(ts)
	c.unsorted = c.unsorted || t < c.last
	c.last = t
	c.Times = append(c.Times, t)
	kind, ok := ev.Attributes().Get(semconv.AttrChunkKind)
	c.Kinds.Add(t, ok && kind.Type() == pcommon.ValueTypeStr && kind.Str() == semconv.ChunkKindReasoning)
}

// Derive computes the figures of judged evidence with the stall threshold
// in nanoseconds; stalls are appended to stalls[:0]. An unknown span start
// (unset, or past 2262) makes TTFT and TTFA unknown, not the age of the
// epoch.
func (c *Chunks) Derive(threshold int64, stalls []Stall) (Figures, Reasoning) {
	f := Derive(c.start, c.Times, threshold, stalls)
	r := DeriveReasoning(c.start, c.Kinds)
	if c.start == 0 {
		f.HasTTFT, f.TTFT = false, 0
		r.HasTTFA, r.TTFA = false, 0
	}
	return f, r
}

// Gaps appends the gaps between consecutive chunks of judged evidence to
// dst[:0].
func (c *Chunks) Gaps(dst []int64) []int64 {
	dst = dst[:0]
	for i := 1; i < len(c.Times); i++ {
		dst = append(dst, c.Times[i]-c.Times[i-1])
	}
	return dst
}

// nameSet is the set of chunk event names. The usual configuration has two
// names, where comparing strings beats hashing them; a map takes over for
// long lists.
type nameSet struct {
	few  []string
	many map[string]struct{}
}

const nameSetLinearMax = 8

func newNameSet(names []string) nameSet {
	if len(names) <= nameSetLinearMax {
		return nameSet{few: slices.Clone(names)}
	}
	many := make(map[string]struct{}, len(names))
	for _, n := range names {
		many[n] = struct{}{}
	}
	return nameSet{many: many}
}

func (s nameSet) contains(name string) bool {
	if s.many != nil {
		_, ok := s.many[name]
		return ok
	}
	for _, n := range s.few {
		if n == name {
			return true
		}
	}
	return false
}

// Refusals counts the spans whose figures a component refused, by reason.
type Refusals struct {
	// Inconsistent counts figure sets that fail Reported.Check;
	// Implausible, times or figures that wrap ErrImplausible.
	Inconsistent, Implausible int64
}

// Count counts the refusal err and returns its reason, for a log line.
func (r *Refusals) Count(err error) (reason string) {
	if errors.Is(err, ErrImplausible) {
		r.Implausible++
		return "implausible stream times"
	}
	r.Inconsistent++
	return "inconsistent stream figures"
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
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
	// selection is the set of names, sorted and joined: two readers with
	// the same selection take the same events for chunks.
	selection string
}

// NewChunkReader returns the reader of a checked configuration.
func NewChunkReader(cfg ChunkEventsConfig) *ChunkReader {
	names := slices.Compact(slices.Sorted(slices.Values(cfg.Names)))
	return &ChunkReader{names: newNameSet(cfg.Names), maxDuration: cfg.MaxDuration.Nanoseconds(), selection: strings.Join(names, "\x00")}
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
	for i, ev := range span.Events().All() {
		if name := ev.Name(); r.names.contains(name) {
			n := len(c.Times)
			c.Add(ev)
			if len(c.Times) > n {
				if n == 0 {
					c.firstEvent = i
				}
				c.lastEvent = i
			}
		} else if name == semconv.EventStall {
			c.StallEvents = true
		}
	}
	c.inOrder = !c.unsorted
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
	c.derived.valid = false
	if c.unsorted {
		if c.elision {
			sort.Stable(byTime{c})
		} else {
			slices.Sort(c.Times)
		}
		c.unsorted = false
	}
	c.start = knownTime(span.StartTimestamp())
	c.end = knownTime(span.EndTimestamp())
	c.readStreamMarks(span.Attributes())
	if c.overflow > 0 {
		return fmt.Errorf("%w: %d chunk times past the year 2262", ErrImplausible, c.overflow)
	}
	if err := c.judgeElided(span); err != nil {
		return err
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
	if end := c.end; end > 0 && last-end > skew {
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
	// Times are the times of the chunk events, unix nanoseconds, ascending
	// once judged; zero (unset) times are left out. With elided chunks
	// (Elided > 0) they are the kept chunks only.
	Times []int64
	// Kinds summarizes the kinds of the chunk events.
	Kinds Kinds
	// StallEvents says whether Read saw an llm.stream.stall event.
	StallEvents bool
	// Elided counts the chunks the receiver elided (docs/contract.md
	// section 3), ElidedReasoning the reasoning chunks among them.
	Elided, ElidedReasoning int64

	start    int64
	last     int64
	unsorted bool
	overflow int
	// runs[i] are the chunks elided just before Times[i], once an event
	// said it elided any (elision).
	runs          []elidedRun
	elision       bool
	badElision    string
	keepGapsAbove int64

	end int64
	// bare counts the chunk events without any attribute; frames is set
	// when every chunk event is one of an instrumentation that records one
	// per frame (EvidenceFrames), and skip is then the opening frames left
	// out of the figures.
	bare   int
	frames bool
	skip   int
	// cut is the silence a stall cut ended the stream in, 0 when none.
	cut int64
	// derived are the figures of the last Derive.
	derived derivedFigures
	// inOrder is set by Read when the chunk events came in time order:
	// firstEvent and lastEvent are then the event indexes of the first and
	// last chunk time, which a Handoff checks the span against.
	inOrder               bool
	firstEvent, lastEvent int
}

type elidedRun struct{ elided, reasoning int64 }

// MaxChunkCount bounds the chunks a span may count, kept and elided: far
// above any stream (a chunk per microsecond for max_duration is 3.6e9),
// far below where the counts' sums could overflow.
const MaxChunkCount = 1 << 40

// Reset empties c for the next span, keeping its buffers.
func (c *Chunks) Reset() {
	*c = Chunks{Times: c.Times[:0], runs: c.runs[:0], derived: derivedFigures{stalls: c.derived.stalls[:0]}}
}

// Count is the number of chunks the figures count: the chunk events and
// the chunks elided between them, less the opening frames of frame
// evidence.
func (c *Chunks) Count() int64 { return int64(len(c.Times)-c.skip) + c.Elided }

// First is the first chunk the figures count (valid when Count > 0): the
// first chunk event, or the first frame after the opening burst.
func (c *Chunks) First() int64 { return c.Times[c.skip] }

// Frames reports whether judged evidence is one event per frame, content
// or not (semconv.EvidenceFrames): its TTFT is unknown.
func (c *Chunks) Frames() bool { return c.frames }

// Cut is the silence a stall cut ended the stream of judged evidence in
// (nanoseconds), 0 when no cut did.
func (c *Chunks) Cut() int64 { return c.cut }

// readStreamMarks reads what the span says of its stream as a whole, with
// the chunk times added: whether a stall cut ended it (error.type
// stall_timeout with the llm.stream.stall_timeout_ms it was watched with,
// as the proxy's guard and the hedging client write them), and whether its
// chunk events are one per frame (OpenLLMetry: llm.is_streaming, and chunk
// events that carry nothing).
func (c *Chunks) readStreamMarks(attrs pcommon.Map) {
	c.frames, c.skip, c.cut = false, 0, 0
	n := len(c.Times)
	if n == 0 {
		return
	}
	if c.bare == n && !c.elision {
		if v, ok := attrs.Get(semconv.AttrOpenLLMetryIsStreaming); ok && v.Type() == pcommon.ValueTypeBool && v.Bool() {
			c.frames, c.skip = true, openingFrames(c.Times)
		}
	}
	if last := c.Times[n-1]; c.end > last && isStallCut(attrs) {
		c.cut = c.end - last
	}
}

// isStallCut reports whether attrs carry the marks of a stream a stall cut
// ended.
func isStallCut(attrs pcommon.Map) bool {
	v, ok := attrs.Get(semconv.AttrErrorType)
	if !ok || v.Type() != pcommon.ValueTypeStr || v.Str() != semconv.ErrorTypeStallTimeout {
		return false
	}
	t, ok := attrs.Get(semconv.AttrStallTimeoutMs)
	return ok && t.Type() == pcommon.ValueTypeDouble && t.Double() > 0 && !math.IsInf(t.Double(), 1)
}

// openingFrames is the number of frames of the opening burst: the first
// frame and every one that followed it within burstGapNanos. An API sends
// its opening frames (a role, response.created) at once, before the TTFT
// wait; content that came in the same burst cannot be told from them, and
// is left out too. The last frame is always kept.
func openingFrames(times []int64) int {
	if len(times) < 2 {
		return 0
	}
	k := 1
	for k < len(times)-1 && times[k]-times[k-1] < burstGapNanos {
		k++
	}
	return k
}

// Add counts ev as a chunk: its time, unless unset, and its kind. A chunk
// carries a reasoning delta when its llm.stream.chunk.kind is the string
// reasoning; any other value, of any type, or none, is an answer chunk
// (docs/contract.md section 3).
func (c *Chunks) Add(ev ptrace.SpanEvent) {
	c.derived.valid = false
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
	reasoning := false
	var run elidedRun
	elision := false
	attrs := ev.Attributes()
	switch attrs.Len() {
	case 0:
		c.bare++
	case 1:
		// The usual chunk event carries its kind alone.
		if r, ok := singleKind(attrs); ok {
			reasoning = r
			break
		}
		fallthrough
	default:
		// One pass over the event's attributes: a chunk event carries its
		// kind and, when chunks were elided before it, their counts.
		for k, v := range attrs.All() {
			switch k {
			case semconv.AttrChunkKind:
				reasoning = v.Type() == pcommon.ValueTypeStr && v.Str() == semconv.ChunkKindReasoning
			case semconv.AttrChunkElided:
				run.elided, elision = c.elisionCount(v, k), true
			case semconv.AttrChunkElidedReasoning:
				run.reasoning, elision = c.elisionCount(v, k), true
			}
		}
	}
	c.Kinds.Add(t, reasoning)
	if elision && !c.elision {
		c.elision = true
		c.runs = append(c.runs[:0], make([]elidedRun, len(c.Times)-1)...)
	}
	if c.elision {
		c.runs = append(c.runs, run)
		if run.reasoning > run.elided && c.badElision == "" {
			c.badElision = semconv.AttrChunkElidedReasoning + " is more than " + semconv.AttrChunkElided
		}
		c.Elided = min(c.Elided+run.elided, MaxChunkCount+1)
		c.ElidedReasoning = min(c.ElidedReasoning+run.reasoning, MaxChunkCount+1)
	}
}

// singleKind reads the one attribute of a chunk event when it is no
// elision count (ok), which their key lengths tell: the chunk is a
// reasoning chunk when it is llm.stream.chunk.kind = reasoning. Only a
// reasoning value has its key compared: any other value, under any key,
// makes an answer chunk, and the key's bytes, often not in the cache, are
// not read.
func singleKind(attrs pcommon.Map) (reasoning, ok bool) {
	for k, v := range attrs.All() {
		if len(k) == len(semconv.AttrChunkElided) || len(k) == len(semconv.AttrChunkElidedReasoning) {
			return false, false
		}
		reasoning = v.Type() == pcommon.ValueTypeStr && v.Str() == semconv.ChunkKindReasoning && k == semconv.AttrChunkKind
	}
	return reasoning, true
}

// elisionCount reads an elision count: an int from 0 to MaxChunkCount.
func (c *Chunks) elisionCount(v pcommon.Value, key string) int64 {
	if v.Type() != pcommon.ValueTypeInt || v.Int() < 0 || v.Int() > MaxChunkCount {
		if c.badElision == "" {
			c.badElision = key + " is not an int from 0 to MaxChunkCount"
		}
		return 0
	}
	return v.Int()
}

// judgeElided checks the elision counts of sorted evidence: they must be
// what a Keeper writes, so that the figures they give are exact. The first
// chunk and the first chunk of each kind are never elided, the counts fit,
// and the span says the gap below which chunks were elided.
func (c *Chunks) judgeElided(span ptrace.Span) error {
	if c.badElision != "" {
		return fmt.Errorf("%w: %s", ErrImplausible, c.badElision)
	}
	if c.Elided == 0 {
		return nil
	}
	if c.Count() > MaxChunkCount {
		return fmt.Errorf("%w: more than 2^40 chunks", ErrImplausible)
	}
	v, ok := span.Attributes().Get(semconv.AttrChunkEventsKeepGapsAboveMs)
	if !ok || v.Type() != pcommon.ValueTypeDouble || !(v.Double() >= 0) || v.Double() > Millis(math.MaxInt64) {
		return fmt.Errorf("%w: elided chunks without a valid %s", ErrImplausible, semconv.AttrChunkEventsKeepGapsAboveMs)
	}
	c.keepGapsAbove = Nanos(v.Double())
	if c.runs[0].elided > 0 {
		return fmt.Errorf("%w: chunks elided before the first chunk event", ErrImplausible)
	}
	k := &c.Kinds
	for i := 1; i < len(c.runs); i++ {
		run, before := c.runs[i], c.Times[i-1]
		if run.reasoning > 0 && (k.ReasoningChunks == 0 || k.FirstReasoning > before) {
			return fmt.Errorf("%w: reasoning chunks elided before the first reasoning chunk event", ErrImplausible)
		}
		if run.elided > run.reasoning && (!k.HasAnswer || k.FirstAnswer > before) {
			return fmt.Errorf("%w: answer chunks elided before the first answer chunk event", ErrImplausible)
		}
	}
	return nil
}

// byTime sorts the chunk times with their elision counts.
type byTime struct{ c *Chunks }

func (s byTime) Len() int           { return len(s.c.Times) }
func (s byTime) Less(i, j int) bool { return s.c.Times[i] < s.c.Times[j] }
func (s byTime) Swap(i, j int) {
	s.c.Times[i], s.c.Times[j] = s.c.Times[j], s.c.Times[i]
	s.c.runs[i], s.c.runs[j] = s.c.runs[j], s.c.runs[i]
}

// Derive computes the figures of judged evidence with the stall threshold
// in nanoseconds; stalls are appended to stalls[:0]. An unknown span start
// (unset, or past 2262) makes TTFT and TTFA unknown, not the age of the
// epoch.
//
// Elided chunks count in the chunk count, the stall positions and the
// reasoning count. A gap across elided chunks is no stall gap: every gap
// in it was at most the span's keep_gaps_above_ms. The threshold in force
// (Figures.Threshold) is therefore at least that gap: below it the
// evidence cannot tell stalls apart, and the figures are those of the
// longer threshold, which the span then says, never a guess.
//
// The figures are kept with the evidence until it changes: a second
// Derive under the same threshold (the connector's, of evidence the
// processor handed off) gives them without a pass over the chunks.
func (c *Chunks) Derive(threshold int64, stalls []Stall) (Figures, Reasoning) {
	if d := &c.derived; d.valid && d.threshold == threshold {
		f := d.figures
		stalls = append(stalls[:0], d.stalls...)
		f.Stalls = stalls
		return f, d.reasoning
	}
	f, r := c.derive(threshold, stalls)
	c.derived = derivedFigures{valid: true, threshold: threshold, figures: f, reasoning: r, stalls: append(c.derived.stalls[:0], f.Stalls...)}
	c.derived.figures.Stalls = nil
	return f, r
}

// derivedFigures are the figures Derive gave last, under threshold.
type derivedFigures struct {
	valid     bool
	threshold int64
	figures   Figures
	reasoning Reasoning
	stalls    []Stall
}

func (c *Chunks) derive(threshold int64, stalls []Stall) (Figures, Reasoning) {
	var runs []elidedRun
	if c.Elided > 0 {
		runs, threshold = c.runs, max(threshold, c.keepGapsAbove)
	}
	// Frame evidence has no elision: its opening frames are simply left out.
	f := derive(c.start, c.Times[c.skip:], runs, threshold, c.cut, stalls)
	r := DeriveReasoning(c.start, c.Kinds)
	r.ReasoningChunks += int(c.ElidedReasoning)
	if c.start == 0 || c.frames {
		f.HasTTFT, f.TTFT = false, 0
		r.HasTTFA, r.TTFA = false, 0
	}
	return f, r
}

// Gaps appends the gaps between consecutive chunks of judged evidence to
// dst[:0]. A gap across elided chunks is not one gap, and is left out:
// GapRuns gives it.
func (c *Chunks) Gaps(dst []int64) []int64 {
	dst = dst[:0]
	for i := c.skip + 1; i < len(c.Times); i++ {
		if c.Elided > 0 && c.runs[i].elided > 0 {
			continue
		}
		dst = append(dst, c.Times[i]-c.Times[i-1])
	}
	return dst
}

// GapRun is Count consecutive gaps that last Gap nanoseconds on average:
// one gap (Count 1), or the gaps around elided chunks, each at most the
// span's keep_gaps_above_ms.
type GapRun struct {
	Gap   int64
	Count int64
}

// GapRuns appends the gaps of judged evidence to dst[:0], those across
// elided chunks as one run at their mean: the count and the sum of every
// gap are exact (the sum to a nanosecond per run).
func (c *Chunks) GapRuns(dst []GapRun) []GapRun {
	dst = dst[:0]
	for i := c.skip + 1; i < len(c.Times); i++ {
		n := int64(1)
		if c.Elided > 0 {
			n += c.runs[i].elided
		}
		dst = append(dst, GapRun{Gap: (c.Times[i] - c.Times[i-1]) / n, Count: n})
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

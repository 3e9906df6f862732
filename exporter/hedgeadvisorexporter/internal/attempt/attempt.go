// Package attempt reads what one streaming LLM attempt span tells about
// time to first content and inter-chunk gaps.
package attempt // import "github.com/streamstall/streamstall/exporter/hedgeadvisorexporter/internal/attempt"

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
)

// Kind sorts attempt spans by what their TTFT tells.
type Kind uint8

const (
	// Skip: not a streaming LLM attempt, or one whose TTFT says nothing
	// (it failed, or it continued another attempt's text).
	Skip Kind = iota
	// Exact: the first content chunk was seen; TTFT is exact.
	Exact
	// Censored: a hedge loser cancelled before any content; its TTFT only
	// exceeds the time it ran.
	Censored
)

// Attempt is what one span tells.
type Attempt struct {
	Kind     Kind
	Provider string
	Model    string
	// TTFT is the time to first content, or the run time of a censored
	// attempt, in nanoseconds.
	TTFT int64
	// Gaps are the gaps between consecutive content chunks, nanoseconds.
	Gaps []int64
}

// Reader extracts attempts, reusing its buffers: the Gaps of an Attempt are
// valid until the next Read. It is not safe for concurrent use.
type Reader struct {
	chunkNames map[string]bool
	times      []int64
	gaps       []int64
}

// NewReader returns a reader that counts events with the given names as
// content chunks.
func NewReader(chunkNames []string) *Reader {
	r := &Reader{chunkNames: make(map[string]bool, len(chunkNames))}
	for _, n := range chunkNames {
		r.chunkNames[n] = true
	}
	return r
}

// Read returns what span tells. An attempt is a span with a provider
// (gen_ai.provider.name, or the older gen_ai.system) and a requested model
// that is not marked non-streaming: hedging clients set a provider on the
// attempt spans and not on the span of the whole call. Its TTFT comes from
// its chunk events (internal/figures), or from llm.stream.ttft_ms when the
// events are gone; a loser (llm.hedge.outcome = loser, or flagged
// llm.hedge.loser by the stall processor) without content is censored at
// its duration. Failed attempts and those a stall launched
// (llm.hedge.trigger = stall: possibly a continuation, whose first chunk is
// not a time to first content) give no TTFT, but their gaps count.
func (r *Reader) Read(span ptrace.Span) Attempt {
	attrs := span.Attributes()
	a := Attempt{Provider: str(attrs, semconv.AttrProviderName), Model: str(attrs, semconv.AttrRequestModel)}
	if a.Provider == "" {
		a.Provider = str(attrs, semconv.AttrSystem)
	}
	if a.Provider == "" || a.Model == "" {
		return Attempt{}
	}
	if v, ok := attrs.Get(semconv.AttrRequestStream); ok && v.Type() == pcommon.ValueTypeBool && !v.Bool() {
		return Attempt{}
	}
	r.times = r.times[:0]
	events := span.Events()
	for i := range events.Len() {
		ev := events.At(i)
		if r.chunkNames[ev.Name()] {
			r.times = append(r.times, int64(ev.Timestamp()))
		}
	}
	r.times = figures.PrepareChunkTimes(r.times)
	r.gaps = r.gaps[:0]
	for i := 1; i < len(r.times); i++ {
		r.gaps = append(r.gaps, r.times[i]-r.times[i-1])
	}
	a.Gaps = r.gaps

	failed := span.Status().Code() == ptrace.StatusCodeError
	if _, ok := attrs.Get(semconv.AttrErrorType); ok {
		failed = true
	}
	if failed || str(attrs, semconv.AttrHedgeTrigger) == semconv.HedgeTriggerStall {
		return a // Kind Skip: gaps only
	}
	start := int64(span.StartTimestamp())
	f := figures.Derive(start, r.times, math.MaxInt64, nil) // no threshold: only the TTFT is needed
	switch {
	case f.HasTTFT && f.TTFT > 0:
		a.Kind, a.TTFT = Exact, f.TTFT
	case len(r.times) > 0:
		// Chunks before the span start: clock skew, the TTFT is unknown.
	case hasFloat(attrs, semconv.AttrTTFTMs):
		v, _ := attrs.Get(semconv.AttrTTFTMs)
		if ms := v.Double(); ms > 0 && ms < maxTTFTMs {
			a.Kind, a.TTFT = Exact, int64(ms*1e6)
		}
	case isLoser(attrs):
		if d := int64(span.EndTimestamp()) - start; d > 0 && start > 0 {
			a.Kind, a.TTFT = Censored, d
		}
	}
	return a
}

// maxTTFTMs bounds a TTFT read from an attribute (a day): anything above is
// not a measurement.
const maxTTFTMs = 86_400_000

func isLoser(attrs pcommon.Map) bool {
	if str(attrs, semconv.AttrHedgeOutcome) == semconv.HedgeOutcomeLoser {
		return true
	}
	v, ok := attrs.Get(semconv.AttrHedgeLoser)
	return ok && v.Type() == pcommon.ValueTypeBool && v.Bool()
}

func str(attrs pcommon.Map, key string) string {
	if v, ok := attrs.Get(key); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}

func hasFloat(attrs pcommon.Map, key string) bool {
	v, ok := attrs.Get(key)
	return ok && v.Type() == pcommon.ValueTypeDouble
}

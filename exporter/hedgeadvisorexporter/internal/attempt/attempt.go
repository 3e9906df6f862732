// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package attempt reads what one streaming LLM attempt span tells about
// time to first content and inter-chunk gaps.
package attempt // import "github.com/streamstall/streamstall/exporter/hedgeadvisorexporter/internal/attempt"

import (
	"fmt"
	"math"
	"time"

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
	// Implausible: an attempt whose chunk times lie outside its span or
	// past 2262, or whose stream, TTFT or run time is longer than
	// chunk_events::max_duration (internal/figures). Nothing of it is a
	// sample; the exporter counts it.
	Implausible
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
	chunks   *figures.ChunkReader
	evidence figures.Chunks
	gaps     []int64
	// Problem is why the last Read found an attempt implausible.
	Problem error
}

// NewReader returns a reader of the chunk events that cfg selects.
func NewReader(cfg figures.ChunkEventsConfig) *Reader {
	return &Reader{chunks: figures.NewChunkReader(cfg)}
}

// Read returns what span tells. An attempt is a span with a provider
// (gen_ai.provider.name, or the older gen_ai.system) and a requested model
// that is not marked non-streaming: hedging clients set a provider on the
// attempt spans and not on the span of the whole call. Its TTFT comes from
// its chunk events (internal/figures), or from llm.stream.ttft_ms when the
// events are gone; a loser (llm.hedge.outcome = loser, or flagged
// llm.hedge.loser by the stall processor) without content is censored at
// its duration, unless the proxy says it could not read the stream
// (llm.stream.capture_error). Failed attempts and those a stall launched
// (llm.hedge.trigger = stall: possibly a continuation, whose first chunk is
// not a time to first content) give no TTFT, but their gaps count. An
// attempt whose times are implausible is of Kind Implausible, without gaps,
// and r.Problem says why.
func (r *Reader) Read(span ptrace.Span) Attempt {
	r.Problem = nil
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
	r.Problem = r.chunks.Read(span, &r.evidence)
	if r.Problem != nil {
		a.Kind = Implausible
		return a
	}
	r.gaps = r.evidence.Gaps(r.gaps)
	a.Gaps = r.gaps

	failed := span.Status().Code() == ptrace.StatusCodeError
	if _, ok := attrs.Get(semconv.AttrErrorType); ok {
		failed = true
	}
	if failed || str(attrs, semconv.AttrHedgeTrigger) == semconv.HedgeTriggerStall {
		return a // Kind Skip: gaps only
	}
	// No threshold: only the TTFT is needed.
	f, _ := r.evidence.Derive(math.MaxInt64, nil)
	maxDuration := r.chunks.MaxDuration()
	switch {
	case f.HasTTFT && f.TTFT > 0:
		a.Kind, a.TTFT = Exact, f.TTFT
	case len(r.evidence.Times) > 0:
		// Chunks before the span start (clock skew), or an unknown start:
		// the TTFT is unknown.
	case hasFloat(attrs, semconv.AttrTTFTMs):
		v, _ := attrs.Get(semconv.AttrTTFTMs)
		switch ms := v.Double(); {
		case ms > figures.Millis(maxDuration.Nanoseconds()):
			a.Kind, r.Problem = Implausible, fmt.Errorf("%w: %s is %v ms, more than max_duration %v", figures.ErrImplausible, semconv.AttrTTFTMs, ms, maxDuration)
		case ms > 0:
			a.Kind, a.TTFT = Exact, figures.Nanos(ms)
		}
	case figures.IsHedgeLoser(attrs) && !hasAttr(attrs, semconv.AttrCaptureError):
		// (A loser whose stream the proxy could not read may have had
		// content it did not see: not censored.)
		start, end := span.StartTimestamp(), span.EndTimestamp()
		switch d := time.Duration(end - start); {
		case start == 0 || end <= start:
		case d > maxDuration:
			a.Kind, r.Problem = Implausible, fmt.Errorf("%w: a loser ran %v, more than max_duration %v", figures.ErrImplausible, d, maxDuration)
		default:
			a.Kind, a.TTFT = Censored, d.Nanoseconds()
		}
	}
	if a.Kind == Implausible {
		a.Gaps = nil
	}
	return a
}

func str(attrs pcommon.Map, key string) string {
	if v, ok := attrs.Get(key); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}

func hasAttr(attrs pcommon.Map, key string) bool {
	_, ok := attrs.Get(key)
	return ok
}

func hasFloat(attrs pcommon.Map, key string) bool {
	v, ok := attrs.Get(key)
	return ok && v.Type() == pcommon.ValueTypeDouble
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Named timing profiles. The figures of steady and stall come from the field data in docs/contract.md section 1.
const (
	ProfileSteady         = "steady"
	ProfileStall          = "stall"
	ProfileStallKeepalive = "stall_keepalive"
	ProfileBurst          = "burst"
	ProfileSlowFirst      = "slow_first"
	ProfileEarlyClose     = "early_close"
	ProfileHTTP429        = "http429"
	ProfileHTTP500        = "http500"
	ProfileReasoning      = "reasoning"
	ProfileToolCall       = "tool_call"

	// ProfileScript is the profile name recorded for a request timed by an explicit Script.
	ProfileScript = "script"
)

// Content kinds of a response: what its content chunks carry.
const (
	ContentText      = "text"
	ContentToolCall  = "tool_call"
	ContentReasoning = "reasoning"
)

// Profiles lists the named profiles, in documentation order.
var Profiles = []string{
	ProfileSteady, ProfileStall, ProfileStallKeepalive, ProfileBurst, ProfileSlowFirst,
	ProfileEarlyClose, ProfileHTTP429, ProfileHTTP500, ProfileReasoning, ProfileToolCall,
}

// Unscaled parameters of the named profiles.
const (
	ttftMedian      = 1600 * time.Millisecond
	ttftSigma       = 0.5
	slowTTFTMedian  = 20 * time.Second
	gapMedian       = 25 * time.Millisecond
	gapSigma        = 0.25
	stallMedian     = 55 * time.Second
	stallSigma      = 0.8
	extraStallProb  = 0.3 // chance of each further stall after the first, up to maxStalls
	maxStalls       = 3
	keepaliveEvery  = 5 * time.Second
	retryAfterDelay = 2 * time.Second
)

// MaxChunks bounds the chunk count a request may ask for.
const MaxChunks = 100000

var errUnknownProfile = errors.New("unknown profile")

// Script is a fully explicit timing, for tests that need exact gaps. Its durations are taken as
// they are: the server's TimeFactor does not scale a script.
type Script struct {
	// TTFTMillis is the delay from the request to the first content chunk.
	TTFTMillis float64 `json:"ttft_ms"`
	// GapsMillis are the delays between consecutive content chunks; the chunk count is
	// len(GapsMillis)+1. Empty: the request's chunk count, with no delay between chunks.
	GapsMillis []float64 `json:"gaps_ms,omitempty"`
	// KeepaliveEveryMillis sends a keepalive (SSE comment or Anthropic ping) after each such
	// interval of silence while the stream waits for its next content chunk. 0: none.
	KeepaliveEveryMillis float64 `json:"keepalive_every_ms,omitempty"`
	// Burst writes every content chunk and the end of the stream in one write after TTFT.
	Burst bool `json:"burst,omitempty"`
	// CloseAfterChunk aborts the connection right after that content chunk (1-based). 0: never.
	CloseAfterChunk int `json:"close_after_chunk,omitempty"`
	// Status answers with this HTTP error status (4xx or 5xx) and the provider's error body.
	Status int `json:"status,omitempty"`
	// RetryAfterMillis is announced with an error status (Retry-After, retry-after-ms).
	RetryAfterMillis float64 `json:"retry_after_ms,omitempty"`
	// Content is one of text, tool_call, reasoning; empty: decided by the request.
	Content string `json:"content,omitempty"`
}

// ParseScript decodes a Script from JSON, rejecting unknown fields and impossible values.
func ParseScript(data []byte) (Script, error) {
	var s Script
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Script{}, fmt.Errorf("invalid script: %w", err)
	}
	if dec.More() {
		return Script{}, errors.New("invalid script: trailing data after the JSON object")
	}
	if err := s.validate(); err != nil {
		return Script{}, fmt.Errorf("invalid script: %w", err)
	}
	return s, nil
}

func (s Script) validate() error {
	var errs []error
	checkMillis := func(name string, v float64) {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) || v > float64(24*time.Hour/time.Millisecond) {
			errs = append(errs, fmt.Errorf("%s must be between 0 and 86400000, got %v", name, v))
		}
	}
	checkMillis("ttft_ms", s.TTFTMillis)
	checkMillis("keepalive_every_ms", s.KeepaliveEveryMillis)
	checkMillis("retry_after_ms", s.RetryAfterMillis)
	for i, g := range s.GapsMillis {
		checkMillis(fmt.Sprintf("gaps_ms[%d]", i), g)
	}
	if len(s.GapsMillis) >= MaxChunks {
		errs = append(errs, fmt.Errorf("gaps_ms has %d entries, at most %d allowed", len(s.GapsMillis), MaxChunks-1))
	}
	if s.KeepaliveEveryMillis > 0 && s.KeepaliveEveryMillis < 1 {
		errs = append(errs, fmt.Errorf("keepalive_every_ms must be 0 or at least 1, got %v", s.KeepaliveEveryMillis))
	}
	if s.CloseAfterChunk < 0 {
		errs = append(errs, fmt.Errorf("close_after_chunk must not be negative, got %d", s.CloseAfterChunk))
	}
	if s.Status != 0 && (s.Status < 400 || s.Status > 599) {
		errs = append(errs, fmt.Errorf("status must be an HTTP error status (400-599), got %d", s.Status))
	}
	if s.Content != "" {
		if err := validateContent(s.Content); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func validateContent(c string) error {
	switch c {
	case ContentText, ContentToolCall, ContentReasoning:
		return nil
	}
	return fmt.Errorf("content must be one of %s, %s, %s, got %q", ContentText, ContentToolCall, ContentReasoning, c)
}

// profileSpec is a profile as configured: a name or a script.
type profileSpec struct {
	name   string
	script *Script
}

// parseProfile accepts a profile name or a JSON script (anything starting with '{').
func parseProfile(v string) (profileSpec, error) {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "{") {
		s, err := ParseScript([]byte(v))
		if err != nil {
			return profileSpec{}, err
		}
		return profileSpec{name: ProfileScript, script: &s}, nil
	}
	if !slices.Contains(Profiles, v) {
		return profileSpec{}, fmt.Errorf("%w %q (known: %s)", errUnknownProfile, v, strings.Join(Profiles, ", "))
	}
	return profileSpec{name: v}, nil
}

// Plan is the resolved behaviour of one response: every duration is final (scaled or scripted).
type Plan struct {
	// TTFT is the delay from the request's arrival to the first content chunk.
	TTFT time.Duration `json:"ttft_ns"`
	// Gaps are the delays between consecutive content chunks (len = chunk count - 1).
	Gaps []time.Duration `json:"gaps_ns"`
	// StallAfter lists the 1-based chunk indexes followed by a profile stall (stall profiles only).
	StallAfter []int `json:"stall_after,omitempty"`
	// KeepaliveEvery is the keepalive interval during silences; 0: none.
	KeepaliveEvery time.Duration `json:"keepalive_every_ns,omitempty"`
	// Burst writes all content chunks in one write.
	Burst bool `json:"burst,omitempty"`
	// CloseAfterChunk aborts the connection after that content chunk (1-based); 0: never.
	CloseAfterChunk int `json:"close_after_chunk,omitempty"`
	// Status is the HTTP error status to answer with; 0: a normal 200 response.
	Status int `json:"status,omitempty"`
	// RetryAfter accompanies an error status.
	RetryAfter time.Duration `json:"retry_after_ns,omitempty"`
	// Content is what the content chunks carry (text, tool_call, reasoning); empty: decided by the request.
	Content string `json:"content,omitempty"`
}

// Chunks is the number of content chunks the plan sends.
func (p Plan) Chunks() int { return len(p.Gaps) + 1 }

// Offsets are the planned times of the content chunks relative to the request's arrival.
func (p Plan) Offsets() []time.Duration {
	out := make([]time.Duration, 0, p.Chunks())
	at := p.TTFT
	out = append(out, at)
	for _, g := range p.Gaps {
		at += g
		out = append(out, at)
	}
	return out
}

// plan resolves a profile for one request. chunks is the requested chunk count (>= 1) and
// factor scales the named profiles' durations.
func (ps profileSpec) plan(rng *rand.Rand, chunks int, factor float64) Plan {
	if ps.script != nil {
		return ps.script.plan(chunks)
	}
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) * factor) }
	lognormal := func(median time.Duration, sigma float64) time.Duration {
		return scale(time.Duration(float64(median) * math.Exp(sigma*rng.NormFloat64())))
	}
	p := Plan{}
	switch ps.name {
	case ProfileHTTP429:
		p.Status, p.RetryAfter = 429, scale(retryAfterDelay)
		return p
	case ProfileHTTP500:
		p.Status = 500
		return p
	case ProfileSlowFirst:
		p.TTFT = lognormal(slowTTFTMedian, ttftSigma)
	default:
		p.TTFT = lognormal(ttftMedian, ttftSigma)
	}
	p.Gaps = make([]time.Duration, chunks-1)
	for i := range p.Gaps {
		p.Gaps[i] = lognormal(gapMedian, gapSigma)
	}
	switch ps.name {
	case ProfileStall, ProfileStallKeepalive:
		p.StallAfter = stallPositions(rng, len(p.Gaps))
		for _, after := range p.StallAfter {
			p.Gaps[after-1] = lognormal(stallMedian, stallSigma)
		}
		if ps.name == ProfileStallKeepalive {
			p.KeepaliveEvery = scale(keepaliveEvery)
		}
	case ProfileBurst:
		p.Burst = true
	case ProfileEarlyClose:
		p.CloseAfterChunk = 1 + rng.IntN(max(1, chunks-1))
	case ProfileReasoning:
		p.Content = ContentReasoning
	case ProfileToolCall:
		p.Content = ContentToolCall
	}
	return p
}

// stallPositions picks one to maxStalls distinct gaps (returned as the 1-based chunk before each).
func stallPositions(rng *rand.Rand, gaps int) []int {
	if gaps == 0 {
		return nil
	}
	n := 1
	for n < maxStalls && n < gaps && rng.Float64() < extraStallProb {
		n++
	}
	picked := rng.Perm(gaps)[:n]
	out := make([]int, n)
	for i, g := range picked {
		out[i] = g + 1
	}
	slices.Sort(out)
	return out
}

func (s Script) plan(chunks int) Plan {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	p := Plan{
		TTFT:            ms(s.TTFTMillis),
		KeepaliveEvery:  ms(s.KeepaliveEveryMillis),
		Burst:           s.Burst,
		CloseAfterChunk: s.CloseAfterChunk,
		Status:          s.Status,
		RetryAfter:      ms(s.RetryAfterMillis),
		Content:         s.Content,
	}
	if len(s.GapsMillis) > 0 {
		p.Gaps = make([]time.Duration, len(s.GapsMillis))
		for i, g := range s.GapsMillis {
			p.Gaps[i] = ms(g)
		}
	} else {
		p.Gaps = make([]time.Duration, chunks-1)
	}
	return p
}

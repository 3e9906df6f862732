// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package hedgecore is the decision core of the hedging client and the
// proxy's guard: the race state machine of one call, the budgets and the
// learned delays that calls share, and the one loop that drives a race
// (Driver). The race has no goroutine and no clock: the driver runs it
// from a Source, the network and a clockwork clock (Live) for the hedge
// package and the guard, a discrete-event simulation for cmd/hedgesim, so
// all of them run the same decisions.
package hedgecore

import (
	"sync/atomic"
	"time"
)

// Config is the decision policy of a hedger. Durations are nanoseconds.
type Config struct {
	// Sources is the number of sources, tried round robin from the first.
	Sources int
	// Delay is the fixed hedge delay, or the cold-start fallback of the
	// adaptive delay.
	Delay time.Duration
	// Adaptive learns the delay per source as Quantile of recent time to
	// first content over two rotating windows of Window, once MinSamples
	// are in.
	Adaptive   bool
	Quantile   float64
	Window     time.Duration
	MinSamples int
	// MaxTokens and TokenRatio configure the budget; MaxTokens <= 0: none.
	MaxTokens  float64
	TokenRatio float64
	// MaxAttempts bounds the attempts of a call; clamped to [1, 5].
	MaxAttempts  int
	StallTimeout time.Duration
	StallAfter   time.Duration
	Continuation bool

	// NoTTFTHedge starts no attempt on the hedge delay: attempts after the
	// first start only on failures (the proxy guard without hedge.delay).
	NoTTFTHedge bool
	// TTFTTimeout gives up an attempt that has delivered no content this
	// long after it started: it fails (the next attempt starts at once if
	// the budget allows), and when it was the last one the call ends with
	// ErrTTFTTimeout. 0: never.
	TTFTTimeout time.Duration
	// ReasoningStallTimeout is the watchdog's timeout while every content
	// chunk delivered was reasoning; 0 takes StallTimeout.
	ReasoningStallTimeout time.Duration
	// Budget, when set, is the bucket the policy draws on instead of one
	// of its own (MaxTokens and TokenRatio are then ignored): policies of
	// one proxy that learn their delays apart share it.
	Budget *Budget
	// StallTimeouts, when set, supplies the watchdog's timeouts in place of
	// StallTimeout and ReasoningStallTimeout: timeouts learned from traffic
	// (the proxy guard's stall_timeout: auto).
	StallTimeouts StallTimeouts
}

// StallTimeouts is a source of watchdog timeouts that change while calls
// run. It must be safe for concurrent use.
type StallTimeouts interface {
	// StallTimeout is the watchdog's timeout, in nanoseconds (0: off), of a
	// stream that has delivered an answer chunk, or only reasoning chunks.
	StallTimeout(answered bool) int64
}

// Defaults of the adaptive delay.
const (
	DefaultQuantile   = 0.95
	DefaultWindow     = time.Minute
	DefaultMinSamples = 20
)

// Policy is the immutable part of the decisions plus the state that the
// calls of one hedger share (the delay estimators and the budget).
type Policy struct {
	sources      int
	fixedDelay   int64
	estimators   []*DelayEstimator
	fleet        []atomic.Pointer[FleetAdvice]
	budget       *Budget
	maxAttempts  int
	stallTimeout int64
	stallAfter   int64
	continuation bool

	noTTFTHedge           bool
	ttftTimeout           int64
	reasoningStallTimeout int64
	learned               StallTimeouts
}

// NewPolicy returns the policy of cfg. cfg is assumed valid (the hedge
// package validates user options).
func NewPolicy(cfg Config) *Policy {
	p := &Policy{
		sources:      max(cfg.Sources, 1),
		fixedDelay:   int64(cfg.Delay),
		budget:       NewBudget(cfg.MaxTokens, cfg.TokenRatio),
		maxAttempts:  min(max(cfg.MaxAttempts, 1), MaxAttempts),
		stallTimeout: int64(cfg.StallTimeout),
		stallAfter:   int64(cfg.StallAfter),
		continuation: cfg.Continuation,

		noTTFTHedge:           cfg.NoTTFTHedge,
		ttftTimeout:           int64(cfg.TTFTTimeout),
		reasoningStallTimeout: int64(cfg.ReasoningStallTimeout),
		learned:               cfg.StallTimeouts,
	}
	if cfg.Budget != nil {
		p.budget = cfg.Budget
	}
	if p.reasoningStallTimeout <= 0 {
		p.reasoningStallTimeout = p.stallTimeout
	}
	p.fleet = make([]atomic.Pointer[FleetAdvice], p.sources)
	if cfg.Adaptive {
		window, minSamples := cfg.Window, cfg.MinSamples
		if window <= 0 {
			window = DefaultWindow
		}
		if minSamples <= 0 {
			minSamples = DefaultMinSamples
		}
		p.estimators = make([]*DelayEstimator, p.sources)
		for i := range p.estimators {
			p.estimators[i] = NewDelayEstimator(cfg.Quantile, int64(cfg.Delay), int64(window), minSamples)
		}
	}
	return p
}

// DelaySource says where a hedge delay came from (llm.hedge.delay_source).
type DelaySource uint8

const (
	// DelayNone: the attempt was not launched in the TTFT race.
	DelayNone DelaySource = iota
	// DelayFallback: the fixed delay, or the cold-start fallback.
	DelayFallback
	// DelayLocal: the process's own learned quantile.
	DelayLocal
	// DelayFleet: fleet advice, alone or blended with the local quantile.
	DelayFleet
)

func (s DelaySource) String() string {
	switch s {
	case DelayFallback:
		return "fallback"
	case DelayLocal:
		return "local"
	case DelayFleet:
		return "fleet"
	}
	return ""
}

// FleetAdvice is the hedge delay a fleet advisor recommends for a source
// and the number of samples behind it.
type FleetAdvice struct {
	Delay   int64 // nanoseconds
	Samples int64
}

// SetFleet installs fleet advice for source; nil removes it. Safe to call
// while calls run.
func (p *Policy) SetFleet(source int, a *FleetAdvice) {
	if source < 0 || source >= len(p.fleet) {
		return
	}
	if a != nil && (a.Delay <= 0 || a.Samples <= 0) {
		a = nil
	}
	p.fleet[source].Store(a)
}

// DelayFrom is the hedge delay while waiting for the first content of
// source, and where it came from. It is the per-call decision: a few atomic
// loads, no allocation. Fleet advice and a warm local estimate are blended,
// weighted by their sample counts:
//
//	delay = (n_fleet * d_fleet + n_local * d_local) / (n_fleet + n_local)
//
// so a fresh process starts on the fleet's delay and a busy one leans on
// what it sees itself. A cold local estimate has no weight.
func (p *Policy) DelayFrom(source int) (int64, DelaySource) {
	fleet := p.fleet[source].Load()
	var local, n int64
	warm := false
	if p.estimators != nil {
		local, n, warm = p.estimators[source].Local()
	}
	switch {
	case fleet != nil && warm:
		nf, nl := float64(fleet.Samples), float64(n)
		d := (nf*float64(fleet.Delay) + nl*float64(local)) / (nf + nl)
		return max(int64(d), minAdaptiveDelayNanos), DelayFleet
	case fleet != nil:
		return max(fleet.Delay, minAdaptiveDelayNanos), DelayFleet
	case warm:
		return local, DelayLocal
	}
	return p.fixedDelay, DelayFallback
}

// Observe records a time to first content of source.
func (p *Policy) Observe(source int, now, ttft int64) {
	if p.estimators != nil {
		p.estimators[source].Observe(now, ttft)
	}
}

func (p *Policy) observeCensored(source int, now, elapsed int64) {
	if p.estimators != nil {
		p.estimators[source].ObserveCensored(now, elapsed)
	}
}

// StallTimeout returns the watchdog timeout of an answered stream in
// nanoseconds, 0 when off.
func (p *Policy) StallTimeout() int64 { return p.StallTimeoutFor(true) }

// StallTimeoutFor is the watchdog timeout of a stream that has delivered an
// answer chunk (text or tool call), or only reasoning chunks: reasoning
// models think in long silences. 0 when off. Learned timeouts
// (Config.StallTimeouts) take the place of the configured ones.
func (p *Policy) StallTimeoutFor(answered bool) int64 {
	if p.learned != nil {
		return max(p.learned.StallTimeout(answered), 0)
	}
	if answered {
		return p.stallTimeout
	}
	return p.reasoningStallTimeout
}

// StallDeadline is the instant at which the watchdog ends a stream whose
// last content chunk was delivered at last, and which has delivered an
// answer chunk or only reasoning, 0 when it never does. It is the one
// definition of the watchdog: the race uses it for every stream it
// watches, and so does the proxy guard for the stream it watches after
// commit from its own goroutine (Policy is safe for concurrent use).
func (p *Policy) StallDeadline(last int64, answered bool) int64 {
	if t := p.StallTimeoutFor(answered); t > 0 {
		return last + t
	}
	return 0
}

// TTFTTimeout returns the TTFT timeout of an attempt in nanoseconds, 0 when
// off.
func (p *Policy) TTFTTimeout() int64 { return p.ttftTimeout }

// Budget returns the bucket the policy draws on, nil for none.
func (p *Policy) Budget() *Budget { return p.budget }

// Package hedgecore is the decision core of the hedging client: the race
// state machine of one call, the budget and the learned delays that calls
// share. It has no goroutine and no clock, so the hedge package drives it
// from the network and cmd/hedgesim from a discrete-event simulation: both
// run the same decisions.
package hedgecore

import "time"

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
	budget       *Budget
	maxAttempts  int
	stallTimeout int64
	stallAfter   int64
	continuation bool
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
	}
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

// Delay is the hedge delay while waiting for the first content of source.
// It is the per-call decision: one atomic load, no allocation.
func (p *Policy) Delay(source int) int64 {
	if p.estimators == nil {
		return p.fixedDelay
	}
	return p.estimators[source].Delay()
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

// Budget returns the shared budget, nil when unbounded.
func (p *Policy) Budget() *Budget { return p.budget }

// StallTimeout returns the watchdog timeout in nanoseconds, 0 when off.
func (p *Policy) StallTimeout() int64 { return p.stallTimeout }

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/streamstall/streamstall/internal/hedgecore"
	"github.com/streamstall/streamstall/internal/semconv"
)

// gapQuantile is the gap quantile a learned stall timeout is a multiple of.
const gapQuantile = 0.999

// gapWindow is the rotating window of the learned gaps: a learned timeout
// covers between ten and twenty minutes of streams, and forgets an
// incident within twenty.
const gapWindow = 10 * time.Minute

// gapLearner learns the stall timeouts of one model from the gaps between
// the content chunks of the proxy's committed streams, with hedgecore's
// censoring-aware estimator: the silence a stream ended in (the watchdog
// fired, the client or the upstream gave up) is a gap only known to exceed
// its length, recorded as such. Answer gaps and reasoning gaps (the gap
// before a reasoning chunk) are learned apart, as their timeouts are set
// apart.
type gapLearner struct {
	multiple       float64
	floor, ceiling time.Duration
	// minSamples is what the local estimators need before they speak, and
	// what the fleet's entry needs in attempts.
	minSamples int
	// fleet, when set, is asked first for the answer timeout: the p99.9
	// gap the whole fleet saw for the policy's provider and model.
	fleet           *Fleet
	provider, model string
	clock           clockwork.Clock
	// answer and reasoning are nil for a timeout that is configured, not
	// learned; fixed holds those.
	answer, reasoning           *hedgecore.DelayEstimator
	fixedAnswer, fixedReasoning time.Duration
}

// Gap is one gap of a stream, or Count gaps of one length: its length and
// whether the chunk that ended it was reasoning. A censored gap is the
// silence a stream ended in. Count more than one is a run of gaps around
// chunks the span elided, each at their mean (figures.GapRun); 0 is one.
type Gap struct {
	Length    time.Duration
	Reasoning bool
	Censored  bool
	Count     int64
}

// AutoTimeout marks a Rule's StallTimeout or ReasoningStallTimeout as
// learned (with AutoStall set).
const AutoTimeout time.Duration = -1

// StallSource says where a stall timeout in force came from
// (llm.stream.stall_timeout_source).
type StallSource uint8

const (
	// StallConfigured: the configured timeout; no source is recorded.
	StallConfigured StallSource = iota
	// StallAdvisor: the fleet's learned gaps, from a hedge_advisor.
	StallAdvisor
	// StallLocal: the proxy's own learned gaps.
	StallLocal
	// StallFloor: auto_stall.floor, before anything was learned.
	StallFloor
)

func (s StallSource) String() string {
	switch s {
	case StallAdvisor:
		return semconv.StallTimeoutSourceAdvisor
	case StallLocal:
		return semconv.StallTimeoutSourceLocal
	case StallFloor:
		return semconv.StallTimeoutSourceFloor
	}
	return ""
}

// fleetGaps names where a learner asks the fleet: a hedge_advisor's
// advice for one provider and model.
type fleetGaps struct {
	fleet           *Fleet
	provider, model string
	clock           clockwork.Clock
}

func newGapLearner(a AutoStall, stall, reasoning time.Duration, fg fleetGaps) *gapLearner {
	l := &gapLearner{
		multiple: a.Multiple, floor: a.Floor, ceiling: a.Ceiling, minSamples: a.MinSamples, fixedAnswer: stall, fixedReasoning: reasoning,
		fleet: fg.fleet, provider: fg.provider, model: fg.model, clock: fg.clock,
	}
	newEstimator := func() *hedgecore.DelayEstimator {
		// The fallback is the floor over the multiple: a cold learner
		// answers the floor.
		return hedgecore.NewDelayEstimator(gapQuantile, int64(float64(a.Floor)/a.Multiple), int64(gapWindow), a.MinSamples)
	}
	if stall == AutoTimeout {
		l.answer = newEstimator()
	}
	if reasoning == AutoTimeout {
		l.reasoning = newEstimator()
	}
	return l
}

var _ hedgecore.StallTimeouts = (*gapLearner)(nil)

// StallTimeout is the stall timeout in force, in nanoseconds, for a stream
// that has delivered an answer chunk, or only reasoning: the policy's
// watchdog takes it from here (hedgecore.Policy.StallDeadline).
func (l *gapLearner) StallTimeout(answered bool) int64 {
	t, _ := l.timeout(answered)
	return int64(t)
}

// timeout is the stall timeout in force for a stream that has delivered an
// answer chunk, or only reasoning, and where it came from: the fleet's
// gaps when a fresh advice has enough attempts of the model, else the
// proxy's own once it has min_samples gaps, else the floor. The fleet's
// gaps are all of a stream's gaps, so they stand for the answer timeout
// only; a reasoning timeout is learned here.
func (l *gapLearner) timeout(answered bool) (time.Duration, StallSource) {
	est, fixed, fleet := l.answer, l.fixedAnswer, answered
	if !answered {
		est, fixed = l.reasoning, l.fixedReasoning
		if est == nil && fixed == 0 {
			// reasoning_stall_timeout 0 takes stall_timeout.
			est, fixed, fleet = l.answer, l.fixedAnswer, true
		}
	}
	if est == nil {
		return fixed, StallConfigured
	}
	if fleet && l.fleet != nil {
		if w, ok := l.fleet.Gap(l.clock.Now().UnixNano(), l.provider, l.model); ok && w.Samples >= int64(l.minSamples) {
			return l.learned(w.Nanos), StallAdvisor
		}
	}
	if d, _, warm := est.Local(); warm {
		return l.learned(d), StallLocal
	}
	return l.floor, StallFloor
}

// learned is the timeout of a learned p99.9 gap: multiple times it, never
// below the floor nor above the ceiling (when there is one): gaps that run
// to hours, a stream's own or in a fleet's advice, must not leave the
// watchdog off.
func (l *gapLearner) learned(gap int64) time.Duration {
	t := max(time.Duration(float64(gap)*l.multiple), l.floor)
	if l.ceiling > 0 {
		t = min(t, l.ceiling)
	}
	return t
}

// observe records the gaps of one stream, at now.
func (l *gapLearner) observe(now int64, gaps []Gap) {
	for _, g := range gaps {
		est := l.answer
		if g.Reasoning && l.reasoning != nil {
			est = l.reasoning
		}
		if est == nil {
			continue
		}
		switch {
		case g.Censored:
			est.ObserveCensored(now, int64(g.Length))
		default:
			// A gap of 0 (chunks stamped alike: they came in one read)
			// is a gap, the shortest: kept as 1 ns, the least the
			// estimator holds, so that the learned quantile is one of
			// every gap, not of the nonzero ones.
			est.ObserveN(now, max(int64(g.Length), 1), max(g.Count, 1))
		}
	}
}

// Learns reports whether the policy learns from the gaps of its streams.
func (p *Policy) Learns() bool { return p.gaps != nil }

// ObserveGaps records the gaps of one of the policy's committed streams.
func (p *Policy) ObserveGaps(now int64, gaps []Gap) {
	if p.gaps != nil {
		p.gaps.observe(now, gaps)
	}
}

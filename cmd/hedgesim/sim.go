// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/streamstall/streamstall/internal/hedgecore"
)

// workload describes how a simulated source answers one attempt.
type workload struct {
	name string
	// ttft draws the time to first content.
	ttft func(rng *rand.Rand) int64
	// chunks is the number of content chunks of a whole answer; 1 makes
	// completion the first content (a TTFT benchmark).
	chunks int
	// meanGap is the mean gap between chunks (exponential).
	meanGap int64
	// stallProb is the probability that an attempt stalls once, after a
	// uniformly random chunk, for a lognormal silence.
	stallProb   float64
	stallMedian float64 // nanoseconds
	stallSigma  float64
	// spacing is the time between call arrivals: the learned delays and the
	// budget see calls in this rhythm.
	spacing int64
}

func lognormal(rng *rand.Rand, median, sigma float64) float64 {
	return median * math.Exp(sigma*rng.NormFloat64())
}

// w1 is the field profile of the research (docs/contract.md section 1).
var w1 = workload{
	name:        "W1 field profile: TTFT lognormal(1.6 s, 0.5), 400 chunks x 25 ms, 5 % stall once for lognormal(55 s, 0.8)",
	ttft:        func(rng *rand.Rand) int64 { return int64(lognormal(rng, 1.6e9, 0.5)) },
	chunks:      400,
	meanGap:     int64(25 * time.Millisecond),
	stallProb:   0.05,
	stallMedian: 55e9,
	stallSigma:  0.8,
	spacing:     int64(200 * time.Millisecond),
}

// w2 is the bimodal TTFT model of github.com/bhope/hedge's streaming
// benchmark; completion is the first content.
var w2 = workload{
	name: "W2 bimodal TTFT (bhope/hedge): 80 % 15+-3 ms, 20 % 200+-25 ms; completion = first content",
	ttft: func(rng *rand.Rand) int64 {
		mean, sd := 15.0, 3.0
		if rng.Float64() < 0.2 {
			mean, sd = 200, 25
		}
		return int64(max(mean+sd*rng.NormFloat64(), 1) * 1e6)
	},
	chunks:  1,
	spacing: int64(10 * time.Millisecond),
}

// policySpec is one hedging policy: a hedgecore configuration (the real
// decision code), a delivery mode, and how often the caller retries a call
// that failed (a watchdog error).
type policySpec struct {
	name     string
	cfg      hedgecore.Config
	buffered bool
	retries  int
	// clients, when set, are the proxy guard's client budgets; the
	// simulated caller is one client.
	clients *hedgecore.ClientBudgetConfig
}

// simAttempt is a simulated source answering one attempt.
type simAttempt struct {
	active     bool
	nextAt     int64 // time of the next content chunk
	emitted    int
	total      int
	stallAfter int // chunk followed by the stall, 0 for none
	stall      int64
	cancelAt   int64 // when the race cancelled it, 0 if it did not
	rng        *rand.Rand
	pcg        *rand.PCG
}

// stats are the results of one policy on one workload.
type stats struct {
	completions  []float64 // nanoseconds, one per call
	calls        int
	attempts     int
	wastedTokens int
	failed       int
}

func (s *stats) quantile(q float64) float64 {
	if len(s.completions) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(s.completions)))) - 1
	return s.completions[min(max(i, 0), len(s.completions)-1)]
}

// extraPct is the percentage of attempts beyond one per call.
func (s *stats) extraPct() float64 {
	return 100 * float64(s.attempts-s.calls) / float64(s.calls)
}

func (s *stats) wastedPerCall() float64 { return float64(s.wastedTokens) / float64(s.calls) }

// simulator runs calls of one workload under one policy, deterministically
// by seed: attempt k of race j of call c always draws the same numbers,
// whatever the policy, so policies are compared on the same luck.
type simulator struct {
	w      workload
	spec   policySpec
	seed   uint64
	policy *hedgecore.Policy
	// budget, when set, is the bucket the races draw on in place of the
	// policy's: the simulated client's, as the proxy guard's calls do.
	budget *hedgecore.Budget
	race   hedgecore.Race
	drv    hedgecore.Driver[int]
	sims   [hedgecore.MaxAttempts]simAttempt
	// onRace, when set, sees every race at its end (the fleet's advisor
	// learns from it).
	onRace func(end int64)

	// The race being run: its call and retry (they seed the attempts), the
	// simulated time, and the chunks the caller got (streaming): a
	// continuation starts there.
	c, retry  uint64
	now       int64
	delivered int
}

// The simulator is the driver's source of events (the simulated schedule)
// and carries out the race's actions on the simulated sources, as the hedge
// client and the proxy guard do on real ones; its events are attempt
// indices: that attempt's next chunk.
var (
	_ hedgecore.Source[int]  = (*simulator)(nil)
	_ hedgecore.Carrier[int] = (*simulator)(nil)
)

func newSimulator(w workload, spec policySpec, seed uint64) *simulator {
	cfg := spec.cfg
	cfg.Sources = 2
	s := &simulator{w: w, spec: spec, seed: seed, policy: hedgecore.NewPolicy(cfg)}
	if spec.clients != nil {
		s.budget = hedgecore.NewClientBudgets(*spec.clients).For(simClient)
	}
	s.drv = hedgecore.NewDriver(&s.race, s, s)
	for i := range s.sims {
		s.sims[i].pcg = rand.NewPCG(0, 0)
		s.sims[i].rng = rand.New(s.sims[i].pcg)
	}
	return s
}

// simClient is the one client of a simulated proxy.
const simClient = "sim"

func (s *simulator) run(calls int) stats {
	st := stats{calls: calls, completions: make([]float64, 0, calls)}
	for c := range calls {
		t0 := int64(c) * s.w.spacing
		end, attempts, wasted, ok := s.call(uint64(c), t0)
		st.completions = append(st.completions, float64(end-t0))
		st.attempts += attempts
		st.wastedTokens += wasted
		if !ok {
			st.failed++
		}
	}
	slices.Sort(st.completions)
	return st
}

// call runs one logical call, with the caller's retries, and returns its end,
// the attempts it took, the content chunks generated in vain and whether it
// succeeded.
func (s *simulator) call(c uint64, t0 int64) (end int64, attempts, wasted int, ok bool) {
	now := t0
	generated := 0
	for retry := 0; retry <= s.spec.retries; retry++ {
		var answered int
		now, answered, ok = s.race1(c, uint64(retry), now)
		attempts += s.race.Attempts()
		for i := range s.race.Attempts() {
			generated += s.sims[i].emitted
		}
		if ok {
			return now, attempts, generated - answered, true
		}
	}
	return now, attempts, generated, false
}

// race1 runs one race (one call of the Hedger) from now. It returns the time
// it ended, how many generated chunks make up the answer, and success.
func (s *simulator) race1(c, retry uint64, now int64) (int64, int, bool) {
	r := &s.race
	r.Reset(s.policy, s.spec.buffered)
	if s.budget != nil {
		r.DrawOn(s.budget)
	}
	s.c, s.retry, s.now, s.delivered = c, retry, now, 0
	s.drv.Start(now)
	if s.onRace != nil {
		defer func() { s.onRace(s.now) }()
	}
	for !r.Done() {
		if !s.drv.Step() {
			return s.now, 0, false // nothing can happen any more
		}
	}
	if r.Err() != nil {
		return s.now, 0, false
	}
	w := r.Winner()
	if r.Buffered() {
		return s.now, s.sims[w].emitted, true
	}
	// Streaming: the caller got the committed stream, and before a
	// continuation took over, the prefix it continued.
	return s.now, s.delivered, true
}

// Wait is the simulated schedule: the next event is the earliest chunk of a
// running attempt, or the race's deadline; a chunk at the deadline's
// instant comes first.
func (s *simulator) Wait(deadline int64) hedgecore.Wake[int] {
	next, who := int64(math.MaxInt64), -1
	for i := range s.race.Attempts() {
		if a := &s.sims[i]; a.active && a.nextAt < next {
			next, who = a.nextAt, i
		}
	}
	if deadline > 0 && deadline < next {
		s.now = deadline
		return hedgecore.Wake[int]{Kind: hedgecore.WakeDeadline, Now: deadline}
	}
	if who < 0 {
		return hedgecore.Wake[int]{Kind: hedgecore.WakeIdle}
	}
	s.now = next
	return hedgecore.Wake[int]{Kind: hedgecore.WakeEvent, Event: who}
}

// Handle delivers attempt who's next chunk at the current time.
func (s *simulator) Handle(who int) {
	r := &s.race
	a := &s.sims[who]
	a.emitted++
	if r.Content(who, s.now, true) {
		s.delivered++
	}
	if a.emitted == a.total {
		a.active = false
		r.Complete(who, s.now)
	} else {
		a.nextAt = s.now + s.gap(a)
	}
}

func (s *simulator) gap(a *simAttempt) int64 {
	g := int64(a.rng.ExpFloat64() * float64(s.w.meanGap))
	if a.emitted == a.stallAfter {
		g += a.stall
	}
	return g
}

// Cancel stops a simulated source the race dropped.
func (s *simulator) Cancel(i int) {
	a := &s.sims[i]
	a.active = false
	a.cancelAt = s.now
}

// Launch starts a simulated source on attempt i, with the random numbers
// of its call, retry and attempt.
func (s *simulator) Launch(i int) {
	a := &s.sims[i]
	a.pcg.Seed(s.seed^s.c, s.retry<<8|uint64(i))
	a.active = true
	a.cancelAt = 0
	a.emitted = 0
	a.total = s.w.chunks
	if s.race.Attempt(i).Continuation {
		a.total = max(s.w.chunks-s.delivered, 1)
	}
	a.stallAfter, a.stall = 0, 0
	if a.rng.Float64() < s.w.stallProb && a.total > 1 {
		a.stallAfter = 1 + a.rng.IntN(a.total-1)
		a.stall = int64(lognormal(a.rng, s.w.stallMedian, s.w.stallSigma))
	}
	a.nextAt = s.now + s.w.ttft(a.rng)
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"time"

	"github.com/streamstall/streamstall/internal/advice"
	"github.com/streamstall/streamstall/internal/hedgecore"
	"github.com/streamstall/streamstall/internal/textout"
)

// The feedback run: a fleet hedging a quarter of its calls on advice, for
// 30 simulated minutes, where the advisor's estimate of the TTFT p95 is
// compared with the true p95 of single attempts. W1's TTFT distribution,
// completion at the first content.
const (
	feedbackDuration = 30 * time.Minute
	feedbackEvery    = 5 * time.Minute
	feedbackQuantile = 0.75 // the delay quantile: a quarter of the calls hedge
)

var w1TTFT = workload{
	name:    "W1 TTFT only: lognormal(1.6 s, 0.5), completion = first content",
	ttft:    w1.ttft,
	chunks:  1,
	spacing: w1.spacing,
}

// trueP95 is the p95 of W1's TTFT: median x exp(sigma x z_0.95).
var trueP95 = 1.6e9 * math.Exp(0.5*1.6448536269514722)

// delayFrom is how the advisor turns its window into a hedge delay.
type delayFrom func(m *advice.Merged) (delay float64, samples float64, ok bool)

// kmDelay is the hedge_advisor's: the product-limit quantile over exact and
// censored samples.
func kmDelay(m *advice.Merged) (float64, float64, bool) {
	d, ok := m.TTFT.Quantile(feedbackQuantile)
	return d, m.TTFT.Count(), ok
}

// winnersDelay is a winners-only advisor's: the quantile of the attempts
// that delivered content, the cancelled ones forgotten.
func winnersDelay(m *advice.Merged) (float64, float64, bool) {
	d, ok := m.TTFT.NaiveQuantile(feedbackQuantile)
	return d, m.TTFT.Events(), ok
}

type feedbackRow struct {
	minute                int
	hedged                float64 // share of the interval's calls that hedged
	delay                 float64 // the delay advised at the end of the interval
	kmP95, winnersP95     float64
	kmDefined, winDefined bool
}

// feedbackRun runs the fleet for feedbackDuration on advice computed by
// from, and reports every feedbackEvery the delay, the hedge rate, and both
// estimates of the p95 over the advisor's window.
func feedbackRun(from delayFrom, seed uint64) []feedbackRow {
	cfg := hedgecore.Config{
		Adaptive: true, Quantile: feedbackQuantile, Delay: 2 * time.Second,
		Window: hedgecore.DefaultWindow, MinSamples: math.MaxInt32, // no local learning: advice only
		MaxAttempts: 2, Sources: 2,
	}
	s := newSimulator(w1TTFT, policySpec{cfg: cfg}, seed)
	store := advice.NewStore(advisorConfig(feedbackQuantile), nil)
	s.onRace = feedAdvisor(s, store)
	m := advice.NewMerged()
	advise := func(p *hedgecore.Policy, now int64) float64 {
		store.Lock()
		defer store.Unlock()
		for i := range cfg.Sources {
			var fa *hedgecore.FleetAdvice
			if store.Read(now, sourceKey(i), m) {
				if d, n, ok := from(m); ok && n >= 50 {
					fa = &hedgecore.FleetAdvice{Delay: int64(d), Samples: int64(n)}
				}
			}
			p.SetFleet(i, fa)
		}
		d, _ := p.DelayFrom(0) // the primary's delay: the one that decides whether a call hedges
		return float64(d)
	}
	calls := int(int64(feedbackDuration) / w1TTFT.spacing)
	every := int(int64(feedbackEvery) / w1TTFT.spacing)
	var rows []feedbackRow
	hedged, inInterval := 0, 0
	var delay float64
	for c := range calls {
		t0 := int64(c) * w1TTFT.spacing
		if c%fleetCallsPerProc == 0 {
			s.policy = hedgecore.NewPolicy(cfg) // a fresh process
			delay = advise(s.policy, t0)
		}
		_, attempts, _, _ := s.call(uint64(c), t0)
		inInterval++
		if attempts > 1 {
			hedged++
		}
		if (c+1)%every == 0 {
			end := t0 + w1TTFT.spacing
			row := feedbackRow{minute: (c + 1) / every * int(feedbackEvery/time.Minute), hedged: float64(hedged) / float64(inInterval), delay: delay}
			store.Lock()
			// Both sources draw from one distribution: source 0 stands for both.
			if store.Read(end, sourceKey(0), m) {
				row.kmP95, row.kmDefined = m.TTFT.Quantile(0.95)
				row.winnersP95, row.winDefined = m.TTFT.NaiveQuantile(0.95)
			}
			store.Unlock()
			rows = append(rows, row)
			hedged, inInterval = 0, 0
		}
	}
	return rows
}

func printFeedback(w *textout.Printer, km, winners []feedbackRow) {
	w.Printf("| minute | true p95 (s) | censoring-aware p95 (s) | error | winners-only p95 (s) | error | delay (s) | hedged | winners-only advisor: delay (s) | hedged |\n")
	w.Printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for i, r := range km {
		wr := winners[i]
		w.Printf("| %d | %.2f | %.2f | %+.1f %% | %.2f | %+.1f %% | %.2f | %.1f %% | %.2f | %.1f %% |\n", r.minute,
			trueP95/1e9, r.kmP95/1e9, 100*(r.kmP95/trueP95-1), r.winnersP95/1e9, 100*(r.winnersP95/trueP95-1),
			r.delay/1e9, 100*r.hedged, wr.delay/1e9, 100*wr.hedged)
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"slices"
	"strconv"
	"time"

	"github.com/streamstall/streamstall/internal/advice"
	"github.com/streamstall/streamstall/internal/hedgecore"
	"github.com/streamstall/streamstall/internal/textout"
)

// Fleet scenario: many short-lived processes (a serverless function, a CLI
// run) of a few calls each, one after another, against the same sources.
const (
	fleetProcs        = 500
	fleetCallsPerProc = 20
	fleetProvider     = "sim"
	// fleetWarmProcs run before the measured processes in the warm-advisor
	// row: the advisor has been up for a while, as in production.
	fleetWarmProcs = 100
	// adviceRefresh is how often a process fetches the advice (the hedge
	// package's default interval); every process fetches at its start.
	adviceRefresh = int64(30 * time.Second)
)

// fleetMode is how a process of the fleet gets its hedge delay.
type fleetMode uint8

const (
	modeStatic fleetMode = iota // a fixed delay
	modeLocal                   // learned alone, from the fallback
	modeFleet                   // advice of the shared advisor, blended with local learning
)

// advisorConfig is the hedge_advisor's default configuration, at the
// policy's quantile.
func advisorConfig(quantile float64) advice.Config {
	return advice.Config{
		Window: 10 * time.Minute, Slots: 4, TTFTQuantile: quantile, GapQuantile: 0.999,
		MinSamples: 50, MaxSeries: 100, MaxLabelLength: 256,
	}
}

func sourceKey(i int) advice.Key {
	return advice.Key{Provider: fleetProvider, Model: "model-" + strconv.Itoa(i)}
}

// feedAdvisor records the attempts of the race that just ended in the
// store, the way the hedge_advisor reads their spans: a TTFT for every
// attempt with content, a censored run time for every attempt cancelled
// before its first content. Continuations carry no TTFT.
func feedAdvisor(s *simulator, store *advice.Store) func(end int64) {
	return func(end int64) {
		r := &s.race
		store.Lock()
		defer store.Unlock()
		for i := range r.Attempts() {
			a := r.Attempt(i)
			switch {
			case a.Continuation:
			case a.Chunks > 0:
				store.Record(end, sourceKey(a.Source), advice.Sample{TTFT: a.First - a.Start})
			case a.State == hedgecore.Cancelled && s.sims[i].cancelAt > a.Start:
				store.Record(end, sourceKey(a.Source), advice.Sample{TTFT: s.sims[i].cancelAt - a.Start, Censored: true})
			}
		}
	}
}

// takeAdvice installs the store's advice in a process's policy, as the
// hedge package's Advice option does.
func takeAdvice(p *hedgecore.Policy, store *advice.Store, now int64, sources int) {
	resp := store.Advice(now, fleetProvider, "")
	for i := range sources {
		var fa *hedgecore.FleetAdvice
		for _, e := range resp.Advice {
			if e.Model == sourceKey(i).Model && e.HedgeDelayMs != nil {
				fa = &hedgecore.FleetAdvice{Delay: int64(*e.HedgeDelayMs * 1e6), Samples: e.Samples}
			}
		}
		p.SetFleet(i, fa)
	}
}

// fleetStats are the results of a fleet: every call, and the first call of
// each process apart.
type fleetStats struct {
	all, first stats
}

// runFleet simulates procs processes of perProc calls each, one after
// another, each with a fresh policy (delays and budget) and, in modeFleet,
// the advice of one advisor that every process feeds. warm processes run
// before them, not counted, on random numbers of their own: the advisor
// has been up for a while when the measured processes start.
func runFleet(w workload, spec policySpec, mode fleetMode, procs, perProc, warm int, seed uint64) fleetStats {
	cfg := spec.cfg
	cfg.Sources = 2
	if mode == modeStatic {
		cfg.Adaptive = false
	}
	s := newSimulator(w, spec, seed)
	var store *advice.Store
	if mode == modeFleet {
		store = advice.NewStore(advisorConfig(cfg.Quantile), nil)
		s.onRace = feedAdvisor(s, store)
	}
	n := procs * perProc
	fs := fleetStats{
		all:   stats{calls: n, completions: make([]float64, 0, n)},
		first: stats{calls: procs, completions: make([]float64, 0, procs)},
	}
	for p := -warm; p < procs; p++ {
		s.policy = hedgecore.NewPolicy(cfg) // a fresh process
		var lastFetch int64
		for j := range perProc {
			c := p*perProc + j
			t0 := int64(c+warm*perProc) * w.spacing
			if store != nil && (j == 0 || t0-lastFetch >= adviceRefresh) {
				takeAdvice(s.policy, store, t0, cfg.Sources)
				lastFetch = t0
			}
			if p < 0 {
				s.call(uint64(n-c), t0) // warm-up calls draw beyond the measured ones
				continue
			}
			end, attempts, wasted, ok := s.call(uint64(c), t0)
			for _, st := range []*stats{&fs.all, &fs.first} {
				if st == &fs.first && j > 0 {
					continue
				}
				st.completions = append(st.completions, float64(end-t0))
				st.attempts += attempts
				st.wastedTokens += wasted
				if !ok {
					st.failed++
				}
			}
		}
	}
	slices.Sort(fs.all.completions)
	slices.Sort(fs.first.completions)
	return fs
}

type fleetRow struct {
	name string
	fs   fleetStats
}

// fleetRows runs the three policies of a fleet and the warm single process
// they are measured against, all on one workload, policy and budget.
func fleetRows(w workload, spec policySpec, static time.Duration, procs, perProc int, seed uint64) []fleetRow {
	staticSpec := spec
	staticSpec.cfg.Delay = static
	warm := newSimulator(w, spec, seed).run(procs * perProc)
	return []fleetRow{
		{name: "static delay " + static.String(), fs: runFleet(w, staticSpec, modeStatic, procs, perProc, 0, seed)},
		{name: "local learning only (fallback " + spec.cfg.Delay.String() + ")", fs: runFleet(w, spec, modeLocal, procs, perProc, 0, seed)},
		{name: "fleet advice, advisor started with the fleet", fs: runFleet(w, spec, modeFleet, procs, perProc, 0, seed)},
		{name: "fleet advice, advisor warm (" + strconv.Itoa(fleetWarmProcs) + " processes before)", fs: runFleet(w, spec, modeFleet, procs, perProc, fleetWarmProcs, seed)},
		{name: "reference: one warm process, local learning", fs: fleetStats{all: warm}},
	}
}

func printFleet(w *textout.Printer, rows []fleetRow, unit time.Duration, unitName string) {
	w.Printf("| policy | p50 (%[1]s) | p99 (%[1]s) | p99.9 (%[1]s) | first calls: p99 (%[1]s) | extra attempts |\n", unitName)
	w.Printf("| --- | ---: | ---: | ---: | ---: | ---: |\n")
	u := float64(unit)
	for _, r := range rows {
		first := "-"
		if len(r.fs.first.completions) > 0 {
			first = strconv.FormatFloat(r.fs.first.quantile(0.99)/u, 'f', 1, 64)
		}
		w.Printf("| %s | %.1f | %.1f | %.1f | %s | %.1f %% |\n", r.name,
			r.fs.all.quantile(0.5)/u, r.fs.all.quantile(0.99)/u, r.fs.all.quantile(0.999)/u, first, r.fs.all.extraPct())
	}
}

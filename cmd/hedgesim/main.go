// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Command hedgesim runs the hedging client's real decision code
// (internal/hedgecore: learned delays, budget, commit and cancel, watchdog,
// stall_after, continuation), through the loop the hedge client and the
// proxy's guard run it with (hedgecore.Driver), in a discrete-event
// simulation against simulated sources, deterministically by seed, and
// prints markdown tables comparing hedging policies.
//
//	go run ./cmd/hedgesim -calls 20000 -seed 1
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/streamstall/streamstall/internal/textout"
)

func main() {
	calls := flag.Int("calls", 20000, "calls per policy and workload")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	if *calls < 1 {
		fmt.Fprintln(os.Stderr, "hedgesim: -calls must be at least 1")
		os.Exit(2)
	}
	if err := report(os.Stdout, *calls, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "hedgesim:", err)
		os.Exit(1)
	}
}

// report prints every table.
func report(out io.Writer, calls int, seed uint64) error {
	w := &textout.Printer{W: out}
	w.Printf("## %s\n\n", w1.name)
	printTable(w, runPolicies(w1, policiesW1(), calls, seed), time.Second, "s")
	w.Printf("\n## %s\n\n", w2.name)
	printTable(w, runPolicies(w2, policiesW2(), calls, seed), time.Millisecond, "ms")
	w.Printf("\n### W2: streamstall streaming, p99 against extra attempts by budget (tokenRatio)\n\n")
	printCurve(w, budgetCurve(calls, seed))
	fleetReport(w, min(fleetProcs, max(calls/fleetCallsPerProc, 1)), fleetCallsPerProc, seed)
	return w.Err
}

type row struct {
	name string
	st   stats
}

func runPolicies(w workload, specs []policySpec, calls int, seed uint64) []row {
	rows := make([]row, 0, len(specs))
	for _, spec := range specs {
		rows = append(rows, row{name: spec.name, st: newSimulator(w, spec, seed).run(calls)})
	}
	return rows
}

func printTable(w *textout.Printer, rows []row, unit time.Duration, unitName string) {
	w.Printf("| policy | p50 (%[1]s) | p95 (%[1]s) | p99 (%[1]s) | p99.9 (%[1]s) | extra attempts | wasted tokens / call | failed calls |\n", unitName)
	w.Printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	u := float64(unit)
	for _, r := range rows {
		w.Printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f %% | %.1f | %d |\n", r.name,
			r.st.quantile(0.5)/u, r.st.quantile(0.95)/u, r.st.quantile(0.99)/u, r.st.quantile(0.999)/u,
			r.st.extraPct(), r.st.wastedPerCall(), r.st.failed)
	}
}

type curvePoint struct {
	ratio float64
	st    stats
}

// budgetCurve runs W2's streamstall streaming policy at budgets of 5 to 30 %.
func budgetCurve(calls int, seed uint64) []curvePoint {
	var pts []curvePoint
	for pct := 5; pct <= 30; pct += 5 {
		spec := streamstallW2(float64(pct) / 100)
		pts = append(pts, curvePoint{ratio: float64(pct) / 100, st: newSimulator(w2, spec, seed).run(calls)})
	}
	return pts
}

func printCurve(w *textout.Printer, pts []curvePoint) {
	w.Printf("| budget (tokenRatio) | p50 (ms) | p99 (ms) | p99.9 (ms) | extra attempts |\n")
	w.Printf("| ---: | ---: | ---: | ---: | ---: |\n")
	for _, p := range pts {
		w.Printf("| %.0f %% | %.1f | %.1f | %.1f | %.1f %% |\n", 100*p.ratio,
			p.st.quantile(0.5)/1e6, p.st.quantile(0.99)/1e6, p.st.quantile(0.999)/1e6, p.st.extraPct())
	}
}

// fleetReport prints the fleet tables: procs short-lived processes of
// perProc calls each, and the feedback run.
func fleetReport(w *textout.Printer, procs, perProc int, seed uint64) {
	w.Printf("\n## Fleet: %d processes x %d calls, static delay, local learning, fleet advice\n", procs, perProc)
	w.Printf("\n### %s\n\n", w2.name)
	printFleet(w, fleetRows(w2, streamstallW2(0.3), 50*time.Millisecond, procs, perProc, seed), time.Millisecond, "ms")
	w.Printf("\n### %s\n\n", w1.name)
	printFleet(w, fleetRows(w1, policyNamed(policiesW1(), nameStreaming), 2*time.Second, procs, perProc, seed), time.Second, "s")
	w.Printf("\n### Feedback: %s, delay at the advised p75, %s\n\n", w1TTFT.name, feedbackDuration)
	printFeedback(w, feedbackRun(kmDelay, seed), feedbackRun(winnersDelay, seed))
}

// policyNamed returns the policy of that name.
func policyNamed(specs []policySpec, name string) policySpec {
	for _, s := range specs {
		if s.name == name {
			return s
		}
	}
	panic("hedgesim: no policy " + name)
}

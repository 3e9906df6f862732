// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func specNamed(t *testing.T, specs []policySpec, name string) policySpec {
	t.Helper()
	for _, s := range specs {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("no policy %q", name)
	return policySpec{}
}

func TestSimulationIsDeterministicBySeed(t *testing.T) {
	spec := specNamed(t, policiesW1(), nameContinue)
	a := newSimulator(w1, spec, 7).run(500)
	b := newSimulator(w1, spec, 7).run(500)
	c := newSimulator(w1, spec, 8).run(500)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a.completions, c.completions)

	var out1, out2 bytes.Buffer
	require.NoError(t, report(&out1, 100, 3))
	require.NoError(t, report(&out2, 100, 3))
	assert.Equal(t, out1.String(), out2.String())
}

func TestSimulationSamePrimaryLuckAcrossPolicies(t *testing.T) {
	// Without hedging or a watchdog every policy sees the same primaries:
	// a call that neither hedges nor stalls ends at the same instant.
	none := newSimulator(w1, specNamed(t, policiesW1(), nameNoHedge), 1).run(1000)
	codex := newSimulator(w1, specNamed(t, policiesW1(), nameWatchdog300), 1).run(1000)
	assert.Equal(t, none.quantile(0.5), codex.quantile(0.5))
	assert.Equal(t, none.quantile(0.95), codex.quantile(0.95))
}

// TestTargetsW1: the streamstall policies cut W1's p99 completion by at least
// half against the LangChain watchdog, with at most 12 % extra attempts.
func TestTargetsW1(t *testing.T) {
	const calls = targetCalls
	specs := policiesW1()
	baseline := newSimulator(w1, specNamed(t, specs, nameWatchdog120), 1).run(calls)
	for _, name := range []string{nameStreaming, nameBuffered, nameContinue} {
		st := newSimulator(w1, specNamed(t, specs, name), 1).run(calls)
		assert.LessOrEqual(t, st.quantile(0.99), 0.5*baseline.quantile(0.99), name)
		assert.LessOrEqual(t, st.extraPct(), 12.0, name)
	}
}

// TestTargetsW2: p99 at most 100 ms with at most 30 % extra attempts, where
// hedging on p95 alone cannot help.
func TestTargetsW2(t *testing.T) {
	const calls = targetCalls
	st := newSimulator(w2, streamstallW2(0.3), 1).run(calls)
	assert.LessOrEqual(t, st.quantile(0.99), 100e6)
	assert.LessOrEqual(t, st.extraPct(), 30.0)

	p95only := newSimulator(w2, specNamed(t, policiesW2(), nameTTFTOnly), 1).run(calls)
	assert.Greater(t, p95only.quantile(0.99), 200e6)
}

func TestBudgetCurveIsBoundedByTheBudget(t *testing.T) {
	const calls = 3000
	pts := budgetCurve(calls, 1)
	require.Len(t, pts, 6)
	for i, p := range pts {
		// The bucket's arithmetic: hedges never exceed the cushion above the
		// threshold (half of 100 tokens, plus the one that crosses it) plus
		// tokenRatio per successful call.
		bound := 100 * (p.ratio + 51.0/calls)
		assert.LessOrEqual(t, p.st.extraPct(), bound, "ratio %v", p.ratio)
		if i > 0 {
			assert.LessOrEqual(t, p.st.quantile(0.99), pts[i-1].st.quantile(0.99), "a larger budget never hurts p99")
		}
	}
}

func TestReportHasEveryPolicy(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, report(&out, 200, 1))
	for _, name := range []string{nameNoHedge, nameTTFTOnly, nameWatchdog120, nameWatchdog300, nameStreaming, nameBuffered, nameContinue, nameGuard} {
		assert.Equal(t, 2, strings.Count(out.String(), "| "+name+" |"), name)
	}
	assert.Contains(t, out.String(), "| 30 % |")
}

// TestGuardW1: the proxy guard's two attempts cut W1's p99 by at least half
// against the LangChain watchdog, as the Go client's streaming policy does,
// with at most 12 % extra attempts.
func TestGuardW1(t *testing.T) {
	const calls = targetCalls
	specs := policiesW1()
	baseline := newSimulator(w1, specNamed(t, specs, nameWatchdog120), 1).run(calls)
	st := newSimulator(w1, specNamed(t, specs, nameGuard), 1).run(calls)
	assert.LessOrEqual(t, st.quantile(0.99), 0.5*baseline.quantile(0.99))
	assert.LessOrEqual(t, st.extraPct(), 12.0)
}

// TestGuardIsTheClientsDecisionCode: given the Go client's streaming
// settings (three attempts), the guard's configuration makes the same
// decisions on every call of W2, where its ttft_timeout never fires: the
// rows differ by the guard's defaults, not by its code.
func TestGuardIsTheClientsDecisionCode(t *testing.T) {
	g := guardW2
	g.maxAttempts = 3
	guard := newSimulator(w2, guardSpec(g), 1).run(2000)
	client := newSimulator(w2, streamstallW2(0.3), 1).run(2000)
	assert.Equal(t, client, guard)

	// With its default two attempts both are slow in about 4 % of calls:
	// the p99 stays in the slow mode.
	two := newSimulator(w2, guardSpec(guardW2), 1).run(2000)
	assert.Greater(t, two.quantile(0.99), 150e6)
	assert.Less(t, two.quantile(0.95), 100e6)
}

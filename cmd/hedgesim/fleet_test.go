// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/textout"
)

// TestFleetTargetsW2: fresh processes of 20 calls on a warm advisor's advice
// reach a warm single process's p99 within 10 %, from their first call, at
// the same budget and about the same extra attempts; local learning alone
// never leaves the fallback and is far behind.
func TestFleetTargetsW2(t *testing.T) {
	spec := streamstallW2(0.3)
	warm := newSimulator(w2, spec, 1).run(fleetTestProcs * fleetCallsPerProc)
	fleet := runFleet(w2, spec, modeFleet, fleetTestProcs, fleetCallsPerProc, fleetWarmProcs, 1)
	local := runFleet(w2, spec, modeLocal, fleetTestProcs, fleetCallsPerProc, 0, 1)

	assert.LessOrEqual(t, fleet.all.quantile(0.99), 1.1*warm.quantile(0.99))
	assert.LessOrEqual(t, fleet.first.quantile(0.99), 1.1*warm.quantile(0.99), "from the first call")
	assert.LessOrEqual(t, fleet.all.extraPct(), warm.extraPct()+2)
	assert.Greater(t, local.all.quantile(0.99), 2*fleet.all.quantile(0.99), "local learning is the baseline to beat")
	assert.Len(t, fleet.first.completions, fleetTestProcs)
}

// TestFleetW1SpendsLikeAWarmProcess: on W1 the tail is the stalls', which
// the watchdog handles whatever the delay; fleet advice keeps the p99 and
// spends what a warm process spends, where fresh processes on the 2 s
// fallback hedge several times as often.
func TestFleetW1SpendsLikeAWarmProcess(t *testing.T) {
	const procs = 100
	spec := policyNamed(policiesW1(), nameStreaming)
	fleet := runFleet(w1, spec, modeFleet, procs, fleetCallsPerProc, fleetWarmProcs, 1)
	local := runFleet(w1, spec, modeLocal, procs, fleetCallsPerProc, 0, 1)
	warm := newSimulator(w1, spec, 1).run(procs * fleetCallsPerProc)
	assert.LessOrEqual(t, fleet.all.extraPct(), warm.extraPct()+3)
	assert.Greater(t, local.all.extraPct(), 2*fleet.all.extraPct())
	assert.LessOrEqual(t, fleet.all.quantile(0.99), 1.1*warm.quantile(0.99))
}

// TestFeedbackRun: hedging a quarter of the calls for 30 simulated minutes,
// the censoring-aware p95 stays within 5 % of the true p95 of single
// attempts, while the winners-only estimate is biased low.
func TestFeedbackRun(t *testing.T) {
	km := feedbackRun(kmDelay, 1)
	require.Len(t, km, 6)
	for _, r := range km {
		require.True(t, r.kmDefined, "minute %d", r.minute)
		assert.InEpsilon(t, trueP95, r.kmP95, 0.05, "minute %d", r.minute)
		assert.Less(t, r.winnersP95, 0.92*trueP95, "minute %d: winners-only is biased low", r.minute)
		assert.InDelta(t, 0.25, r.hedged, 0.03, "minute %d", r.minute)
	}
	winners := feedbackRun(winnersDelay, 1)
	for i, r := range winners {
		assert.Less(t, r.delay, km[i].delay, "minute %d: a winners-only advisor advises a shorter delay", r.minute)
		assert.Greater(t, r.hedged, km[i].hedged, "minute %d: and hedges more", r.minute)
	}
}

func TestFleetReportIsDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	fleetReport(&textout.Printer{W: &a}, 20, 5, 3)
	fleetReport(&textout.Printer{W: &b}, 20, 5, 3)
	assert.Equal(t, a.String(), b.String())
	assert.Contains(t, a.String(), "| fleet advice, advisor warm (100 processes before) |")
	assert.Contains(t, a.String(), "| 30 | 3.64 |")
}

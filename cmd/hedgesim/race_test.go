// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build race

package main

// The simulator is single-threaded: the race detector has nothing to find in
// it and slows it twentyfold, so race builds assert the targets on fewer
// calls (still deterministic, still 50 calls above the p99).
const targetCalls = 5000

// fleetTestProcs: fewer processes under the race detector.
const fleetTestProcs = 200

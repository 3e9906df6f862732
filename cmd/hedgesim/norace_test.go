// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !race

package main

// targetCalls is the number of calls the target tests simulate, as the
// README's table does.
const targetCalls = 20000

// fleetTestProcs is the number of processes the fleet target tests
// simulate, as the README's table does.
const fleetTestProcs = fleetProcs

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build race

package stallprocessor

// raceEnabled is true under the race detector, which makes sync.Pool drop
// items at random, so allocation counts are not meaningful.
const raceEnabled = true

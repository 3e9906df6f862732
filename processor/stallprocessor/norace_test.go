// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !race

package stallprocessor

const raceEnabled = false

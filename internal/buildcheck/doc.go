// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package buildcheck holds the tests that guard the module's build graph:
// the packages that end up in the collector build and in programs that
// import streamstall must never pull in a test helper (componenttest,
// consumertest, testify and the like). It has no code of its own.
package buildcheck // import "github.com/streamstall/streamstall/internal/buildcheck"

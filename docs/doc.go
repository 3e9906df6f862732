// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package docs holds the Markdown documentation and the tests that keep its
// samples to what the code really prints: a sample in a doc is a quote of a
// golden file or of a real run, never typed by hand.
package docs // import "github.com/streamstall/streamstall/docs"

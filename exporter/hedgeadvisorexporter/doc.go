// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package hedgeadvisorexporter implements the hedge advisor exporter (type
// "hedge_advisor"): it learns the time to first content and the inter-chunk
// gaps of a fleet's streaming LLM attempts, counting the attempts that
// hedging cancelled as right-censored samples, and serves hedge advice at
// GET /v1/hedge/advice, the way the prometheus exporter serves a scrape.
package hedgeadvisorexporter // import "github.com/streamstall/streamstall/exporter/hedgeadvisorexporter"

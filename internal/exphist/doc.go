// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package exphist is streamstall's OTLP exponential histogram, both sides of
// it: the writer the stall_metrics connector aggregates with (Histogram, a
// DDSketch whose buckets are, one for one, the buckets of an OTLP exponential
// histogram, over a Mapping of an OTLP scale), and the reader (Quantile, the
// quantile a reader such as Prometheus, Grafana or the demo reconstructs from
// the exported buckets). The tests check one against the other.
package exphist // import "github.com/streamstall/streamstall/internal/exphist"

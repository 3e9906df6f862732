// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package grafana holds streamstall.json, an importable Grafana dashboard
// over the stall_metrics connector's metrics as a Prometheus server stores
// them (native histograms), and the test that keeps its queries on the
// metric names the connector really emits.
package grafana // import "github.com/streamstall/streamstall/docs/grafana"

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package ingestanchor is the anchor of the ingest decoder's figure in
// docs/performance.md: encoding/json decoding the body of the ingest
// package's BenchmarkDecodeRecords into plain structs, with no check.
package ingestanchor

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package ssecapture implements the sse_capture receiver (docs/contract.md section 7): a
// reverse proxy in front of one LLM API that turns every call into a span
// with one event per content chunk, and an ingest endpoint for the chunk
// times any client measured itself.
package ssecapture // import "github.com/streamstall/streamstall/receiver/ssecapture"

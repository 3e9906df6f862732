// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package stallprocessor implements the stall processor (type "stall"): it
// derives the stream figures of docs/contract.md section 4 (time to first chunk, wall-clock
// and active generation time, stall time, count and positions) from the chunk
// events of streaming LLM spans, and flags hedge losers (docs/contract.md section 5).
package stallprocessor // import "github.com/streamstall/streamstall/processor/stallprocessor"

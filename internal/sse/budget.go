// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package sse

import "sync/atomic"

// Budget is a byte budget that parsers draw on for their buffers; it must
// be safe for concurrent use.
type Budget interface {
	// Take draws n bytes, or reports false (and draws nothing) when the
	// budget has fewer left.
	Take(n int) bool
	// Return gives back n bytes drawn earlier.
	Return(n int)
}

// SharedBudget is a Budget of a fixed number of bytes, shared by any
// number of parsers (the streams of one proxy).
type SharedBudget struct {
	max  int64
	used atomic.Int64
}

var _ Budget = (*SharedBudget)(nil)

// NewSharedBudget returns a budget of maxBytes.
func NewSharedBudget(maxBytes int64) *SharedBudget { return &SharedBudget{max: maxBytes} }

// Take implements Budget.
func (b *SharedBudget) Take(n int) bool {
	if b.used.Add(int64(n)) > b.max {
		b.used.Add(-int64(n))
		return false
	}
	return true
}

// Return implements Budget.
func (b *SharedBudget) Return(n int) { b.used.Add(-int64(n)) }

// Used is the number of bytes drawn and not given back.
func (b *SharedBudget) Used() int64 { return b.used.Load() }

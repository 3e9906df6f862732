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

// growBuffer makes room for n more bytes in b, for a parser that holds up
// to free bytes a buffer of its own and draws what passes them on budget
// (nil: none); ok is false when the budget cannot take them. Every framing's
// parser grows its frame buffer here, so that the streams of one proxy hold
// at most the budget together whatever their framing.
func growBuffer(budget Budget, free, maxSize int, b []byte, n int) (_ []byte, ok bool) {
	need := len(b) + n
	if need <= cap(b) {
		return b, true
	}
	// Doubling, or a quarter more when the budget cannot take a double:
	// growing by what is needed alone would copy a large frame once per
	// read, and leave that much garbage.
	size := max(need, min(2*cap(b), maxSize))
	if budget != nil && size > free {
		held := max(cap(b)-free, 0)
		if !budget.Take(size - free - held) {
			size = max(need, cap(b)+cap(b)/4)
			if size > free && !budget.Take(size-free-held) {
				return b, false
			}
		}
	}
	// The budget now holds the new buffer's bytes past free: what the old
	// one held, and the difference just taken.
	nb := make([]byte, len(b), size)
	copy(nb, b)
	return nb, true
}

// releaseBuffer empties a buffer grown by growBuffer: one that grew past
// free is let go, and what it drew on budget (nil: none) given back, so
// that an idle stream holds at most free bytes.
func releaseBuffer(budget Budget, free int, b []byte) []byte {
	if cap(b) <= free {
		return b[:0]
	}
	if budget != nil {
		budget.Return(cap(b) - free)
	}
	return nil
}

// freeOr returns n, or keepBufferCap when n is not positive: the bytes a
// buffer holds of its own, less in tests.
func freeOr(n int) int {
	if n > 0 {
		return n
	}
	return keepBufferCap
}

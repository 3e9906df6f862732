// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import "bytes"

// sequenceKey is the key of the Responses API's event counter. It cannot
// occur unescaped inside a JSON string (a string's quotes are escaped), so
// every match in the bytes is a key.
const sequenceKey = `"sequence_number"`

// maxSequenceDigits bounds the digits read of one sequence number: past
// it the value is not one a stream carries, and int64 would overflow.
const maxSequenceDigits = 18

type sequenceState uint8

const (
	seqIdle   sequenceState = iota // looking for the key
	seqKey                         // matched part of the key at the end of the last bytes
	seqColon                       // after the key, before the colon
	seqValue                       // after the colon, before the first digit
	seqDigits                      // in the number
)

// sequenceTracker follows the sequence_number values of a Responses
// stream over the bytes a client was given, however the reads cut them,
// without buffering: the error frame that ends the stream carries the next
// one. A bytes.Index per read finds the key; only a match cut by the end of
// a read is carried to the next one, in a few bytes of state.
type sequenceTracker struct {
	state   sequenceState
	matched int // bytes of the key matched, in seqKey
	// quoted: in seqColon, the last byte was the key's closing quote,
	// which may open a key of its own.
	quoted bool
	digits int
	value  int64
	next   int64 // one past the largest value seen
}

// Next returns the sequence number that follows the last one the bytes
// carried (the largest, should an object nest another), 0 before any.
func (t *sequenceTracker) Next() int64 { return t.next }

func (t *sequenceTracker) track(p []byte) {
	for len(p) > 0 {
		if t.state == seqIdle {
			i := bytes.Index(p, []byte(sequenceKey))
			if i < 0 {
				t.keySuffix(p)
				return
			}
			t.state, t.quoted, p = seqColon, true, p[i+len(sequenceKey):]
			continue
		}
		p = t.step(p)
	}
}

// keySuffix remembers a start of the key at the end of p. The key has a
// quote only at its ends, so at most one of its prefixes can end p, and it
// starts at the last quote.
func (t *sequenceTracker) keySuffix(p []byte) {
	q := bytes.LastIndexByte(p[max(0, len(p)-len(sequenceKey)+1):], '"')
	if q < 0 {
		return
	}
	tail := p[max(0, len(p)-len(sequenceKey)+1)+q:]
	if bytes.HasPrefix([]byte(sequenceKey), tail) {
		t.state, t.matched = seqKey, len(tail)
	}
}

// step goes on with a match across the start of p and returns the bytes
// after the point where it resolved.
func (t *sequenceTracker) step(p []byte) []byte {
	for i, c := range p {
		switch t.state {
		case seqKey:
			if c != sequenceKey[t.matched] {
				t.state = seqIdle
				return p[i:] // the byte may start a key itself
			}
			if t.matched++; t.matched == len(sequenceKey) {
				t.state, t.quoted = seqColon, true
			}
		case seqColon:
			switch {
			case c == ':':
				t.state = seqValue
			case isJSONSpace(c):
				t.quoted = false
			case t.quoted:
				// Not JSON, but the bytes are what they are: the key's
				// closing quote may be the opening one of another key.
				t.state, t.matched = seqKey, 1
				return p[i:]
			default:
				t.state = seqIdle
				return p[i:]
			}
		case seqValue:
			switch {
			case c >= '0' && c <= '9':
				t.state, t.digits, t.value = seqDigits, 1, int64(c-'0')
			case !isJSONSpace(c):
				t.state = seqIdle
				return p[i:]
			}
		case seqDigits:
			if c < '0' || c > '9' {
				t.next = max(t.next, t.value+1)
				t.state = seqIdle
				return p[i:]
			}
			if t.digits++; t.digits > maxSequenceDigits {
				t.state = seqIdle // no counter of a real stream: ignored
				return p[i+1:]
			}
			t.value = t.value*10 + int64(c-'0')
		}
	}
	return nil
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

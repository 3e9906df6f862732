// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package sse

type arrayState uint8

const (
	// arrayTop: between top-level values; a '[' opens an array, anything
	// else but white space starts a bare value.
	arrayTop arrayState = iota
	// arrayBefore: after '[' or ',', before an element.
	arrayBefore
	// arrayAfter: after an element, before ',' or ']'.
	arrayAfter
	// arrayElem: inside an element (or a bare value).
	arrayElem
)

// ArrayParser cuts a JSON array sent element by element (Gemini's
// streamGenerateContent without alt=sse) into events, one per element:
// Event.Data is the element's JSON text, Event.End the offset just past it.
// An object or array element is dispatched the moment its closing bracket
// arrives, not when the comma after it does, so that its time is its own.
// The parser checks structure only (brackets, strings, escapes), not JSON
// grammar: what an element means is the classifier's business. A top-level
// value that is not an array (an error object) is one event. The zero
// value is ready to use; set Handler. An oversized element is skipped and
// counted, and parsing goes on after it, as Parser does with events; so is
// one the Budget cannot take.
type ArrayParser struct {
	// Handler is called once per element; the event is only valid during the call.
	Handler func(ev *Event)
	// MaxEventSize bounds the bytes buffered for one element; zero means
	// DefaultMaxEventSize.
	MaxEventSize int
	// Budget, when set, is drawn on for the bytes of an unfinished element
	// past a free 64 KiB, as Parser's Budget is.
	Budget Budget

	offset    int64
	state     arrayState
	bare      bool // the element is a top-level value, not in an array
	depth     int  // open brackets of the element
	inString  bool
	escaped   bool
	scalar    bool // a number or literal element: it ends at a delimiter
	elem      []byte
	skipping  bool
	oversized int64
	ev        Event
	freeBytes int // keepBufferCap, or less in tests
}

// Feed parses b, calling Handler for each element it completes.
func (p *ArrayParser) Feed(b []byte) { feed(p, p.Handler, b) }

// Write implements io.Writer over Feed; it never fails.
func (p *ArrayParser) Write(b []byte) (int, error) {
	p.Feed(b)
	return len(b), nil
}

// Flush ends the stream: a number or literal at its very end is complete;
// an unfinished object, array or string is discarded.
func (p *ArrayParser) Flush() {
	if p.flush() && p.Handler != nil {
		p.Handler(&p.ev)
	}
	p.ev = Event{}
}

// Offset returns the number of bytes parsed so far.
func (p *ArrayParser) Offset() int64 { return p.offset }

// Oversized returns the number of elements skipped so far for their size.
func (p *ArrayParser) Oversized() int64 { return p.oversized }

// Pending reports whether an unfinished element is buffered (or being skipped).
func (p *ArrayParser) Pending() bool { return p.state == arrayElem }

// Reset makes the parser ready for a new stream, keeping its buffer.
func (p *ArrayParser) Reset() {
	p.offset, p.state, p.bare, p.depth = 0, arrayTop, false, 0
	p.inString, p.escaped, p.scalar, p.skipping, p.oversized = false, false, false, false, 0
	p.elem = p.release()
}

func (p *ArrayParser) release() []byte { return releaseBuffer(p.Budget, freeOr(p.freeBytes), p.elem) }

// buffer appends b to the unfinished element, or reports false when the
// element would pass the size limit or the budget.
func (p *ArrayParser) buffer(b []byte) bool {
	if len(p.elem)+len(b) > p.maxSize() {
		return false
	}
	elem, ok := growBuffer(p.Budget, freeOr(p.freeBytes), p.maxSize(), p.elem, len(b))
	if !ok {
		return false
	}
	p.elem = append(elem, b...) //nolint:gocritic // elem is p.elem grown: the same buffer
	return true
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *ArrayParser) next(b []byte) (n int, d dispatch) {
	defer func() { p.offset += int64(n) }()
	for n < len(b) && p.state != arrayElem {
		c := b[n]
		switch {
		case isJSONSpace(c):
		case p.state == arrayTop && c == '[':
			p.state = arrayBefore
		case p.state == arrayTop && (c == ',' || c == ']'):
			// Stray punctuation between top-level values carries nothing.
		case p.state != arrayTop && c == ',':
			p.state = arrayBefore
		case p.state != arrayTop && c == ']':
			p.state = arrayTop
		default:
			// An element; after another element without a comma too, to
			// resynchronize on what a sloppy server sends.
			p.begin(c, p.state == arrayTop)
			n++
			return p.scan(b, n-1, n)
		}
		n++
	}
	if n == len(b) {
		return n, dispatchNone
	}
	return p.scan(b, n, n)
}

// begin starts an element whose first byte is c.
func (p *ArrayParser) begin(c byte, bare bool) {
	p.state, p.bare, p.depth, p.inString, p.escaped, p.scalar = arrayElem, bare, 0, false, false, false
	switch c {
	case '{', '[':
		p.depth = 1
	case '"':
		p.inString = true
	default:
		p.scalar = true
	}
}

// scan goes on with the element from b[from:], b[start:from] being bytes of
// it already scanned, and dispatches it if it ends in b.
func (p *ArrayParser) scan(b []byte, start, from int) (int, dispatch) {
	end, done := p.advance(b, from)
	if !p.skipping {
		if len(p.elem)+end-start > p.maxSize() || (!done || len(p.elem) > 0) && !p.buffer(b[start:end]) {
			p.oversized++
			p.skipping = true
			p.elem = p.release()
		}
	}
	if !done {
		return end, dispatchNone
	}
	return end, p.complete(b[start:end], end)
}

// complete ends the element; data is its bytes when they all came in the
// last Feed (the buffer holds them otherwise).
func (p *ArrayParser) complete(data []byte, end int) dispatch {
	p.state = arrayAfter
	if p.bare {
		p.state = arrayTop
	}
	if p.skipping {
		p.skipping = false
		return dispatchNone
	}
	if len(p.elem) > 0 {
		data = p.elem
	}
	p.ev = Event{Data: data, Retry: -1, End: p.offset + int64(end)}
	// The bytes stay readable until the next call appends to the buffer
	// (a large one, given back to the budget, until the event is dropped).
	p.elem = p.release()
	return dispatchEvent
}

// advance scans the element from b[from:] and returns the index just past
// its last byte, or len(b) when it goes on.
func (p *ArrayParser) advance(b []byte, from int) (int, bool) {
	for i := from; i < len(b); i++ {
		c := b[i]
		switch {
		case p.scalar:
			if isJSONSpace(c) || c == ',' || c == ']' || c == '}' || c == '[' || c == '{' || c == '"' {
				return i, true
			}
		case p.inString:
			switch {
			case p.escaped:
				p.escaped = false
			case c == '\\':
				p.escaped = true
			case c == '"':
				p.inString = false
				if p.depth == 0 {
					return i + 1, true
				}
			}
		case c == '"':
			p.inString = true
		case c == '{' || c == '[':
			p.depth++
		case c == '}' || c == ']':
			p.depth--
			if p.depth == 0 {
				return i + 1, true
			}
		}
	}
	return len(b), false
}

func (p *ArrayParser) maxSize() int { return maxOr(p.MaxEventSize) }

func (p *ArrayParser) flush() bool {
	if p.state != arrayElem || !p.scalar {
		p.state, p.skipping, p.elem = arrayTop, false, p.release()
		return false
	}
	return p.complete(nil, 0) == dispatchEvent
}

func (p *ArrayParser) event() *Event    { return &p.ev }
func (p *ArrayParser) skipped() int64   { return p.oversized }
func (p *ArrayParser) setMaxSize(n int) { p.MaxEventSize = n }

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package sse

import "bytes"

// LineParser cuts newline-delimited JSON (NDJSON, the framing of Ollama's
// native API) into events, one per line: Event.Data is the line without its
// line end and surrounding white space, Event.End the offset past its LF.
// Blank lines are no events. A last line without its LF is dispatched by
// Flush, as JSON Lines allows. The zero value is ready to use; set Handler.
// An oversized line is skipped, counted and resynchronized at the next LF,
// as Parser does with events; so is one the Budget cannot take.
type LineParser struct {
	// Handler is called once per line; the event is only valid during the call.
	Handler func(ev *Event)
	// MaxEventSize bounds the bytes buffered for one line; zero means
	// DefaultMaxEventSize.
	MaxEventSize int
	// Budget, when set, is drawn on for the bytes of an unfinished line
	// past a free 64 KiB, as Parser's Budget is.
	Budget Budget

	offset    int64
	line      []byte
	skipping  bool
	oversized int64
	ev        Event
	freeBytes int // keepBufferCap, or less in tests
}

// Feed parses b, calling Handler for each line it completes.
func (p *LineParser) Feed(b []byte) { feed(p, p.Handler, b) }

// Write implements io.Writer over Feed; it never fails.
func (p *LineParser) Write(b []byte) (int, error) {
	p.Feed(b)
	return len(b), nil
}

// Flush dispatches a last line the stream ended without a line feed.
func (p *LineParser) Flush() {
	if p.flush() && p.Handler != nil {
		p.Handler(&p.ev)
	}
	p.ev = Event{}
}

// Offset returns the number of bytes parsed so far.
func (p *LineParser) Offset() int64 { return p.offset }

// Oversized returns the number of lines skipped so far for their size.
func (p *LineParser) Oversized() int64 { return p.oversized }

// Pending reports whether an unfinished line is buffered (or being skipped).
func (p *LineParser) Pending() bool { return len(p.line) > 0 || p.skipping }

// Reset makes the parser ready for a new stream, keeping a small buffer.
func (p *LineParser) Reset() {
	p.offset, p.line, p.skipping, p.oversized = 0, p.release(), false, 0
}

// buffer appends b to the unfinished line, or reports false when the
// line would pass the size limit or the budget.
func (p *LineParser) buffer(b []byte) bool {
	if len(p.line)+len(b) > p.maxSize() {
		return false
	}
	line, ok := growBuffer(p.Budget, freeOr(p.freeBytes), p.maxSize(), p.line, len(b))
	if !ok {
		return false
	}
	p.line = append(line, b...) //nolint:gocritic // line is p.line grown: the same buffer
	return true
}

func (p *LineParser) release() []byte { return releaseBuffer(p.Budget, freeOr(p.freeBytes), p.line) }

func (p *LineParser) maxSize() int { return maxOr(p.MaxEventSize) }

func (p *LineParser) next(b []byte) (n int, d dispatch) {
	defer func() { p.offset += int64(n) }()
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		if !p.skipping && !p.buffer(b) {
			p.oversize()
		}
		return len(b), dispatchNone
	}
	n = i + 1
	if p.skipping {
		p.skipping = false
		return n, dispatchNone
	}
	line := b[:i]
	if len(p.line)+i > p.maxSize() || len(p.line) > 0 && !p.buffer(line) {
		p.oversize()
		p.skipping = false
		return n, dispatchNone
	}
	if len(p.line) > 0 {
		line = p.line
	}
	d = p.dispatch(line, p.offset+int64(n))
	// The bytes stay readable until the next call appends to the buffer
	// (a large one, given back to the budget, until the event is dropped).
	p.line = p.release()
	return n, d
}

func (p *LineParser) oversize() {
	p.oversized++
	p.skipping = true
	p.line = p.release()
}

func (p *LineParser) dispatch(line []byte, end int64) dispatch {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return dispatchNone
	}
	p.ev = Event{Data: line, Retry: -1, End: end}
	return dispatchEvent
}

func (p *LineParser) flush() bool {
	if p.skipping {
		p.skipping = false
		return false
	}
	d := p.dispatch(p.line, p.offset)
	p.line = p.release()
	return d == dispatchEvent
}

func (p *LineParser) event() *Event    { return &p.ev }
func (p *LineParser) skipped() int64   { return p.oversized }
func (p *LineParser) setMaxSize(n int) { p.MaxEventSize = n }

// maxOr returns n, or DefaultMaxEventSize when n is not positive.
func maxOr(n int) int {
	if n > 0 {
		return n
	}
	return DefaultMaxEventSize
}

// stepper is a push-style framer driven one step at a time, by Feed and by
// Reader.
type stepper interface {
	// next consumes bytes of b (at least one of a non-empty b) up to the end
	// of at most one event and reports whether it dispatched one, then in
	// event().
	next(b []byte) (int, dispatch)
	// flush ends the stream: it reports whether that completed an event.
	flush() bool
	event() *Event
	skipped() int64
	setMaxSize(n int)
}

func feed(s stepper, handler func(*Event), b []byte) {
	for len(b) > 0 {
		n, d := s.next(b)
		b = b[n:]
		if d != dispatchNone && handler != nil {
			handler(s.event())
			// The event may alias a buffer given back to the budget.
			*s.event() = Event{}
		}
	}
}

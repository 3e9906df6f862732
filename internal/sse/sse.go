// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package sse cuts streamed LLM response bodies into events, incrementally.
// Mostly they are Server-Sent Events, parsed as the WHATWG HTML standard
// ("9.2 Server-sent events", event stream interpretation) defines them:
// fields event, data, id and retry, multi-line data, comments, CR, LF and
// CRLF line ends (Google ends its events with CRLF CRLF), a leading byte
// order mark, and lines split across reads. Three APIs stream other framings,
// cut into the same Event: newline-delimited JSON (Ollama: LineParser), a
// JSON array sent element by element (Gemini without alt=sse: ArrayParser)
// and the AWS event stream's binary messages (Bedrock: EventStreamParser).
//
// Parser, LineParser, ArrayParser and EventStreamParser are push-style (feed them bytes as they
// arrive, they call back per event); Reader is pull-style over an io.Reader.
// All reuse their buffers, so the slices of an Event are only valid until
// the next call into them.
package sse

import (
	"bytes"
	"errors"
	"io"
	"strconv"
)

// DefaultMaxEventSize bounds the bytes one event (or one line) may buffer
// when MaxEventSize is zero: a hostile upstream cannot grow memory forever.
const DefaultMaxEventSize = 8 << 20

// ErrEventTooLarge is returned by Reader.Next once an event or a line
// exceeded the size limit; the Reader stays in that state. A Parser skips
// such an event instead (see Parser.Oversized).
var ErrEventTooLarge = errors.New("sse: event exceeds the size limit")

// Buffers that grew past this while holding an oversized event are
// released rather than kept for reuse.
const keepBufferCap = 64 << 10

// Event is one dispatched event, or one comment line when Comment is true.
// Its slices alias the parser's buffers: copy what must outlive the callback
// (or the next call to Reader.Next).
type Event struct {
	// Type is the value of the last "event" field, empty when none was given
	// (the standard then names the event "message").
	Type []byte
	// Data is the data buffer without its final line feed; for a comment, the
	// text after the colon.
	Data []byte
	// ID is the last event ID in force when the event was dispatched.
	ID []byte
	// Retry is the reconnection time in milliseconds of the last valid
	// "retry" field since the previous dispatch, or -1.
	Retry int64
	// Comment marks a comment line (": keepalive").
	Comment bool
	// MessageType is the ":message-type" header of an AWS event stream
	// message (event, exception or error), nil in the other framings.
	MessageType []byte
	// End is the stream offset just past the line end that completed the
	// event: bytes [0, End) hold the event. For a CRLF line end, End counts
	// the CR only, so that End does not depend on how the stream was split
	// (the LF may not have arrived yet when the event is dispatched).
	End int64
}

// Name returns the event type as the standard dispatches it: "message" when
// no event field was given.
func (e *Event) Name() []byte {
	if len(e.Type) == 0 {
		return messageType
	}
	return e.Type
}

var (
	messageType = []byte("message")
	bom         = [3]byte{0xEF, 0xBB, 0xBF}
)

type dispatch uint8

const (
	dispatchNone dispatch = iota
	dispatchEvent
	dispatchComment
)

// Parser is an incremental event stream parser. The zero value is ready to
// use; set Handler to receive events. Parser is not safe for concurrent use.
//
// An oversized event (a line longer than MaxEventSize, or data lines adding
// up to more) is skipped, not fatal: the parser drops it, and everything up
// to the next blank line, without buffering those bytes, counts it (see
// Oversized), and parses on from there. Memory thus stays bounded by
// MaxEventSize whatever the stream holds.
type Parser struct {
	// Handler is called once per dispatched event and once per comment line.
	// The event and its slices are only valid during the call.
	Handler func(ev *Event)
	// MaxEventSize bounds the bytes buffered for one line or one event's
	// data; zero means DefaultMaxEventSize.
	MaxEventSize int
	// Budget, when set, is drawn on for the bytes of the line and data
	// buffers beyond a free 64 KiB each, and given back once the event is
	// done: parsers that share it hold at most its bytes together. An
	// event the budget cannot take is skipped like an oversized one.
	Budget Budget

	offset  int64
	bomSeen int  // bytes of a leading BOM matched so far
	bomDone bool // the BOM check is over
	skipLF  bool // the last line ended with CR: a following LF is part of it
	partial []byte
	evType  []byte
	data    []byte
	id      []byte
	retry   int64
	retried bool
	ev      Event

	// freeBytes is keepBufferCap, or less in tests.
	freeBytes int

	skipping  bool  // inside an oversized event: drop lines up to a blank one
	skipMid   bool  // ... and the current line has bytes already
	oversized int64 // events skipped for their size
}

// Feed parses b, calling Handler for each event and comment it completes.
func (p *Parser) Feed(b []byte) {
	for len(b) > 0 {
		n, d := p.next(b)
		b = b[n:]
		if d != dispatchNone && p.Handler != nil {
			p.Handler(&p.ev)
			// The event may alias a buffer given back to the budget.
			p.ev = Event{}
		}
	}
}

// Write implements io.Writer over Feed; it never fails.
func (p *Parser) Write(b []byte) (int, error) {
	p.Feed(b)
	return len(b), nil
}

// Offset returns the number of bytes parsed so far.
func (p *Parser) Offset() int64 { return p.offset }

// Oversized returns the number of events skipped so far because they
// exceeded MaxEventSize (one still being skipped included).
func (p *Parser) Oversized() int64 { return p.oversized }

// Pending reports whether an unfinished line or event is buffered (or being
// skipped): at the end of a stream, such an event is discarded as the
// standard says.
func (p *Parser) Pending() bool { return len(p.partial) > 0 || len(p.data) > 0 || p.skipping }

// Reset makes the parser ready for a new stream, keeping its buffers.
func (p *Parser) Reset() {
	p.offset, p.bomSeen, p.bomDone, p.skipLF = 0, 0, false, false
	p.partial, p.evType, p.data, p.id = p.release(p.partial), p.evType[:0], p.release(p.data), p.id[:0]
	p.retry, p.retried = -1, false
	p.skipping, p.skipMid, p.oversized = false, false, 0
}

// skip drops the event being built and skips the rest of it, up to the next
// blank line. mid says whether the line being read continues.
func (p *Parser) skip(mid bool) {
	p.oversized++
	p.skipping, p.skipMid = true, mid
	p.partial, p.data, p.evType = p.release(p.partial), p.release(p.data), p.evType[:0]
	p.retried = false
}

// release empties a buffer: one that grew past keepBufferCap is let go,
// and what it drew on the budget given back.
func (p *Parser) release(b []byte) []byte { return releaseBuffer(p.Budget, p.free(), b) }

// grow makes room for n more bytes in b, drawing on the budget for what
// passes keepBufferCap; ok is false when the budget cannot take it.
func (p *Parser) grow(b []byte, n int) ([]byte, bool) {
	return growBuffer(p.Budget, p.free(), p.maxSize(), b, n)
}

func (p *Parser) free() int { return freeOr(p.freeBytes) }

func (p *Parser) maxSize() int { return maxOr(p.MaxEventSize) }

// Flush ends the stream. An unfinished event is discarded, as the standard
// says: Flush dispatches nothing and is there for the framings that do.
func (p *Parser) Flush() { p.flush() }

func (p *Parser) flush() bool {
	p.partial, p.data, p.evType, p.skipping, p.skipLF = p.partial[:0], p.data[:0], p.evType[:0], false, false
	return false
}

func (p *Parser) event() *Event    { return &p.ev }
func (p *Parser) skipped() int64   { return p.oversized }
func (p *Parser) setMaxSize(n int) { p.MaxEventSize = n }

// next consumes bytes of b up to the end of at most one line and reports
// whether that line dispatched an event or a comment (then in p.ev). It always
// consumes at least one byte of a non-empty b.
func (p *Parser) next(b []byte) (n int, d dispatch) {
	defer func() { p.offset += int64(n) }()
	if !p.bomDone {
		for n < len(b) && b[n] == bom[p.bomSeen] {
			n++
			p.bomSeen++
			if p.bomSeen == len(bom) {
				p.bomDone = true
				break
			}
		}
		if !p.bomDone {
			if n == len(b) {
				return n, dispatchNone
			}
			// Not a BOM after all: what matched is the start of the first line.
			if b, ok := p.grow(p.partial, p.bomSeen); ok {
				p.partial = append(b, bom[:p.bomSeen]...) //nolint:gocritic // b is p.partial grown: the same buffer
			}
			p.bomDone = true
		}
	}
	if p.skipLF && n < len(b) {
		p.skipLF = false
		if b[n] == '\n' {
			n++
		}
	}
	seg := b[n:]
	if len(seg) == 0 {
		return n, dispatchNone
	}
	end := lineEnd(seg)
	if p.skipping {
		if end < 0 {
			p.skipMid = true
			return len(b), dispatchNone
		}
		n += p.consumeEnd(seg, end)
		if end == 0 && !p.skipMid {
			// A blank line: the oversized event ends here.
			p.skipping = false
		}
		p.skipMid = false
		return n, dispatchNone
	}
	if end < 0 {
		var ok bool
		if len(p.partial)+len(seg) <= p.maxSize() {
			p.partial, ok = p.grow(p.partial, len(seg))
		}
		if !ok {
			p.skip(true)
			return len(b), dispatchNone
		}
		p.partial = append(p.partial, seg...)
		return len(b), dispatchNone
	}
	line := seg[:end]
	n += end + 1
	endOffset := p.offset + int64(n) // past the first terminator byte, whatever the split
	n += p.consumeEnd(seg, end) - (end + 1)
	if len(p.partial)+len(line) > p.maxSize() {
		p.skip(false)
		return n, dispatchNone
	}
	inPartial := len(p.partial) > 0
	if inPartial {
		var ok bool
		if p.partial, ok = p.grow(p.partial, len(line)); !ok {
			p.skip(false)
			return n, dispatchNone
		}
		p.partial = append(p.partial, line...)
		line = p.partial
	}
	d = p.processLine(line, endOffset, inPartial)
	// A comment's event may alias the line: Feed clears it after the
	// handler, a Reader's caller holds it until the next call.
	p.partial = p.release(p.partial)
	return n, d
}

// lineEnd returns the index of the first CR or LF of seg, or -1.
func lineEnd(seg []byte) int {
	end := bytes.IndexByte(seg, '\n')
	scan := seg
	if end >= 0 {
		scan = seg[:end]
	}
	if cr := bytes.IndexByte(scan, '\r'); cr >= 0 {
		end = cr
	}
	return end
}

// consumeEnd returns how many bytes of seg the line ending at end takes,
// its terminator included; a CR that ends seg may still see its LF, which
// the next call then skips.
func (p *Parser) consumeEnd(seg []byte, end int) int {
	n := end + 1
	if seg[end] == '\r' {
		if end+1 < len(seg) {
			if seg[end+1] == '\n' {
				n++
			}
		} else {
			p.skipLF = true
		}
	}
	return n
}

// processLine processes one complete line; inPartial says that it is
// p.partial, whose buffer a first data line then takes over rather than
// being copied (a large line is held once, not twice).
func (p *Parser) processLine(line []byte, end int64, inPartial bool) dispatch {
	if len(line) == 0 {
		return p.dispatch(end)
	}
	if line[0] == ':' {
		p.ev = Event{Data: line[1:], Comment: true, Retry: -1, End: end, ID: p.id}
		return dispatchComment
	}
	field, value := line, line[len(line):]
	if colon := bytes.IndexByte(line, ':'); colon >= 0 {
		field, value = line[:colon], line[colon+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(field) {
	case "event":
		// Event types are words; one past the free buffer size is no
		// event of any API, and is skipped rather than held.
		if len(value) > p.free() {
			p.skip(false)
			return dispatchNone
		}
		p.evType = append(p.evType[:0], value...)
	case "data":
		if inPartial && len(p.data) == 0 && len(value) < p.maxSize() && len(value) < cap(p.partial) {
			n := copy(p.partial, value)                                 // value lies within p.partial: copy moves it
			p.data, p.partial = append(p.partial[:n], '\n'), p.data[:0] //nolint:gocritic // the two buffers swap: data takes partial's array
			return dispatchNone
		}
		var ok bool
		if len(p.data)+len(value) < p.maxSize() {
			p.data, ok = p.grow(p.data, len(value)+1)
		}
		if !ok {
			p.skip(false)
			return dispatchNone
		}
		p.data = append(p.data, value...)
		p.data = append(p.data, '\n')
	case "id":
		// An id past the free buffer size is ignored, as one with a NUL is.
		if bytes.IndexByte(value, 0) < 0 && len(value) <= p.free() {
			p.id = append(p.id[:0], value...)
		}
	case "retry":
		if ms, ok := parseDigits(value); ok {
			p.retry, p.retried = ms, true
		}
	}
	return dispatchNone
}

func (p *Parser) dispatch(end int64) dispatch {
	if len(p.data) == 0 {
		// Nothing to dispatch, but a dispatch point all the same: a retry
		// field before it belongs to no later event.
		p.evType, p.retried = p.evType[:0], false
		return dispatchNone
	}
	retry := int64(-1)
	if p.retried {
		retry = p.retry
	}
	p.ev = Event{Type: p.evType, Data: p.data[:len(p.data)-1], ID: p.id, Retry: retry, End: end}
	// The slices stay readable until the next line is processed, because
	// resetting a length does not touch the bytes (and a released buffer
	// stays alive while the event refers to it).
	p.evType, p.data, p.retried = p.evType[:0], p.release(p.data), false
	return dispatchEvent
}

// parseDigits accepts only ASCII digits, as the standard's retry field does.
func parseDigits(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	ms, err := strconv.ParseInt(string(v), 10, 64)
	return ms, err == nil
}

// Splitter is what Parser, LineParser and ArrayParser have in common, for
// code that reads any of the framings.
type Splitter interface {
	Feed(b []byte)
	// Flush ends the stream, dispatching what its end completes.
	Flush()
	Offset() int64
	Oversized() int64
	Pending() bool
	// Reset discards an unfinished frame, giving its buffers back to the
	// budget, and starts a new stream.
	Reset()
}

var (
	_ Splitter = (*Parser)(nil)
	_ Splitter = (*LineParser)(nil)
	_ Splitter = (*ArrayParser)(nil)
	_ Splitter = (*EventStreamParser)(nil)
)

// Framing names how a streamed body is cut into events.
type Framing uint8

const (
	// FramingSSE is Server-Sent Events (text/event-stream).
	FramingSSE Framing = iota
	// FramingNDJSON is one JSON value a line (application/x-ndjson).
	FramingNDJSON
	// FramingJSONArray is a JSON array streamed element by element.
	FramingJSONArray
	// FramingEventStream is the AWS event stream
	// (application/vnd.amazon.eventstream), binary messages.
	FramingEventStream
)

func (f Framing) String() string {
	switch f {
	case FramingNDJSON:
		return "ndjson"
	case FramingJSONArray:
		return "json_array"
	case FramingEventStream:
		return "event_stream"
	}
	return "sse"
}

// NewSplitter returns the push-style parser of framing f, calling handler
// per event and bounding an event to maxEventSize bytes (0: the default).
func NewSplitter(f Framing, maxEventSize int, handler func(ev *Event)) Splitter {
	return NewBudgetedSplitter(f, maxEventSize, nil, handler)
}

// NewBudgetedSplitter is NewSplitter with the parser drawing on budget for
// its unfinished frames past a free 64 KiB (nil: no budget), whatever the
// framing.
func NewBudgetedSplitter(f Framing, maxEventSize int, budget Budget, handler func(ev *Event)) Splitter {
	switch f {
	case FramingNDJSON:
		return &LineParser{Handler: handler, MaxEventSize: maxEventSize, Budget: budget}
	case FramingJSONArray:
		return &ArrayParser{Handler: handler, MaxEventSize: maxEventSize, Budget: budget}
	case FramingEventStream:
		return &EventStreamParser{Handler: handler, MaxEventSize: maxEventSize, Budget: budget}
	}
	return &Parser{Handler: handler, MaxEventSize: maxEventSize, Budget: budget}
}

// Reader reads events from an io.Reader, one per call to Next.
type Reader struct {
	// Comments makes Next return comment lines too (Event.Comment set), for
	// clients that track keepalives. Only Server-Sent Events have comments.
	Comments bool

	r     io.Reader
	p     stepper
	buf   []byte
	start int
	end   int
	err   error
	ended bool // the stream's end was flushed
}

// NewReader returns a Reader of Server-Sent Events over r.
func NewReader(r io.Reader) *Reader { return NewFramedReader(FramingSSE, r) }

// NewFramedReader returns a Reader over r of the events of framing f.
func NewFramedReader(f Framing, r io.Reader) *Reader {
	var p stepper
	switch f {
	case FramingNDJSON:
		p = &LineParser{}
	case FramingJSONArray:
		p = &ArrayParser{}
	case FramingEventStream:
		p = &EventStreamParser{}
	default:
		p = &Parser{}
	}
	return &Reader{r: r, p: p, buf: make([]byte, 32<<10)}
}

// SetMaxEventSize bounds the bytes one event may buffer (see Parser).
func (r *Reader) SetMaxEventSize(n int) { r.p.setMaxSize(n) }

// Next returns the next event. Its slices are valid until the next call. At
// the end of the stream it returns io.EOF (an unfinished Server-Sent Event is
// discarded, a last NDJSON line without its line feed is returned first);
// read errors are returned as they are. Unlike the push-style parsers, a
// Reader stops at an oversized event: Next returns ErrEventTooLarge from then on.
func (r *Reader) Next() (Event, error) {
	for {
		for r.start < r.end {
			if r.p.skipped() > 0 {
				return Event{}, ErrEventTooLarge
			}
			n, d := r.p.next(r.buf[r.start:r.end])
			r.start += n
			if d == dispatchEvent || (d == dispatchComment && r.Comments) {
				return *r.p.event(), nil
			}
		}
		if r.p.skipped() > 0 {
			return Event{}, ErrEventTooLarge
		}
		if r.err != nil {
			if errors.Is(r.err, io.EOF) && !r.ended {
				r.ended = true
				if r.p.flush() {
					return *r.p.event(), nil
				}
			}
			return Event{}, r.err
		}
		n, err := r.r.Read(r.buf)
		r.start, r.end, r.err = 0, n, err
	}
}

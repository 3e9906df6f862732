// Package sse parses Server-Sent Events incrementally, as the WHATWG HTML
// standard ("9.2 Server-sent events", event stream interpretation) defines
// them: fields event, data, id and retry, multi-line data, comments, CR, LF
// and CRLF line ends, a leading byte order mark, and lines split across reads.
//
// Parser is push-style (feed it bytes as they arrive, it calls back per
// event); Reader is pull-style over an io.Reader. Both reuse their buffers, so
// the slices of an Event are only valid until the next call into them.
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

// ErrEventTooLarge is returned once an event or a line exceeds the size limit.
// The parser stays in that state: the rest of the stream is not interpreted.
var ErrEventTooLarge = errors.New("sse: event exceeds the size limit")

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
type Parser struct {
	// Handler is called once per dispatched event and once per comment line.
	// The event and its slices are only valid during the call.
	Handler func(ev *Event)
	// MaxEventSize bounds the bytes buffered for one line or one event's data;
	// zero means DefaultMaxEventSize.
	MaxEventSize int

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
	err     error
}

// Feed parses p, calling Handler for each event and comment it completes.
// It returns ErrEventTooLarge once the size limit was exceeded.
func (p *Parser) Feed(b []byte) error {
	for len(b) > 0 && p.err == nil {
		n, d := p.next(b)
		b = b[n:]
		if d != dispatchNone && p.Handler != nil {
			p.Handler(&p.ev)
		}
	}
	return p.err
}

// Write implements io.Writer over Feed.
func (p *Parser) Write(b []byte) (int, error) {
	if err := p.Feed(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Offset returns the number of bytes parsed so far.
func (p *Parser) Offset() int64 { return p.offset }

// Pending reports whether bytes of an unfinished line or event are buffered:
// at the end of a stream, such an event is discarded as the standard says.
func (p *Parser) Pending() bool { return len(p.partial) > 0 || len(p.data) > 0 }

// Reset makes the parser ready for a new stream, keeping its buffers.
func (p *Parser) Reset() {
	p.offset, p.bomSeen, p.bomDone, p.skipLF = 0, 0, false, false
	p.partial, p.evType, p.data, p.id = p.partial[:0], p.evType[:0], p.data[:0], p.id[:0]
	p.retry, p.retried, p.err = -1, false, nil
}

func (p *Parser) maxSize() int {
	if p.MaxEventSize > 0 {
		return p.MaxEventSize
	}
	return DefaultMaxEventSize
}

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
			p.partial = append(p.partial, bom[:p.bomSeen]...)
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
	end := bytes.IndexByte(seg, '\n')
	scan := seg
	if end >= 0 {
		scan = seg[:end]
	}
	if cr := bytes.IndexByte(scan, '\r'); cr >= 0 {
		end = cr
	}
	if end < 0 {
		if len(p.partial)+len(seg) > p.maxSize() {
			p.err = ErrEventTooLarge
			return len(b), dispatchNone
		}
		p.partial = append(p.partial, seg...)
		return len(b), dispatchNone
	}
	line := seg[:end]
	n += end + 1
	lineEnd := p.offset + int64(n) // past the first terminator byte, whatever the split
	if seg[end] == '\r' {
		if end+1 < len(seg) {
			if seg[end+1] == '\n' {
				n++
			}
		} else {
			p.skipLF = true
		}
	}
	if len(p.partial) > 0 {
		if len(p.partial)+len(line) > p.maxSize() {
			p.err = ErrEventTooLarge
			return n, dispatchNone
		}
		p.partial = append(p.partial, line...)
		line = p.partial
	}
	d = p.processLine(line, lineEnd)
	p.partial = p.partial[:0]
	return n, d
}

func (p *Parser) processLine(line []byte, end int64) dispatch {
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
		p.evType = append(p.evType[:0], value...)
	case "data":
		if len(p.data)+len(value) >= p.maxSize() {
			p.err = ErrEventTooLarge
			return dispatchNone
		}
		p.data = append(p.data, value...)
		p.data = append(p.data, '\n')
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
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
		p.evType = p.evType[:0]
		return dispatchNone
	}
	retry := int64(-1)
	if p.retried {
		retry = p.retry
	}
	p.ev = Event{Type: p.evType, Data: p.data[:len(p.data)-1], ID: p.id, Retry: retry, End: end}
	// The slices stay readable until the next line is processed, because
	// resetting a length does not touch the bytes.
	p.evType, p.data, p.retried = p.evType[:0], p.data[:0], false
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

// Reader reads events from an io.Reader, one per call to Next.
type Reader struct {
	// Comments makes Next return comment lines too (Event.Comment set), for
	// clients that track keepalives.
	Comments bool

	r     io.Reader
	p     Parser
	buf   []byte
	start int
	end   int
	err   error
}

// NewReader returns a Reader over r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: r, buf: make([]byte, 32<<10)}
}

// SetMaxEventSize bounds the bytes one event may buffer (see Parser).
func (r *Reader) SetMaxEventSize(n int) { r.p.MaxEventSize = n }

// Next returns the next event. Its slices are valid until the next call. At
// the end of the stream it returns io.EOF (an unfinished event is discarded);
// read errors are returned as they are.
func (r *Reader) Next() (Event, error) {
	for {
		for r.start < r.end {
			if r.p.err != nil {
				return Event{}, r.p.err
			}
			n, d := r.p.next(r.buf[r.start:r.end])
			r.start += n
			if d == dispatchEvent || (d == dispatchComment && r.Comments) {
				return r.p.ev, nil
			}
		}
		if r.p.err != nil {
			return Event{}, r.p.err
		}
		if r.err != nil {
			return Event{}, r.err
		}
		n, err := r.r.Read(r.buf)
		r.start, r.end, r.err = 0, n, err
	}
}

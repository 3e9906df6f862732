// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"bytes"

	"github.com/streamstall/streamstall/internal/sse"
)

// Boundary follows the bytes a client has been given of a stream, to say
// where its last frame ended, so that an error frame written after them is
// read as a frame of its own: an upstream may stall after half a line, or
// after a whole `data:` line without the blank line that ends its event,
// and a frame joined to the open one is a JSON error in the client, or
// carries the upstream's text in its message. It costs a look at the end of
// each read for Server-Sent Events and NDJSON, a scan of the structure for
// a JSON array, and for the Responses API a search for its sequence_number.
// The zero value follows Server-Sent Events of no known shape.
type Boundary struct {
	shape   Shape
	framing sse.Framing
	sent    bool

	// Server-Sent Events, and NDJSON's open line.
	lineOpen  bool // the last line has bytes and no end (NDJSON: bytes other than white space)
	cr        bool // the last byte ended a line with CR: a LF after it belongs to that end
	eventOpen bool // a line other than a blank one ended since the last blank line

	// arr follows a JSON array, or NDJSON's open line (its value alone).
	arr arrayTracker
	seq sequenceTracker
	// msg follows the messages of an AWS event stream.
	msg messageTracker
}

// NewBoundary returns the tracker of a stream of the shape, in the framing.
func NewBoundary(shape Shape, framing sse.Framing) Boundary {
	return Boundary{shape: shape, framing: framing, arr: arrayTracker{values: framing == sse.FramingNDJSON}}
}

// Track follows p, the next bytes the client was given.
func (b *Boundary) Track(p []byte) {
	if len(p) == 0 {
		return
	}
	b.sent = true
	switch b.framing {
	case sse.FramingNDJSON:
		b.trackLine(p)
	case sse.FramingJSONArray:
		b.arr.track(p)
	case sse.FramingEventStream:
		b.msg.track(p)
	default:
		b.trackEvent(p)
		if b.shape == ShapeResponses {
			b.seq.track(p)
		}
	}
}

// trackEvent follows the lines of Server-Sent Events. Only the line ends
// at the end of p matter: a byte that is not one opens a line whatever
// came before it.
func (b *Boundary) trackEvent(p []byte) {
	if i := lastNotLineEnd(p); i >= 0 {
		b.lineOpen, b.cr, p = true, false, p[i+1:]
	}
	for _, c := range p {
		if b.cr && c == '\n' {
			b.cr = false // CRLF: one line end
			continue
		}
		b.cr = c == '\r'
		// A line ending ends a line of the event; a blank line ends the event.
		b.eventOpen, b.lineOpen = b.lineOpen, false
	}
}

func lastNotLineEnd(p []byte) int {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != '\n' && p[i] != '\r' {
			return i
		}
	}
	return -1
}

// trackLine follows NDJSON's lines: the JSON of the last one, if it is
// open. Only the bytes after a read's last line end are scanned: none, as
// an upstream writes whole lines.
func (b *Boundary) trackLine(p []byte) {
	if i := bytes.LastIndexByte(p, '\n'); i >= 0 {
		b.arr, b.lineOpen, p = arrayTracker{values: true}, false, p[i+1:]
	}
	b.arr.track(p)
	for _, c := range p {
		if !isJSONSpace(c) {
			b.lineOpen = true
			return
		}
	}
}

// closeSSE returns what ends the open line and the open event. A line cut
// in the middle is ended as it is, not completed: completed, a cut
// message_stop or response.completed would tell the client the stream
// ended well, before the error that says it did not.
func (b *Boundary) closeSSE() string {
	switch {
	case b.lineOpen:
		return "\n\n"
	case b.cr && b.eventOpen:
		return "\n\n" // the first LF completes the CRLF
	case b.cr:
		return "\n"
	case b.eventOpen:
		return "\n"
	}
	return ""
}

// closeLine returns what ends the open line: the rest of its value (so
// that a line the upstream cut is still one the client can decode, not an
// error that quotes it) and the line end. A line of white space is left
// open: the error's object after it is still valid JSON.
func (b *Boundary) closeLine() []byte {
	if !b.lineOpen {
		return nil
	}
	rest, _ := b.arr.complete()
	return append(rest, '\n')
}

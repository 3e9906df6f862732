// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package sse

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// The AWS event stream's prelude: total length, headers length, their CRC.
const (
	eventStreamPreludeLen = 12
	// eventStreamMinLen is a message without headers or payload: the prelude
	// and the message CRC.
	eventStreamMinLen = eventStreamPreludeLen + 4
)

// Header names of the AWS event stream (what Bedrock sends).
const (
	headerMessageType   = ":message-type"
	headerEventType     = ":event-type"
	headerExceptionType = ":exception-type"
	headerErrorCode     = ":error-code"
)

// EventStreamParser cuts an AWS event stream (application/vnd.amazon.eventstream:
// Bedrock's ConverseStream and InvokeModelWithResponseStream) into events, one
// per message, decoded and checked (headers, both CRCs) by aws-sdk-go-v2's
// eventstream decoder: Event.MessageType is the ":message-type" header,
// Event.Type the ":event-type" of an event, the ":exception-type" of an
// exception or the ":error-code" of an error, Event.Data the payload, and
// Event.End the offset past the message. The zero value is ready to use;
// set Handler.
//
// A message is bounded before anything is allocated for it: its prelude
// declares its length, and a message longer than MaxEventSize (or one the
// Budget cannot hold) is skipped, without buffering, and counted, as Parser
// does with events; so is a message whose CRC or headers do not check out.
// Parsing goes on at the next message, since the prelude said where it
// starts. A prelude whose own CRC fails leaves no way to find the next
// message: the rest of the stream is skipped (see Corrupt), as the SDKs
// give up on such a stream.
type EventStreamParser struct {
	// Handler is called once per message; the event is only valid during the call.
	Handler func(ev *Event)
	// MaxEventSize bounds the declared length of one message; zero means
	// DefaultMaxEventSize.
	MaxEventSize int
	// Budget, when set, is drawn on for the buffers of a message beyond a
	// free 64 KiB each (a message is held twice while it is decoded: its
	// bytes and its payload), and given back once it is done.
	Budget Budget

	offset    int64
	prelude   [eventStreamPreludeLen]byte
	have      int // prelude bytes read
	length    int // the declared length of the message being read; 0 between messages
	msg       budgetBuffer
	payload   budgetBuffer
	skip      int // bytes of a skipped message still to come
	corrupt   bool
	oversized int64
	evType    []byte
	msgType   []byte
	ev        Event
}

// Feed parses b, calling Handler for each message it completes.
func (p *EventStreamParser) Feed(b []byte) {
	for len(b) > 0 {
		n, d := p.next(b)
		b = b[n:]
		if d != dispatchNone && p.Handler != nil {
			p.Handler(&p.ev)
		}
		p.releaseMessage()
	}
}

// Write implements io.Writer over Feed; it never fails.
func (p *EventStreamParser) Write(b []byte) (int, error) {
	p.Feed(b)
	return len(b), nil
}

// Flush ends the stream: an unfinished message is discarded.
func (p *EventStreamParser) Flush() { p.flush() }

// Offset returns the number of bytes parsed so far.
func (p *EventStreamParser) Offset() int64 { return p.offset }

// Oversized returns the number of messages skipped so far, for their size
// or because they did not decode (a corrupt prelude included).
func (p *EventStreamParser) Oversized() int64 { return p.oversized }

// Corrupt reports whether a prelude failed its CRC: the stream cannot be
// framed past it, and the rest of it is skipped.
func (p *EventStreamParser) Corrupt() bool { return p.corrupt }

// Pending reports whether an unfinished message is buffered (or being skipped).
func (p *EventStreamParser) Pending() bool {
	return p.have > 0 || p.length > 0 || p.skip > 0 || p.corrupt
}

// Reset makes the parser ready for a new stream, giving back what its
// buffers drew on the budget.
func (p *EventStreamParser) Reset() {
	p.flush()
	p.offset, p.corrupt, p.oversized = 0, false, 0
}

func (p *EventStreamParser) maxSize() int { return maxOr(p.MaxEventSize) }

func (p *EventStreamParser) next(b []byte) (n int, d dispatch) {
	defer func() { p.offset += int64(n) }()
	switch {
	case p.corrupt:
		return len(b), dispatchNone
	case p.skip > 0:
		n = min(p.skip, len(b))
		p.skip -= n
		return n, dispatchNone
	case p.length == 0:
		n = copy(p.prelude[p.have:], b)
		p.have += n
		if p.have == eventStreamPreludeLen {
			p.have = 0
			p.begin()
		}
		return n, dispatchNone
	}
	n = min(p.length-len(p.msg.b), len(b))
	p.msg.b = append(p.msg.b, b[:n]...)
	if len(p.msg.b) < p.length {
		return n, dispatchNone
	}
	return n, p.decode(p.offset + int64(n))
}

// begin starts the message whose prelude was just read: it checks the
// prelude and bounds the message before drawing anything for it.
func (p *EventStreamParser) begin() {
	length := binary.BigEndian.Uint32(p.prelude[0:4])
	headers := binary.BigEndian.Uint32(p.prelude[4:8])
	// The prelude's CRC is all that says where the next message starts: the
	// decoder checks it again, but only once the message is buffered.
	if crc32.ChecksumIEEE(p.prelude[:8]) != binary.BigEndian.Uint32(p.prelude[8:]) ||
		length < eventStreamMinLen || headers > length-eventStreamMinLen {
		p.corrupt = true
		p.oversized++
		return
	}
	rest := int(length) - eventStreamPreludeLen
	// The payload buffer needs room to spare for the decoder's bytes.Buffer,
	// which grows by bytes.MinRead at a time.
	payloadCap := int(length-headers) - eventStreamMinLen + bytes.MinRead
	if uint64(length) > uint64(p.maxSize()) || !p.msg.grow(int(length), p.Budget) || !p.payload.grow(payloadCap, p.Budget) {
		p.msg.release(p.Budget)
		p.oversized++
		p.skip = rest
		return
	}
	p.length = int(length)
	p.msg.b = append(p.msg.b[:0], p.prelude[:]...)
}

// decoder decodes one buffered message; it holds no state of its own.
var decoder = eventstream.NewDecoder()

// decode decodes the buffered message, and dispatches it unless it fails
// its checks.
func (p *EventStreamParser) decode(end int64) dispatch {
	p.length = 0
	m, err := decoder.Decode(bytes.NewReader(p.msg.b), p.payload.b[:0])
	if err != nil {
		p.oversized++
		return dispatchNone
	}
	p.msgType = append(p.msgType[:0], headerString(m.Headers, headerMessageType)...)
	typeHeader := headerEventType
	switch string(p.msgType) {
	case "exception":
		typeHeader = headerExceptionType
	case "error":
		typeHeader = headerErrorCode
	}
	p.evType = append(p.evType[:0], headerString(m.Headers, typeHeader)...)
	p.ev = Event{Type: p.evType, MessageType: p.msgType, Data: m.Payload, Retry: -1, End: end}
	return dispatchEvent
}

func headerString(h eventstream.Headers, name string) string {
	if v, ok := h.Get(name).(eventstream.StringValue); ok {
		return string(v)
	}
	return ""
}

// releaseMessage gives back the buffers of a message once it is done with:
// each dispatched event is only valid during its handler.
func (p *EventStreamParser) releaseMessage() {
	if p.length == 0 {
		p.msg.release(p.Budget)
		p.payload.release(p.Budget)
	}
}

func (p *EventStreamParser) flush() bool {
	p.have, p.length, p.skip = 0, 0, 0
	p.msg.release(p.Budget)
	p.payload.release(p.Budget)
	return false
}

func (p *EventStreamParser) event() *Event    { return &p.ev }
func (p *EventStreamParser) skipped() int64   { return p.oversized }
func (p *EventStreamParser) setMaxSize(n int) { p.MaxEventSize = n }

// budgetBuffer is a buffer whose bytes past keepBufferCap are drawn on a
// Budget while it holds them.
type budgetBuffer struct {
	b    []byte
	held int // bytes drawn on the budget
}

// grow makes the buffer's capacity at least n, drawing what passes
// keepBufferCap on budget; false when the budget cannot take it.
func (bb *budgetBuffer) grow(n int, budget Budget) bool {
	if n <= cap(bb.b) {
		return true
	}
	if budget != nil && n > keepBufferCap {
		if !budget.Take(n - keepBufferCap - bb.held) {
			return false
		}
		bb.held = n - keepBufferCap
	}
	bb.b = make([]byte, 0, max(n, min(keepBufferCap, 2*n)))
	return true
}

// release empties the buffer; one past keepBufferCap is let go, and what it
// drew given back.
func (bb *budgetBuffer) release(budget Budget) {
	if cap(bb.b) <= keepBufferCap {
		bb.b = bb.b[:0]
		return
	}
	if budget != nil && bb.held > 0 {
		budget.Return(bb.held)
	}
	bb.b, bb.held = nil, 0
}

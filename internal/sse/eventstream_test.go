// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package sse

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"
	"testing/iotest"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type esRecord struct {
	MessageType, Type, Data string
	End                     int64
}

func ownES(ev *Event) esRecord {
	return esRecord{MessageType: string(ev.MessageType), Type: string(ev.Type), Data: string(ev.Data), End: ev.End}
}

// esMessage encodes one message with the SDK's encoder, the way Bedrock
// frames its events, exceptions and errors.
func esMessage(tb testing.TB, messageType, typ string, payload []byte) []byte {
	tb.Helper()
	var h eventstream.Headers
	h.Set(headerMessageType, eventstream.StringValue(messageType))
	switch messageType {
	case "event":
		h.Set(headerEventType, eventstream.StringValue(typ))
		h.Set(":content-type", eventstream.StringValue("application/json"))
	case "exception":
		h.Set(headerExceptionType, eventstream.StringValue(typ))
		h.Set(":content-type", eventstream.StringValue("application/json"))
	case "error":
		h.Set(headerErrorCode, eventstream.StringValue(typ))
		h.Set(":error-message", eventstream.StringValue("boom"))
	}
	var b bytes.Buffer
	require.NoError(tb, eventstream.NewEncoder().Encode(&b, eventstream.Message{Headers: h, Payload: payload}))
	return b.Bytes()
}

// converseMessages is a short ConverseStream answer and what it frames to.
func converseMessages(tb testing.TB) ([]byte, []esRecord) {
	tb.Helper()
	var in []byte
	var want []esRecord
	for _, m := range []struct{ messageType, typ, data string }{
		{"event", "messageStart", `{"p":"abcd","role":"assistant"}`},
		{"event", "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"},"p":"abcdefgh"}`},
		{"event", "messageStop", `{"p":"ab","stopReason":"end_turn"}`},
		{"event", "metadata", `{"metrics":{"latencyMs":412},"p":"abc","usage":{"inputTokens":9,"outputTokens":2,"totalTokens":11}}`},
		{"exception", "throttlingException", `{"message":"Too many requests"}`},
		{"error", "InternalFailure", ""},
	} {
		in = append(in, esMessage(tb, m.messageType, m.typ, []byte(m.data))...)
		want = append(want, esRecord{MessageType: m.messageType, Type: m.typ, Data: m.data, End: int64(len(in))})
	}
	return in, want
}

func feedES(in []byte, split, limit int, budget Budget) ([]esRecord, *EventStreamParser) {
	var got []esRecord
	p := &EventStreamParser{MaxEventSize: limit, Budget: budget, Handler: func(ev *Event) { got = append(got, ownES(ev)) }}
	p.Feed(in[:split])
	p.Feed(in[split:])
	p.Flush()
	return got, p
}

// TestEventStreamParserMessages: the SDK's own messages come out with their
// types, payloads and ends, whatever the split, pushed or pulled.
func TestEventStreamParserMessages(t *testing.T) {
	in, want := converseMessages(t)
	for s := range len(in) + 1 {
		got, p := feedES(in, s, 0, nil)
		require.Equal(t, want, got, "split at %d", s)
		assert.Zero(t, p.Oversized())
		assert.False(t, p.Pending())
		assert.Equal(t, int64(len(in)), p.Offset())
	}
	r := NewFramedReader(FramingEventStream, iotest.OneByteReader(bytes.NewReader(in)))
	var read []esRecord
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		read = append(read, ownES(&ev))
	}
	assert.Equal(t, want, read)
}

// TestEventStreamParserOversizedMessage: a message declared longer than the
// limit is skipped without being buffered, and the next one is parsed.
func TestEventStreamParserOversizedMessage(t *testing.T) {
	big := esMessage(t, "event", "contentBlockDelta", bytes.Repeat([]byte("x"), 4096))
	small := esMessage(t, "event", "messageStop", []byte(`{}`))
	in := append(append([]byte{}, big...), small...)
	for _, s := range []int{0, 5, 12, 13, len(big), len(in)} {
		got, p := feedES(in, s, 1024, nil)
		assert.Equal(t, []esRecord{{MessageType: "event", Type: "messageStop", Data: `{}`, End: int64(len(in))}}, got, "split at %d", s)
		assert.Equal(t, int64(1), p.Oversized())
		assert.LessOrEqual(t, cap(p.msg.b), 1024)
	}
}

// TestEventStreamParserDeclaredLengthNotAllocated: a prelude declaring a
// message of 4 GiB, with a valid CRC, costs neither memory nor budget: it is
// refused on its declared length.
func TestEventStreamParserDeclaredLengthNotAllocated(t *testing.T) {
	prelude := make([]byte, eventStreamPreludeLen)
	binary.BigEndian.PutUint32(prelude[0:], 0xFFFFFFF0)
	binary.BigEndian.PutUint32(prelude[4:], 0)
	binary.BigEndian.PutUint32(prelude[8:], crc32.ChecksumIEEE(prelude[:8]))
	budget := NewSharedBudget(1 << 20)
	p := &EventStreamParser{Budget: budget, Handler: func(*Event) { t.Fatal("no message is complete") }}
	p.Feed(prelude)
	p.Feed(bytes.Repeat([]byte("y"), 1<<16))
	assert.Equal(t, int64(1), p.Oversized())
	assert.Zero(t, cap(p.msg.b))
	assert.Zero(t, budget.Used())
	assert.True(t, p.Pending(), "the message's bytes are still being skipped")
}

// TestEventStreamParserBudget: a large message draws on the shared budget
// while it is buffered and gives it back once dispatched; one the budget
// cannot hold is skipped like an oversized one, and the stream goes on.
func TestEventStreamParserBudget(t *testing.T) {
	payload := bytes.Repeat([]byte("z"), 200<<10)
	big := esMessage(t, "event", "contentBlockDelta", payload)
	small := esMessage(t, "event", "messageStop", []byte(`{}`))
	budget := NewSharedBudget(1 << 20)
	var got []esRecord
	p := &EventStreamParser{Budget: budget, Handler: func(ev *Event) { got = append(got, ownES(ev)) }}
	p.Feed(big[:len(big)/2])
	assert.Positive(t, budget.Used(), "the half message is held on the budget")
	p.Feed(big[len(big)/2:])
	require.Len(t, got, 1)
	assert.Len(t, got[0].Data, len(payload))
	assert.Zero(t, budget.Used(), "given back once dispatched")

	tight := NewSharedBudget(100 << 10)
	got = nil
	p = &EventStreamParser{Budget: tight, Handler: func(ev *Event) { got = append(got, ownES(ev)) }}
	p.Feed(append(append([]byte{}, big...), small...))
	assert.Equal(t, []esRecord{{MessageType: "event", Type: "messageStop", Data: `{}`, End: int64(len(big) + len(small))}}, got)
	assert.Equal(t, int64(1), p.Oversized())
	assert.Zero(t, tight.Used())

	// An unfinished message's bytes go back at Reset.
	p.Feed(big[:len(big)-1])
	p.Reset()
	assert.Zero(t, tight.Used())
}

// TestEventStreamParserCorruptMessage: a message whose CRC fails is skipped
// and counted, the next one parsed; a prelude whose CRC fails loses the
// framing, and the rest of the stream is skipped.
func TestEventStreamParserCorruptMessage(t *testing.T) {
	first := esMessage(t, "event", "contentBlockDelta", []byte(`{"delta":{"text":"a"}}`))
	second := esMessage(t, "event", "messageStop", []byte(`{}`))
	bad := append([]byte{}, first...)
	bad[len(bad)-6] ^= 0xFF // a payload byte: the message CRC fails
	got, p := feedES(append(append([]byte{}, bad...), second...), 7, 0, nil)
	assert.Equal(t, []esRecord{{MessageType: "event", Type: "messageStop", Data: `{}`, End: int64(len(bad) + len(second))}}, got)
	assert.Equal(t, int64(1), p.Oversized())
	assert.False(t, p.Corrupt())

	bad = append([]byte{}, first...)
	bad[1] ^= 0x01 // the declared length: the prelude CRC fails
	got, p = feedES(append(append([]byte{}, bad...), second...), 7, 0, nil)
	assert.Empty(t, got)
	assert.True(t, p.Corrupt())
	assert.Equal(t, int64(len(bad)+len(second)), p.Offset())
}

// referenceES decodes in with the SDK's decoder alone, message after
// message, up to the first that does not decode.
func referenceES(in []byte) []esRecord {
	var out []esRecord
	r := bytes.NewReader(in)
	for {
		m, err := eventstream.NewDecoder().Decode(r, nil)
		if err != nil {
			return out
		}
		mt := headerString(m.Headers, headerMessageType)
		typ := headerString(m.Headers, headerEventType)
		switch mt {
		case "exception":
			typ = headerString(m.Headers, headerExceptionType)
		case "error":
			typ = headerString(m.Headers, headerErrorCode)
		}
		out = append(out, esRecord{MessageType: mt, Type: typ, Data: string(m.Payload), End: int64(len(in) - r.Len())})
	}
}

// FuzzEventStreamParser: the messages do not depend on how the reads split
// the stream, are the SDK decoder's own when none was skipped, and the
// parser never buffers past its limit nor keeps budget after a Reset.
func FuzzEventStreamParser(f *testing.F) {
	in, _ := converseMessages(f)
	f.Add(in, uint16(17), uint8(200))
	f.Add(in[:len(in)-3], uint16(40), uint8(30))
	f.Add(esMessage(f, "exception", "modelStreamErrorException", []byte(`{"message":"x","originalStatusCode":500}`)), uint16(3), uint8(90))
	f.Add([]byte{0, 0, 0, 16, 0, 0, 0, 0}, uint16(1), uint8(1))
	f.Fuzz(func(t *testing.T, in []byte, split uint16, limit uint8) {
		s := 0
		if len(in) > 0 {
			s = int(split) % (len(in) + 1)
		}
		whole, p := feedES(in, len(in), 0, nil)
		got, _ := feedES(in, s, 0, nil)
		require.Equal(t, whole, got, "split at %d", s)
		if p.Oversized() == 0 {
			assert.Equal(t, referenceES(in), whole)
		}
		lim := int(limit) + eventStreamMinLen
		budget := NewSharedBudget(1 << 20)
		lp := &EventStreamParser{MaxEventSize: lim, Budget: budget, Handler: func(ev *Event) { assert.LessOrEqual(t, len(ev.Data), lim) }}
		lp.Feed(in[:s])
		assert.LessOrEqual(t, len(lp.msg.b), lim)
		lp.Feed(in[s:])
		assert.LessOrEqual(t, len(lp.msg.b), lim)
		lp.Reset()
		assert.Zero(t, budget.Used())
	})
}

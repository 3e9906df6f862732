package sse

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// record is an owned copy of an Event, for comparisons.
type record struct {
	Type, Data, ID string
	Retry          int64
	Comment        bool
	End            int64
}

func own(ev *Event) record {
	return record{Type: string(ev.Type), Data: string(ev.Data), ID: string(ev.ID), Retry: ev.Retry, Comment: ev.Comment, End: ev.End}
}

// reference is a whole-input transcription of the WHATWG algorithm, written
// for clarity rather than speed, against which the incremental parsers are
// checked.
func reference(in []byte) []record {
	var out []record
	var evType, id string
	var data strings.Builder
	retry := int64(-1)
	if bytes.HasPrefix(in, bom[:]) {
		in = in[3:]
	}
	base := int64(0)
	for {
		i := bytes.IndexAny(in, "\r\n")
		if i < 0 {
			return out // an unterminated line and event are discarded
		}
		line := string(in[:i])
		n := i + 1
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			n++
		}
		in = in[n:]
		end := base + int64(i) + 1
		base += int64(n)
		switch {
		case line == "":
			if data.Len() > 0 {
				d := data.String()
				out = append(out, record{Type: evType, Data: d[:len(d)-1], ID: id, Retry: retry, End: end})
			}
			data.Reset()
			evType, retry = "", -1
		case line[0] == ':':
			out = append(out, record{Data: line[1:], Comment: true, ID: id, Retry: -1, End: end})
		default:
			field, value, found := strings.Cut(line, ":")
			if found {
				value = strings.TrimPrefix(value, " ")
			}
			switch field {
			case "event":
				evType = value
			case "data":
				data.WriteString(value)
				data.WriteByte('\n')
			case "id":
				if !strings.Contains(value, "\x00") {
					id = value
				}
			case "retry":
				if v, err := strconv.ParseInt(value, 10, 64); err == nil && strings.Trim(value, "0123456789") == "" {
					retry = v
				}
			}
		}
	}
}

// withBOMOffset shifts reference offsets by the stripped BOM.
func withBOMOffset(in []byte, recs []record) []record {
	if bytes.HasPrefix(in, bom[:]) {
		for i := range recs {
			recs[i].End += 3
		}
	}
	return recs
}

func withoutEnds(recs []record) []record {
	out := make([]record, len(recs))
	for i, r := range recs {
		r.End = 0
		out[i] = r
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func feedAll(t testing.TB, in []byte, splits ...int) []record {
	var got []record
	p := Parser{Handler: func(ev *Event) { got = append(got, own(ev)) }}
	prev := 0
	for _, s := range splits {
		require.NoError(t, p.Feed(in[prev:s]))
		prev = s
	}
	require.NoError(t, p.Feed(in[prev:]))
	return got
}

func readAll(t testing.TB, r io.Reader) []record {
	var got []record
	rd := NewReader(r)
	rd.Comments = true
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return got
		}
		require.NoError(t, err)
		got = append(got, own(&ev))
	}
}

func TestParserWHATWG(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []record
	}{
		{"lf", "data: hi\n\n", []record{{Data: "hi", Retry: -1}}},
		{"crlf", "data: hi\r\n\r\n", []record{{Data: "hi", Retry: -1}}},
		{"cr", "data: hi\r\r", []record{{Data: "hi", Retry: -1}}},
		{"multi-line data", "data: a\ndata:b\ndata\n\n", []record{{Data: "a\nb\n", Retry: -1}}},
		{"event and id", "event: ping\nid: 7\ndata: {}\n\n", []record{{Type: "ping", Data: "{}", ID: "7", Retry: -1}}},
		{"id persists", "id: 1\ndata: a\n\ndata: b\n\n", []record{{Data: "a", ID: "1", Retry: -1}, {Data: "b", ID: "1", Retry: -1}}},
		{"id with NUL ignored", "id: 1\ndata: a\n\nid: x\x00\ndata: b\n\n", []record{{Data: "a", ID: "1", Retry: -1}, {Data: "b", ID: "1", Retry: -1}}},
		{"comment", ": keepalive\n\n", []record{{Data: " keepalive", Comment: true, Retry: -1}}},
		{"no data no dispatch", "event: ping\n\ndata: x\n\n", []record{{Data: "x", Retry: -1}}},
		{"empty data dispatches", "data\n\n", []record{{Data: "", Retry: -1}}},
		{"only one space stripped", "data:  two\n\n", []record{{Data: " two", Retry: -1}}},
		{"retry", "retry: 1500\ndata: x\n\n", []record{{Data: "x", Retry: 1500}}},
		{"bad retry ignored", "retry: 15s\ndata: x\n\n", []record{{Data: "x", Retry: -1}}},
		{"unknown field ignored", "foo: bar\ndata: x\n\n", []record{{Data: "x", Retry: -1}}},
		{"bom stripped", "\xEF\xBB\xBFdata: x\n\n", []record{{Data: "x", Retry: -1}}},
		{"second bom kept", "\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n", nil},
		{"unterminated event discarded", "data: x\n", nil},
		{"unterminated line discarded", "data: x", nil},
		{"type reset after dispatch", "event: a\ndata: 1\n\ndata: 2\n\n", []record{{Type: "a", Data: "1", Retry: -1}, {Data: "2", Retry: -1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			got := feedAll(t, in)
			assert.Equal(t, tt.want, withoutEnds(got))
			assert.Equal(t, withBOMOffset(in, reference(in)), got)
			for split := 0; split <= len(in); split++ {
				assert.Equal(t, got, feedAll(t, in, split), "split at %d", split)
			}
			assert.Equal(t, got, readAll(t, iotest.OneByteReader(bytes.NewReader(in))))
			assert.Equal(t, got, readAll(t, bytes.NewReader(in)))
		})
	}
}

func TestParserEventEnds(t *testing.T) {
	in := []byte("data: a\n\n: c\r\ndata: b\r\n\r\ndata: c\r\r")
	var ends []int64
	for _, r := range feedAll(t, in) {
		ends = append(ends, r.End)
	}
	// LF ends count whole; CRLF ends stop after the CR, wherever the split is.
	assert.Equal(t, []int64{9, 13, 24, 34}, ends)
}

func TestParserPartialBOM(t *testing.T) {
	// A first line that starts like a BOM but is not one keeps those bytes.
	in := []byte("\xEF\xBBx: y\ndata: z\n\n")
	got := feedAll(t, in, 1, 2)
	require.Len(t, got, 1)
	assert.Equal(t, "z", got[0].Data)
	assert.Equal(t, int64(len(in)), got[0].End)
}

func TestParserEventTooLarge(t *testing.T) {
	p := Parser{MaxEventSize: 12}
	require.NoError(t, p.Feed([]byte("data: 0123\n")))
	err := p.Feed([]byte("data: 0123456789\n"))
	require.ErrorIs(t, err, ErrEventTooLarge)
	require.ErrorIs(t, p.Feed([]byte("\n")), ErrEventTooLarge, "the error is sticky")

	p = Parser{MaxEventSize: 8}
	require.ErrorIs(t, p.Feed([]byte("data: 0123456789")), ErrEventTooLarge, "an unterminated line counts too")

	r := NewReader(strings.NewReader("data: " + strings.Repeat("x", 64) + "\n\n"))
	r.SetMaxEventSize(32)
	_, err = r.Next()
	require.ErrorIs(t, err, ErrEventTooLarge)
}

func TestParserResetAndPending(t *testing.T) {
	var n int
	p := Parser{Handler: func(*Event) { n++ }}
	require.NoError(t, p.Feed([]byte("data: x\n")))
	assert.True(t, p.Pending())
	p.Reset()
	assert.False(t, p.Pending())
	assert.Zero(t, p.Offset())
	require.NoError(t, p.Feed([]byte("\xEF\xBB\xBFdata: y\n\n")))
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(12), p.Offset())
}

func TestParserWriter(t *testing.T) {
	var got []string
	p := &Parser{Handler: func(ev *Event) { got = append(got, string(ev.Data)) }}
	_, err := io.Copy(p, iotest.HalfReader(strings.NewReader("data: a\n\ndata: b\n\n")))
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, got)
}

func TestReaderPropagatesReadError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\n"), iotest.ErrReader(boom)))
	ev, err := r.Next()
	require.NoError(t, err)
	assert.Equal(t, "a", string(ev.Data))
	_, err = r.Next()
	require.ErrorIs(t, err, boom)
}

func TestReaderSkipsCommentsByDefault(t *testing.T) {
	r := NewReader(strings.NewReader(": ping\n\ndata: a\n\n"))
	ev, err := r.Next()
	require.NoError(t, err)
	assert.Equal(t, "a", string(ev.Data))
	assert.Equal(t, "message", string(ev.Name()))
}

func TestParserNoAllocsSteadyState(t *testing.T) {
	frame := []byte("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n")
	var n int
	p := Parser{Handler: func(*Event) { n++ }}
	require.NoError(t, p.Feed(frame))
	allocs := testing.AllocsPerRun(100, func() {
		_ = p.Feed(frame[:10])
		_ = p.Feed(frame[10:])
	})
	assert.Zero(t, allocs)
}

func FuzzParser(f *testing.F) {
	seeds := []string{
		"data: hi\n\n", "data: a\r\ndata: b\r\n\r\n", "data: x\r\r", ": ka\n\n",
		"\xEF\xBB\xBFevent: ping\nid: 1\nretry: 10\ndata: {}\n\n", "data\n\ndata:\n\n", "id: \x00\n",
		"event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s), uint16(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, split uint16) {
		want := withBOMOffset(in, reference(in))
		s := 0
		if len(in) > 0 {
			s = int(split) % (len(in) + 1)
		}
		assert.Equal(t, want, feedAll(t, in, s), "parser split at %d", s)
		assert.Equal(t, want, readAll(t, iotest.OneByteReader(bytes.NewReader(in))), "one-byte reader")
		assert.Equal(t, want, readAll(t, bytes.NewReader(in)), "reader")
	})
}

func BenchmarkParser(b *testing.B) {
	frame := []byte("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello\"},\"finish_reason\":null}]}\n\n")
	stream := bytes.Repeat(frame, 64)
	p := Parser{Handler: func(*Event) {}}
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		_ = p.Feed(stream)
	}
}

func BenchmarkReader(b *testing.B) {
	frame := []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello\"}}]}\n\n")
	stream := bytes.Repeat(frame, 64)
	br := bytes.NewReader(stream)
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		br.Reset(stream)
		r := NewReader(br)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}

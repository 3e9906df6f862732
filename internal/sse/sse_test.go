// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package sse

import (
	"bytes"
	"errors"
	"io"
	"math"
	"slices"
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
	recs, _ := referenceMax(in, math.MaxInt)
	return recs
}

// referenceMax is reference with the parser's size limit: a line longer than
// limit, or data lines adding up (with their line feeds) to more, make the
// event oversized; it is dropped with every line up to the next blank one.
// It returns the events and the number of oversized ones.
func referenceMax(in []byte, limit int) ([]record, int64) {
	var out []record
	var evType, id string
	var data strings.Builder
	var oversized int64
	skipping := false
	retry := int64(-1)
	if bytes.HasPrefix(in, bom[:]) {
		in = in[3:]
	} else if len(in) < len(bom) && bytes.HasPrefix(bom[:], in) {
		return nil, 0 // what may still become a BOM is no line yet
	}
	base := int64(0)
	for {
		i := bytes.IndexAny(in, "\r\n")
		if i < 0 {
			// An unterminated line and event are discarded.
			if !skipping && len(in) > limit {
				oversized++
			}
			return out, oversized
		}
		line := string(in[:i])
		n := i + 1
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			n++
		}
		in = in[n:]
		end := base + int64(i) + 1
		base += int64(n)
		if skipping {
			skipping = line != ""
			continue
		}
		if len(line) > limit {
			oversized++
			skipping = true
			data.Reset()
			evType, retry = "", -1
			continue
		}
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
				if data.Len()+len(value)+1 > limit {
					oversized++
					skipping = true
					data.Reset()
					evType, retry = "", -1
					continue
				}
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

func feedAll(tb testing.TB, in []byte, splits ...int) []record {
	got, oversized := feedMax(in, 0, splits...)
	require.Zero(tb, oversized)
	return got
}

// feedMax feeds in, split at splits, to a parser limited to limit bytes
// (0: the default), and returns the events and the oversized count.
func feedMax(in []byte, limit int, splits ...int) ([]record, int64) {
	var got []record
	p := Parser{MaxEventSize: limit, Handler: func(ev *Event) { got = append(got, own(ev)) }}
	prev := 0
	for _, s := range splits {
		p.Feed(in[prev:s])
		prev = s
	}
	p.Feed(in[prev:])
	return got, p.Oversized()
}

func readAll(tb testing.TB, r io.Reader) []record {
	var got []record
	rd := NewReader(r)
	rd.Comments = true
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return got
		}
		require.NoError(tb, err)
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

func TestParserSkipsOversizedEvents(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      []string
		oversized int64
	}{
		{"long data line", "data: 0123456789abcdef\n\ndata: a\n\n", []string{"a"}, 1},
		{"data lines add up", "data: 01234\ndata: 56789\ndata: ab\n\ndata: a\n\n", []string{"a"}, 1},
		{"lines after it in the event are dropped", "data: 0123456789abcdef\ndata: x\nevent: y\n\ndata: a\n\n", []string{"a"}, 1},
		{"long comment", ": 0123456789abcdef\ndata: x\n\ndata: a\n\n", []string{"a"}, 1},
		{"long field name", "0123456789abcdef\n\ndata: a\n\n", []string{"a"}, 1},
		{"crlf", "data: 0123456789abcdef\r\n\r\ndata: a\r\n\r\n", []string{"a"}, 1},
		{"cr", "data: 0123456789abcdef\r\rdata: a\r\r", []string{"a"}, 1},
		{"two in a row", "data: 0123456789abcdef\n\ndata: 0123456789abcdef\n\ndata: a\n\n", []string{"a"}, 2},
		{"events before it stay", "data: a\n\ndata: 0123456789abcdef\n\ndata: b\n\n", []string{"a", "b"}, 1},
		{"unterminated at the end", "data: a\n\ndata: 0123456789abcdef", []string{"a"}, 1},
		{"exactly the limit", "data: 01234567\n\n", []string{"01234567"}, 0},
	}
	const limit = 14
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			want, wantN := referenceMax(in, limit)
			assert.Equal(t, wantN, tt.oversized, "the reference agrees with the table")
			var data []string
			for _, r := range want {
				data = append(data, r.Data)
			}
			assert.Equal(t, tt.want, data)
			for split := 0; split <= len(in); split++ {
				got, n := feedMax(in, limit, split)
				assert.Equal(t, want, got, "split at %d", split)
				assert.Equal(t, wantN, n, "split at %d", split)
			}
			// One byte at a time.
			splits := make([]int, len(in))
			for i := range splits {
				splits[i] = i
			}
			got, n := feedMax(in, limit, splits...)
			assert.Equal(t, want, got)
			assert.Equal(t, wantN, n)
		})
	}
}

// TestParserOversizedMemory: skipping an event far larger than the limit
// buffers no more than the limit.
func TestParserOversizedMemory(t *testing.T) {
	const limit = 1 << 10
	var got []string
	p := Parser{MaxEventSize: limit, Handler: func(ev *Event) { got = append(got, string(ev.Data)) }}
	chunk := bytes.Repeat([]byte("x"), 4<<10)
	p.Feed([]byte("data: "))
	for range 256 { // 1 MiB of one line
		p.Feed(chunk)
		assert.LessOrEqual(t, cap(p.partial), limit)
		assert.LessOrEqual(t, cap(p.data), limit)
	}
	assert.True(t, p.Pending())
	p.Feed([]byte("\n\ndata: [DONE]\n\n"))
	assert.Equal(t, []string{"[DONE]"}, got)
	assert.Equal(t, int64(1), p.Oversized())
	assert.False(t, p.Pending())
}

func TestReaderStopsAtOversizedEvent(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\ndata: " + strings.Repeat("x", 64) + "\n\ndata: b\n\n"))
	r.SetMaxEventSize(32)
	ev, err := r.Next()
	require.NoError(t, err)
	assert.Equal(t, "a", string(ev.Data))
	_, err = r.Next()
	require.ErrorIs(t, err, ErrEventTooLarge)
	_, err = r.Next()
	require.ErrorIs(t, err, ErrEventTooLarge, "the error is sticky")
}

func TestParserResetAndPending(t *testing.T) {
	var n int
	p := Parser{Handler: func(*Event) { n++ }, MaxEventSize: 16}
	p.Feed([]byte("data: x\n"))
	assert.True(t, p.Pending())
	p.Reset()
	assert.False(t, p.Pending())
	assert.Zero(t, p.Offset())
	p.Feed([]byte("data: 0123456789abcdef"))
	assert.Equal(t, int64(1), p.Oversized())
	p.Reset()
	assert.Zero(t, p.Oversized())
	assert.False(t, p.Pending())
	p.Feed([]byte("\xEF\xBB\xBFdata: y\n\n"))
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
	p.Feed(frame)
	allocs := testing.AllocsPerRun(100, func() {
		p.Feed(frame[:10])
		p.Feed(frame[10:])
	})
	assert.Zero(t, allocs)
}

func FuzzParser(f *testing.F) {
	seeds := []string{
		"data: hi\n\n", "data: a\r\ndata: b\r\n\r\n", "data: x\r\r", ": ka\n\n",
		"\xEF\xBB\xBFevent: ping\nid: 1\nretry: 10\ndata: {}\n\n", "data\n\ndata:\n\n", "id: \x00\n",
		"event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
		"data: 0123456789abcdefghij\n\ndata: [DONE]\n\n", "data: 0123\ndata: 4567\ndata: 89ab\r\n\r\ndata: x\r\r",
	}
	for _, s := range seeds {
		f.Add([]byte(s), uint16(3), uint8(12))
	}
	f.Fuzz(func(t *testing.T, in []byte, split uint16, limit uint8) {
		want := withBOMOffset(in, reference(in))
		s := 0
		if len(in) > 0 {
			s = int(split) % (len(in) + 1)
		}
		assert.Equal(t, want, feedAll(t, in, s), "parser split at %d", s)
		assert.Equal(t, want, readAll(t, iotest.OneByteReader(bytes.NewReader(in))), "one-byte reader")
		assert.Equal(t, want, readAll(t, bytes.NewReader(in)), "reader")

		// With a small limit: oversized events are skipped, the parser
		// resynchronizes at the next blank line, whatever the split, and
		// never buffers more than the limit.
		lim := int(limit)%64 + 1
		wantMax, wantN := referenceMax(in, lim)
		wantMax = withBOMOffset(in, wantMax)
		var got []record
		p := Parser{MaxEventSize: lim, Handler: func(ev *Event) {
			assert.LessOrEqual(t, len(ev.Data), lim)
			got = append(got, own(ev))
		}}
		p.Feed(in[:s])
		assert.LessOrEqual(t, len(p.partial), lim)
		assert.LessOrEqual(t, len(p.data), lim)
		p.Feed(in[s:])
		assert.LessOrEqual(t, len(p.partial), lim)
		assert.LessOrEqual(t, len(p.data), lim)
		assert.Equal(t, wantMax, got, "limit %d, split at %d", lim, s)
		assert.Equal(t, wantN, p.Oversized(), "limit %d, split at %d", lim, s)
		if wantN == 0 {
			assert.Equal(t, wantMax, want, "nothing oversized: the same events as without a limit")
		}

		// With a byte budget past a small free size: the events that
		// pass are those of the reference, in order; what the budget
		// cannot hold is skipped and counted; the budget is never passed
		// and is whole again once the parser is reset.
		budget := NewSharedBudget(int64(limit) % 48)
		var budgeted []record
		bp := Parser{Budget: budget, freeBytes: 4, Handler: func(ev *Event) {
			assert.LessOrEqual(t, budget.Used(), int64(limit)%48)
			budgeted = append(budgeted, own(ev))
		}}
		bp.Feed(in[:s])
		bp.Feed(in[s:])
		assert.LessOrEqual(t, len(budgeted)+int(bp.Oversized()), len(want)+int(bp.Oversized()))
		// An id longer than the free size is ignored by design.
		longID := slices.ContainsFunc(want, func(r record) bool { return len(r.ID) > 4 })
		if bp.Oversized() == 0 && !longID {
			assert.Equal(t, want, budgeted, "nothing skipped: the same events as without a budget")
		}
		bp.Reset()
		assert.Zero(t, budget.Used(), "a reset parser holds nothing of the budget")
	})
}

// TestParserSharedBudget: parsers that share a budget hold at most its
// bytes together; a frame that does not fit is skipped and counted, and
// the bytes come back once a frame is done.
func TestParserSharedBudget(t *testing.T) {
	budget := NewSharedBudget(1 << 20)
	line := bytes.Repeat([]byte("x"), 700<<10)
	var got [2][]string
	ps := make([]*Parser, 2)
	for i := range ps {
		ps[i] = &Parser{Budget: budget, Handler: func(ev *Event) { got[i] = append(got[i], string(ev.Data[:min(len(ev.Data), 8)])) }}
		ps[i].Feed([]byte("data: "))
	}
	ps[0].Feed(line) // 700 KiB held
	assert.Greater(t, budget.Used(), int64(600<<10))
	ps[1].Feed(line) // would pass the budget: skipped
	assert.Equal(t, int64(1), ps[1].Oversized())
	assert.Zero(t, ps[0].Oversized())
	assert.LessOrEqual(t, budget.Used(), int64(1<<20))
	for _, p := range ps {
		p.Feed([]byte("\n\ndata: [DONE]\n\n"))
	}
	assert.Equal(t, []string{"xxxxxxxx", "[DONE]"}, got[0])
	assert.Equal(t, []string{"[DONE]"}, got[1])
	assert.Zero(t, budget.Used(), "every byte back once the frames are done")
	assert.LessOrEqual(t, cap(ps[0].data), keepBufferCap, "the large buffer is let go")
}

func BenchmarkParser(b *testing.B) {
	frame := []byte("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello\"},\"finish_reason\":null}]}\n\n")
	stream := bytes.Repeat(frame, 64)
	p := Parser{Handler: func(*Event) {}}
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		p.Feed(stream)
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

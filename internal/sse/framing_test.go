// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package sse

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// feedSplitter feeds in to a new splitter of framing f in two parts, split
// at s, then flushes, and returns the events.
func feedSplitter(f Framing, in []byte, s, limit int) ([]record, Splitter) {
	var got []record
	sp := NewSplitter(f, limit, func(ev *Event) { got = append(got, own(ev)) })
	sp.Feed(in[:s])
	sp.Feed(in[s:])
	sp.Flush()
	return got, sp
}

func readFramed(tb testing.TB, f Framing, r io.Reader) []record {
	tb.Helper()
	rd := NewFramedReader(f, r)
	var got []record
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return got
		}
		require.NoError(tb, err)
		got = append(got, own(&ev))
	}
}

// TestParserGoogleCRLF: Google ends each event with CRLF CRLF; the events
// and their ends do not depend on where the reads split the terminators.
func TestParserGoogleCRLF(t *testing.T) {
	in := []byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi\"}]}}]}\r\n\r\ndata: {\"candidates\":[]}\r\n\r\n")
	// An event ends past the CR of the blank line that dispatched it.
	first := bytes.Index(in, []byte("\r\n\r\n")) + 3
	want := []record{
		{Data: `{"candidates":[{"content":{"parts":[{"text":"Hi"}]}}]}`, Retry: -1, End: int64(first)},
		{Data: `{"candidates":[]}`, Retry: -1, End: int64(len(in) - 1)},
	}
	for s := range len(in) + 1 {
		got, _ := feedSplitter(FramingSSE, in, s, 0)
		assert.Equal(t, want, got, "split at %d", s)
	}
	assert.Equal(t, want, readFramed(t, FramingSSE, iotest.OneByteReader(bytes.NewReader(in))))
}

// referenceLines is a whole-input reading of NDJSON: lines end at LF, white
// space around a line is dropped, blank lines are none, a last line without
// LF counts, and a line longer than limit (before trimming) is skipped.
func referenceLines(in []byte, limit int) ([]record, int64) {
	var out []record
	var oversized int64
	base := 0
	for base < len(in) {
		i := bytes.IndexByte(in[base:], '\n')
		end, next := len(in), len(in)
		if i >= 0 {
			end, next = base+i, base+i+1
		}
		line := in[base:end]
		switch {
		case len(line) > limit:
			oversized++
		case len(bytes.TrimSpace(line)) > 0:
			out = append(out, record{Data: string(bytes.TrimSpace(line)), Retry: -1, End: int64(next)})
		}
		base = next
	}
	return out, oversized
}

func TestLineParser(t *testing.T) {
	in := []byte("{\"message\":{\"content\":\"Hel\"},\"done\":false}\n\r\n  \n{\"done\":true}\r\n{\"error\":\"x\"}")
	want := []record{
		{Data: `{"message":{"content":"Hel"},"done":false}`, Retry: -1, End: 43},
		{Data: `{"done":true}`, Retry: -1, End: 63},
		{Data: `{"error":"x"}`, Retry: -1, End: 76},
	}
	for s := range len(in) + 1 {
		got, sp := feedSplitter(FramingNDJSON, in, s, 0)
		assert.Equal(t, want, got, "split at %d", s)
		assert.False(t, sp.Pending())
		assert.Equal(t, int64(len(in)), sp.Offset())
	}
	assert.Equal(t, want, readFramed(t, FramingNDJSON, iotest.OneByteReader(bytes.NewReader(in))),
		"the reader returns the last line without its LF at EOF")
}

func TestLineParserSkipsOversizedLines(t *testing.T) {
	in := []byte("{\"a\":1}\n{\"b\":\"" + strings.Repeat("x", 40) + "\"}\n{\"c\":3}\n")
	for s := range len(in) + 1 {
		got, sp := feedSplitter(FramingNDJSON, in, s, 16)
		assert.Equal(t, []record{{Data: `{"a":1}`, Retry: -1, End: 8}, {Data: `{"c":3}`, Retry: -1, End: int64(len(in))}}, got, "split at %d", s)
		assert.Equal(t, int64(1), sp.Oversized())
	}
	r := NewFramedReader(FramingNDJSON, bytes.NewReader(in))
	r.SetMaxEventSize(16)
	_, err := r.Next()
	require.NoError(t, err)
	_, err = r.Next()
	require.ErrorIs(t, err, ErrEventTooLarge)
}

func TestLineParserResetAndWriter(t *testing.T) {
	var got []string
	p := &LineParser{Handler: func(ev *Event) { got = append(got, string(ev.Data)) }}
	_, err := io.Copy(p, iotest.HalfReader(strings.NewReader("{\"a\":1}\n{\"b\"")))
	require.NoError(t, err)
	assert.True(t, p.Pending())
	p.Reset()
	assert.False(t, p.Pending())
	assert.Zero(t, p.Offset())
	p.Feed([]byte("{\"c\":3}\n"))
	assert.Equal(t, []string{`{"a":1}`, `{"c":3}`}, got)
}

// referenceArray reads a JSON array with encoding/json, element by element,
// as ArrayParser must cut it when it is valid.
func referenceArray(tb testing.TB, in []byte) []string {
	tb.Helper()
	var elems []json.RawMessage
	require.NoError(tb, json.Unmarshal(in, &elems))
	out := make([]string, len(elems))
	for i, e := range elems {
		out[i] = string(e)
	}
	return out
}

func datas(recs []record) []string {
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.Data)
	}
	return out
}

// geminiArray is how Gemini streams without alt=sse: the array and its
// commas are spread over the writes, each element pretty-printed.
const geminiArray = "[{\n  \"candidates\": [{\"content\": {\"parts\": [{\"text\": \"a ]}\\\" {\"}]}}]\n}\n" +
	",\r\n{\n  \"candidates\": [{\"finishReason\": \"STOP\"}],\n  \"usageMetadata\": {\"promptTokenCount\": 3}\n}\n" +
	"]"

func TestArrayParser(t *testing.T) {
	in := []byte(geminiArray)
	want := referenceArray(t, in)
	first := strings.Index(geminiArray, "}\n,") + 1
	for s := range len(in) + 1 {
		got, sp := feedSplitter(FramingJSONArray, in, s, 0)
		assert.Equal(t, want, datas(got), "split at %d", s)
		assert.Equal(t, int64(first), got[0].End, "an element ends at its closing brace, not at the comma after it")
		assert.False(t, sp.Pending())
	}
	assert.Equal(t, want, datas(readFramed(t, FramingJSONArray, iotest.OneByteReader(bytes.NewReader(in)))))
}

func TestArrayParserShapes(t *testing.T) {
	tests := map[string][]string{
		`[]`: nil,
		` [ 1 , "a\"]" , true, null, [2,[3]], {"k":{}} ] `: {`1`, `"a\"]"`, `true`, `null`, `[2,[3]]`, `{"k":{}}`}, //nolint:gocritic // the whitespace is the test
		`{"error":{"code":429}}`:                           {`{"error":{"code":429}}`},
		`[{"a":1}][{"b":2}]`:                               {`{"a":1}`, `{"b":2}`},
		`[{"a":1}{"b":2}]`:                                 {`{"a":1}`, `{"b":2}`},
		`[{"a":1},`:                                        {`{"a":1}`},
		`[{"a":1},{"b":`:                                   {`{"a":1}`},
		`42`:                                               {`42`},
	}
	for in, want := range tests {
		for s := range len(in) + 1 {
			got, _ := feedSplitter(FramingJSONArray, []byte(in), s, 0)
			assert.Equal(t, want, nilIfEmpty(datas(got)), "%s split at %d", in, s)
		}
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestArrayParserSkipsOversizedElements(t *testing.T) {
	in := []byte(`[{"a":1},{"b":"` + strings.Repeat("x", 40) + `"},{"c":3}]`)
	for s := range len(in) + 1 {
		got, sp := feedSplitter(FramingJSONArray, in, s, 16)
		assert.Equal(t, []string{`{"a":1}`, `{"c":3}`}, datas(got), "split at %d", s)
		assert.Equal(t, int64(1), sp.Oversized())
	}
}

func TestArrayParserResetAndWriter(t *testing.T) {
	var got []string
	p := &ArrayParser{Handler: func(ev *Event) { got = append(got, string(ev.Data)) }}
	_, err := io.Copy(p, iotest.HalfReader(strings.NewReader(`[{"a":1},{"b"`)))
	require.NoError(t, err)
	assert.True(t, p.Pending())
	p.Reset()
	assert.False(t, p.Pending())
	p.Feed([]byte(`[{"c":3}]`))
	assert.Equal(t, []string{`{"a":1}`, `{"c":3}`}, got)
	assert.Equal(t, "json_array", FramingJSONArray.String())
	assert.Equal(t, "ndjson", FramingNDJSON.String())
	assert.Equal(t, "sse", FramingSSE.String())
}

func TestSplittersNoAllocsSteadyState(t *testing.T) {
	line := []byte("{\"message\":{\"content\":\"hi\"},\"done\":false}\n")
	lp := LineParser{Handler: func(*Event) {}}
	lp.Feed(line)
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		lp.Feed(line[:10])
		lp.Feed(line[10:])
	}))
	elem := []byte(",\r\n{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hi\"}]}}]}\n")
	ap := ArrayParser{Handler: func(*Event) {}}
	ap.Feed([]byte("[{}"))
	ap.Feed(elem)
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		ap.Feed(elem[:20])
		ap.Feed(elem[20:])
	}))
}

// FuzzLineParser: the lines do not depend on how the reads split the
// stream, match a whole-input reading, and never buffer past the limit.
func FuzzLineParser(f *testing.F) {
	for _, s := range []string{
		"{\"done\":false}\n{\"done\":true}\n", "a\r\n\r\nb", "\n\n\n", "0123456789abcdefghij\nx\n", "{\"error\":\"x\"}",
	} {
		f.Add([]byte(s), uint16(3), uint8(12))
	}
	f.Fuzz(func(t *testing.T, in []byte, split uint16, limit uint8) {
		s := 0
		if len(in) > 0 {
			s = int(split) % (len(in) + 1)
		}
		lim := int(limit)%64 + 1
		want, wantN := referenceLines(in, lim)
		got, sp := feedSplitter(FramingNDJSON, in, s, lim)
		assert.Equal(t, want, got, "limit %d, split at %d", lim, s)
		assert.Equal(t, wantN, sp.Oversized())
		assert.LessOrEqual(t, len(sp.(*LineParser).line), lim)

		// With a byte budget past a small free size: the lines that pass
		// are the reference's, in order, when none is skipped; the budget
		// is never passed and is whole again after the stream.
		budget := NewSharedBudget(int64(limit) % 48)
		var budgeted []record
		bp := &LineParser{Budget: budget, freeBytes: 4, Handler: func(ev *Event) {
			assert.LessOrEqual(t, budget.Used(), int64(limit)%48)
			budgeted = append(budgeted, own(ev))
		}}
		bp.Feed(in[:s])
		bp.Feed(in[s:])
		assert.LessOrEqual(t, budget.Used(), int64(limit)%48)
		bp.Flush()
		if bp.Oversized() == 0 {
			all, _ := referenceLines(in, DefaultMaxEventSize)
			assert.Equal(t, all, budgeted, "nothing skipped: the same lines as without a budget")
		}
		bp.Reset()
		assert.Zero(t, budget.Used(), "a reset parser holds nothing of the budget")
		if wantN == 0 {
			r := NewFramedReader(FramingNDJSON, iotest.OneByteReader(bytes.NewReader(in)))
			r.SetMaxEventSize(lim)
			var read []record
			for {
				ev, err := r.Next()
				if err != nil {
					require.ErrorIs(t, err, io.EOF)
					break
				}
				read = append(read, own(&ev))
			}
			assert.Equal(t, want, read, "one-byte reader")
		}
	})
}

// FuzzArrayParser: the elements do not depend on how the reads split the
// stream; on a valid JSON array they are encoding/json's elements; on any
// input the parser never buffers past its limit.
func FuzzArrayParser(f *testing.F) {
	for _, s := range []string{
		geminiArray, `[1,"a",[2],{"b":"]"}]`, `{"error":{"code":500}}`, `[{"a":"\\"},`, `[[[[`, `"\"`, `]]],,`,
	} {
		f.Add([]byte(s), uint16(3), uint8(40))
	}
	f.Fuzz(func(t *testing.T, in []byte, split uint16, limit uint8) {
		s := 0
		if len(in) > 0 {
			s = int(split) % (len(in) + 1)
		}
		whole, _ := feedSplitter(FramingJSONArray, in, len(in), 0)
		got, _ := feedSplitter(FramingJSONArray, in, s, 0)
		require.Equal(t, whole, got, "split at %d", s)
		var elems []json.RawMessage
		if bytes.HasPrefix(bytes.TrimLeft(in, " \t\r\n"), []byte("[")) && json.Unmarshal(in, &elems) == nil {
			assert.Equal(t, referenceArray(t, in), datas(got))
		}
		lim := int(limit)%64 + 1
		sp := &ArrayParser{MaxEventSize: lim, Handler: func(ev *Event) { assert.LessOrEqual(t, len(ev.Data), lim) }}
		sp.Feed(in[:s])
		assert.LessOrEqual(t, len(sp.elem), lim)
		sp.Feed(in[s:])
		assert.LessOrEqual(t, len(sp.elem), lim)

		// With a byte budget past a small free size, as in FuzzLineParser.
		budget := NewSharedBudget(int64(limit) % 48)
		var budgeted []record
		bp := &ArrayParser{Budget: budget, freeBytes: 4, Handler: func(ev *Event) {
			assert.LessOrEqual(t, budget.Used(), int64(limit)%48)
			budgeted = append(budgeted, own(ev))
		}}
		bp.Feed(in[:s])
		bp.Feed(in[s:])
		assert.LessOrEqual(t, budget.Used(), int64(limit)%48)
		bp.Flush()
		if bp.Oversized() == 0 {
			assert.Equal(t, whole, budgeted, "nothing skipped: the same elements as without a budget")
		}
		bp.Reset()
		assert.Zero(t, budget.Used(), "a reset parser holds nothing of the budget")
	})
}

// TestSplittersSharedBudget: NDJSON and JSON-array parsers that share a
// budget hold at most its bytes together, as SSE parsers do: a frame that
// does not fit is skipped and counted, the bytes come back once a frame is
// done, and the large buffer is let go.
func TestSplittersSharedBudget(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 700<<10)
	for _, tt := range []struct {
		framing     Framing
		open, close string
		after       string
		want        string
	}{
		{FramingNDJSON, `{"t":"`, `"}` + "\n", `{"done":true}` + "\n", `{"done":true}`},
		{FramingJSONArray, `[{"t":"`, `"}`, `,{"done":true}]`, `{"done":true}`},
	} {
		t.Run(tt.framing.String(), func(t *testing.T) {
			budget := NewSharedBudget(1 << 20)
			var got [2][]string
			ps := make([]Splitter, 2)
			for i := range ps {
				ps[i] = NewBudgetedSplitter(tt.framing, 0, budget, func(ev *Event) { got[i] = append(got[i], string(ev.Data[:min(len(ev.Data), 13)])) })
				ps[i].Feed([]byte(tt.open))
			}
			for off := 0; off < len(big); off += 16 << 10 {
				ps[0].Feed(big[off:min(off+16<<10, len(big))]) // 700 KiB held, read by read
			}
			assert.Greater(t, budget.Used(), int64(600<<10))
			ps[1].Feed(big) // would pass the budget: skipped
			assert.Equal(t, int64(1), ps[1].Oversized())
			assert.Zero(t, ps[0].Oversized())
			assert.LessOrEqual(t, budget.Used(), int64(1<<20))
			for _, p := range ps {
				p.Feed([]byte(tt.close + tt.after))
			}
			assert.Equal(t, []string{`{"t":"xxxxxxx`, tt.want}, got[0])
			assert.Equal(t, []string{tt.want}, got[1])
			assert.Zero(t, budget.Used(), "every byte back once the frames are done")
		})
	}
}

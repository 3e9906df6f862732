// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDecodeLoneSurrogates: a \u escape of half a UTF-16 surrogate pair
// names no character; encoding/json would store U+FFFD for it, the decoder
// refuses the record and names the field. Whole pairs are characters.
func TestDecodeLoneSurrogates(t *testing.T) {
	start := fmt.Sprintf(`"start_time_unix_nano":%d`, at(-time.Minute))
	for _, tt := range []struct {
		name, body, field string
	}{
		{"high surrogate in the name", `{"name":"chat \ud800",` + start + `}`, "name"},
		{"low surrogate alone", `{"name":"a",` + start + `,"attributes":{"k":"\udc00"}}`, "attributes.k"},
		{"high surrogate before a character", `{"name":"a",` + start + `,"attributes":{"k":"\ud800\u0041"}}`, "attributes.k"},
		{"two high surrogates", `{"name":"a",` + start + `,"attributes":{"k":["\ud83d\ud83d"]}}`, "attributes.k"},
		{"in a key", `{"name":"a",` + start + `,"attributes":{"\udfff":1}}`, "attributes"},
		{"high surrogate at the end of the string", `{"name":"a",` + start + `,"trace_id":"\ud800"}`, "trace_id"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, oneByte := range []bool{false, true} {
				var r io.Reader = strings.NewReader(tt.body)
				if oneByte {
					r = iotest.OneByteReader(r)
				}
				td, n, err := testDecoder(3, 5).decode(t.Context(), r)
				require.NotNil(t, err, "one byte at a time: %v", oneByte)
				assert.Equal(t, http.StatusBadRequest, err.Status)
				assert.Equal(t, 0, err.Record)
				assert.Equal(t, tt.field, err.Field)
				assert.Contains(t, err.Message, "surrogate")
				assert.Zero(t, n)
				assert.Zero(t, td.SpanCount())
			}
		})
	}
	body := `{"name":"chat \ud83d\ude00 \u00e9\n\t\"\\\/",` + start + `,"attributes":{"k":"\uD834\uDD1E"}}`
	td, _, err := testDecoder(3, 5).decode(t.Context(), iotest.OneByteReader(strings.NewReader(body)))
	require.Nil(t, err)
	span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	assert.Equal(t, "chat 😀 é\n\t\"\\/", span.Name())
	v, _ := span.Attributes().Get("k")
	assert.Equal(t, "𝄞", v.Str())
}

// scanString reads one JSON string with the scanner, fed in pieces of step
// bytes.
func scanString(in []byte, step int) (string, error) {
	r := io.Reader(bytes.NewReader(in))
	if step > 0 {
		r = &chunkedReader{r: r, n: step}
	}
	s := newJSONScanner(r)
	c, err := s.peek()
	if err != nil {
		return "", err
	}
	if c != '"' {
		return "", errors.New("not a string")
	}
	text, tooLong, err := s.str(1 << 20)
	if err != nil {
		return "", err
	}
	if tooLong {
		return "", errors.New("too long")
	}
	// text is valid until the scanner's next call, as str says: the peek
	// below may refill the buffer under it.
	got := string(text)
	if _, err := s.peek(); !errors.Is(err, io.EOF) {
		return "", errors.New("data after the string")
	}
	return got, nil
}

type chunkedReader struct {
	r io.Reader
	n int
}

func (c *chunkedReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// FuzzScanString: a string the scanner accepts is valid JSON and decodes
// as encoding/json decodes it, whatever the reads' sizes; a valid JSON
// string it refuses holds a lone surrogate (which encoding/json turns into
// U+FFFD).
func FuzzScanString(f *testing.F) {
	for _, s := range []string{`"a"`, `"\ud83d\ude00"`, `"\ud800"`, `"é\u00e9\n"`, `"\x"`, "\"\xff\"", `"\/\b\f\r\t"`, `"`} {
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		if !bytes.HasPrefix(bytes.TrimLeft(in, " \t\r\n"), []byte{'"'}) {
			return // another value
		}
		whole, err := scanString(in, 0)
		split, serr := scanString(in, int(step)%7+1)
		require.Equal(t, err == nil, serr == nil, "whole: %v, split: %v", err, serr)
		require.Equal(t, whole, split)
		var ref string
		refErr := json.Unmarshal(in, &ref)
		if err == nil {
			require.True(t, json.Valid(in), "accepted %q", in)
			require.NoError(t, refErr)
			require.Equal(t, ref, whole)
			require.True(t, utf8.ValidString(whole))
			return
		}
		if json.Valid(in) && utf8.Valid(in) {
			require.ErrorIs(t, err, errLoneSurrogate, "refused valid JSON %q", in)
			require.Contains(t, ref, string(utf8.RuneError))
		}
	})
}

// FuzzScanNumber: the numbers the scanner accepts are JSON's.
func FuzzScanNumber(f *testing.F) {
	for _, s := range []string{"0", "-1.5e+3", "01", "1.", ".5", "-", "1e", "120.5", "1790000000000000000"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		s := newJSONScanner(bytes.NewReader(in))
		c, err := s.peek()
		if err != nil || c != '-' && (c < '0' || c > '9') {
			return
		}
		text, err := s.number()
		if err != nil {
			return
		}
		require.True(t, json.Valid(text), "accepted %q", text)
		if ms, ok := fastMillis(text); ok {
			var ref float64
			require.NoError(t, json.Unmarshal(text, &ref))
			require.Equal(t, ref, ms, "the fast path rounds as ParseFloat does: %q", text)
		}
	})
}

// TestDecodeWhitespaceReadOnce: white space is skipped a window at a time
// and never read again, so a body of it costs time in proportion to its
// length. encoding/json's Decoder rescanned what it had buffered on every
// read: 16 MiB of white space (a 32 KB gzip body) took it seconds before
// its 413. Measured as a ratio within the run, never as a time: a body 16
// times as long costs about 16 times as much, not 256.
func TestDecodeWhitespaceReadOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("measures two benchmarks")
	}
	perByte := func(n int) float64 {
		body := bytes.Repeat([]byte(" \n"), n/2)
		d := testDecoder(defaultMaxRecords, defaultMaxChunks)
		r := testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				// Read as a network delivers it, 32 KiB at a time.
				_, _, err := d.decode(t.Context(), &chunkedReader{r: bytes.NewReader(body), n: 32 << 10})
				if err == nil || !strings.Contains(err.Message, "empty body") {
					b.Fatal(err)
				}
			}
		})
		return float64(r.T.Nanoseconds()) / float64(r.N) / float64(n)
	}
	small, large := perByte(1<<20), perByte(16<<20)
	t.Logf("white space: %.2f ns/byte at 1 MiB, %.2f ns/byte at 16 MiB", small, large)
	assert.Less(t, large/small, 4.0, "the cost per byte does not grow with the body")
}

// BenchmarkDecodeWhitespace reports what a body of white space costs per
// decoded byte against a realistic body of records (ratio-vs-records): the
// decoder's CPU follows what it reads, whatever it keeps.
func BenchmarkDecodeWhitespace(b *testing.B) {
	space := bytes.Repeat([]byte(" \n\t\r"), (16<<20)/4)
	records := benchRecordsBody()[1:] // NDJSON: one record a line
	records = bytes.ReplaceAll(records, []byte("},{"), []byte("}\n{"))
	records = records[:len(records)-1]
	d := testDecoder(defaultMaxRecords, defaultMaxChunks)
	var spaceNs, recordNs float64
	for b.Loop() {
		t0 := time.Now()
		if _, _, err := d.decode(b.Context(), &chunkedReader{r: bytes.NewReader(space), n: 32 << 10}); err == nil {
			b.Fatal("accepted white space")
		}
		t1 := time.Now()
		if _, _, err := d.decode(b.Context(), &chunkedReader{r: bytes.NewReader(records), n: 32 << 10}); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		spaceNs += float64(t1.Sub(t0).Nanoseconds()) / float64(len(space))
		recordNs += float64(t2.Sub(t1).Nanoseconds()) / float64(len(records))
	}
	b.ReportMetric(spaceNs/float64(b.N), "space-ns/byte")
	b.ReportMetric(recordNs/float64(b.N), "records-ns/byte")
	b.ReportMetric(spaceNs/recordNs, "ratio-vs-records")
}

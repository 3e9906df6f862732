// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ingest

import (
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

// at is a unix-nano time relative to testReceipt.
func at(d time.Duration) int64 { return testReceipt.Add(d).UnixNano() }

// TestDecodePlausibleTimes: a record's start must lie within max_start_age
// before and max_clock_skew after the time its request arrived, its end and
// chunk times no further ahead, and the stream may last max_stream_duration;
// otherwise 400 names the record and the field.
func TestDecodePlausibleTimes(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		field string // empty: accepted
		msg   string
	}{
		{"a minute ago", fmt.Sprintf(`{"name":"a","start_time_unix_nano":%d,"chunk_offsets_ms":[10,20]}`, at(-time.Minute)), "", ""},
		{"max_start_age ago", fmt.Sprintf(`{"name":"a","start_time_unix_nano":%d}`, at(-24*time.Hour)), "", ""},
		{"older", fmt.Sprintf(`{"name":"a","start_time_unix_nano":%d}`, at(-24*time.Hour-time.Second)), "start_time_unix_nano", "max_start_age"},
		{"years ago", `{"name":"a","start_time_unix_nano":1}`, "start_time_unix_nano", "1970-01-01T00:00:00.000000001Z is"},
		{"start slightly ahead", fmt.Sprintf(`{"name":"a","start_time_unix_nano":"%d"}`, at(4*time.Minute)), "", ""},
		{"start too far ahead", fmt.Sprintf(`{"name":"a","start_time_unix_nano":"%d"}`, at(6*time.Minute)), "start_time_unix_nano", "max_clock_skew"},
		{"end ahead", fmt.Sprintf(`{"name":"a","start_time_unix_nano":%d,"end_time_unix_nano":%d}`, at(-time.Minute), at(10*time.Minute)), "end_time_unix_nano", "max_clock_skew"},
		{"chunk time ahead", fmt.Sprintf(`{"name":"a","start_time_unix_nano":%d,"chunk_times_unix_nano":[%d,%d]}`, at(-time.Minute), at(-time.Second), at(time.Hour)), "chunk_times_unix_nano", "max_clock_skew"},
		{"chunk offset ahead", fmt.Sprintf(`{"name":"a","start_time_unix_nano":%d,"chunk_offsets_ms":[1, 600000]}`, at(-time.Second)), "chunk_offsets_ms", "max_clock_skew"},
		{"an hour long", fmt.Sprintf(`{"name":"a","start_time_unix_nano":%d,"end_time_unix_nano":%d}`, at(-2*time.Hour), at(-time.Hour)), "", ""},
		{"end too late", fmt.Sprintf(`{"name":"a","start_time_unix_nano":%d,"end_time_unix_nano":%d}`, at(-3*time.Hour), at(-time.Hour)), "end_time_unix_nano", "max_stream_duration"},
		{"chunks too late", fmt.Sprintf(`{"name":"a","start_time_unix_nano":%d,"chunk_offsets_ms":[1,3600001]}`, at(-2*time.Hour)), "chunk_offsets_ms", "would last 1h0m0.001s"},
		{"chunk after the end", fmt.Sprintf(`{"name":"a","start_time_unix_nano":%d,"end_time_unix_nano":%d,"chunk_times_unix_nano":[%d]}`, at(-3*time.Hour), at(-3*time.Hour+time.Second), at(-time.Minute)), "chunk_times_unix_nano", "max_stream_duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td, n, err := testDecoder(3, 5).decodeBytes([]byte(tt.body))
			if tt.field == "" {
				require.Nil(t, err)
				assert.Equal(t, 1, n)
				assert.Equal(t, 1, td.SpanCount())
				return
			}
			require.NotNil(t, err)
			assert.Equal(t, http.StatusBadRequest, err.Status)
			assert.Equal(t, 0, err.Record)
			assert.Equal(t, tt.field, err.Field)
			assert.Contains(t, err.Message, tt.msg)
			assert.Zero(t, td.SpanCount())
		})
	}

	t.Run("second record", func(t *testing.T) {
		body := fmt.Sprintf(`{"name":"a","start_time_unix_nano":%d}`+"\n"+`{"name":"b","start_time_unix_nano":%d}`, at(-time.Minute), at(-48*time.Hour))
		_, _, err := testDecoder(3, 5).decodeBytes([]byte(body))
		require.NotNil(t, err)
		assert.Equal(t, 1, err.Record)
		assert.Equal(t, "start_time_unix_nano", err.Field)
	})
}

// TestDecodeOffsetStrings: a chunk offset given as a string is decimal
// digits with an optional fraction, as the JSON Schema says; JSON numbers
// keep their full syntax.
func TestDecodeOffsetStrings(t *testing.T) {
	for _, tt := range []struct {
		offset string
		ok     bool
	}{
		{`"12.5"`, true},
		{`"3"`, true},
		{`"0"`, true},
		{`"0.000"`, true},
		{`1e3`, true},
		{`12.5`, true},
		{`0`, true},
		{`"1e3"`, false},
		{`"+1"`, false},
		{`"-1"`, false},
		{`"Infinity"`, false},
		{`"NaN"`, false},
		{`"1."`, false},
		{`".5"`, false},
		{`" 1"`, false},
		{`"0x10"`, false},
		{`""`, false},
		{`"1_000"`, false},
	} {
		t.Run(tt.offset, func(t *testing.T) {
			body := fmt.Sprintf(`{"name":"a","start_time_unix_nano":%d,"chunk_offsets_ms":[1,%s]}`, at(-time.Minute), tt.offset)
			_, _, err := testDecoder(3, 5).decodeBytes([]byte(body))
			if tt.ok {
				require.Nil(t, err)
				return
			}
			require.NotNil(t, err)
			assert.Equal(t, http.StatusBadRequest, err.Status)
			assert.Equal(t, "chunk_offsets_ms", err.Field)
			assert.Contains(t, err.Message, "element 1")
		})
	}
}

// TestDecodeInvalidUTF8: a string that is not valid UTF-8, anywhere in a
// record, gets 400 naming the record and the field; encoding/json would
// have replaced it with U+FFFD. Valid characters split across reads pass.
func TestDecodeInvalidUTF8(t *testing.T) {
	start := fmt.Sprintf(`"start_time_unix_nano":%d`, at(-time.Minute))
	for _, tt := range []struct {
		name   string
		body   string
		record int
		field  string
	}{
		{"name", `{"name":"chat ` + "\xff" + `",` + start + `}`, 0, "name"},
		{"truncated character in name", `{"name":"chat ` + "\xe2\x82" + `",` + start + `}`, 0, "name"},
		{"attribute value", `{"name":"a",` + start + `,"attributes":{"k":"v` + "\xc3\x28" + `"}}`, 0, "attributes.k"},
		{"surrogate in an array", `{"name":"a",` + start + `,"attributes":{"k":["ok","` + "\xed\xa0\x80" + `"]}}`, 0, "attributes.k"},
		{"attribute key", `{"name":"a",` + start + `,"attributes":{"k` + "\xfe" + `":1}}`, 0, "attributes"},
		{"trace id", `{"name":"a",` + start + `,"trace_id":"` + "\xff" + `"}`, 0, "trace_id"},
		{"second record", `{"name":"a",` + start + "}\n" + `{"name":"` + "\x80" + `",` + start + `}`, 1, "name"},
		{"at the very end", `{"name":"a",` + start + "}\n\xf0\x9f", 1, ""},
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
				assert.Equal(t, tt.record, err.Record)
				assert.Equal(t, tt.field, err.Field)
				assert.Contains(t, err.Message, "UTF-8")
				assert.Zero(t, n)
				assert.Zero(t, td.SpanCount())
			}
		})
	}

	t.Run("valid characters split across reads", func(t *testing.T) {
		name := "chat €𝄞ü " + strings.Repeat("é", 10)
		body := `{"name":"` + name + `",` + start + `,"attributes":{"mödel":"gpt-4o ✓"}}`
		td, n, err := testDecoder(3, 5).decode(t.Context(), iotest.OneByteReader(strings.NewReader(body)))
		require.Nil(t, err)
		require.Equal(t, 1, n)
		span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
		assert.Equal(t, name, span.Name())
		v, ok := span.Attributes().Get("mödel")
		require.True(t, ok)
		assert.Equal(t, "gpt-4o ✓", v.Str())
		assert.True(t, utf8.ValidString(span.Name()))
	})
}

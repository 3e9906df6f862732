// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ingest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
)

const limitStart = `"start_time_unix_nano": 1790000000000000000`

// TestDecodeNewLimits: attributes, value lengths, duplicates and reserved
// names, each rejected with the record and field at fault.
func TestDecodeNewLimits(t *testing.T) {
	long := strings.Repeat("x", defaultMaxValueLength+1)
	var many strings.Builder
	for i := range defaultMaxAttrs + 1 {
		fmt.Fprintf(&many, `"k%d":%d,`, i, i)
	}
	manyAttrs := strings.TrimSuffix(many.String(), ",")
	longArray := "[" + strings.TrimSuffix(strings.Repeat("1,", defaultMaxValueLength+1), ",") + "]"
	tests := []struct {
		name   string
		body   string
		status int
		record int
		field  string
		msg    string
	}{
		{"too many attributes", `{"name":"a",` + limitStart + `,"attributes":{` + manyAttrs + `}}`, http.StatusRequestEntityTooLarge, 0, "attributes", "more than 128 attributes"},
		{"long string value", `{"name":"a",` + limitStart + `,"attributes":{"gen_ai.request.model":"` + long + `"}}`, http.StatusRequestEntityTooLarge, 0, "attributes.gen_ai.request.model", "longer than 4096 bytes"},
		{"long string in array", `{"name":"a",` + limitStart + `,"attributes":{"x":["a","` + long + `"]}}`, http.StatusRequestEntityTooLarge, 0, "attributes.x", "longer than 4096 bytes"},
		{"long array", `{"name":"a",` + limitStart + `,"attributes":{"x":` + longArray + `}}`, http.StatusRequestEntityTooLarge, 0, "attributes.x", "more than 4096 elements"},
		{"long key", `{"name":"a",` + limitStart + `,"attributes":{"` + long + `":1}}`, http.StatusRequestEntityTooLarge, 0, "attributes", "key longer than 4096 bytes"},
		{"long name", `{"name":"` + long + `",` + limitStart + `}`, http.StatusRequestEntityTooLarge, 0, "name", "longer than 4096 bytes"},
		{"duplicate attribute", `{"name":"a",` + limitStart + `,"attributes":{"x":1,"y":2,"x":3}}`, http.StatusBadRequest, 0, "attributes.x", "duplicate"},
		{"duplicate field", `{"name":"a",` + limitStart + `,"name":"b"}`, http.StatusBadRequest, 0, "name", "duplicate"},
		// Forged figures (docs/security.md, figures only from evidence).
		{"reserved stall_count", "{\"name\":\"ok\"," + limitStart + "}\n" + `{"name":"a",` + limitStart + `,"attributes":{"llm.stream.stall_count":3,"llm.stream.stall_ms":90000}}`, http.StatusBadRequest, 1, "attributes.llm.stream.stall", "reserved"},
		{"reserved oversized_frames", `{"name":"a",` + limitStart + `,"attributes":{"llm.stream.oversized_frames":1}}`, http.StatusBadRequest, 0, "attributes.llm.stream.oversized_frames", "reserved"},
		{"reserved future figure", `{"name":"a",` + limitStart + `,"attributes":{"llm.stream.time_to_first_answer_ms":1.5}}`, http.StatusBadRequest, 0, "attributes.llm.stream.time_to_first_answer_ms", "stall processor"},
		{"id as object", `{"name":"a",` + limitStart + `,"trace_id":{"x":1}}`, http.StatusBadRequest, 0, "trace_id", "32 hex digits"},
		{"start as array", `{"name":"a","start_time_unix_nano":[1]}`, http.StatusBadRequest, 0, "start_time_unix_nano", "unix nanoseconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td, n, err := testDecoder(3, 5).decodeBytes([]byte(tt.body))
			require.NotNil(t, err)
			assert.Equal(t, tt.status, err.Status)
			assert.Equal(t, tt.record, err.Record)
			if strings.HasSuffix(tt.field, ".llm.stream.stall") {
				assert.True(t, strings.HasPrefix(err.Field, tt.field), err.Field)
			} else {
				assert.Equal(t, tt.field, err.Field)
			}
			assert.Contains(t, err.Message, tt.msg)
			assert.Zero(t, n)
			assert.Zero(t, td.SpanCount())
		})
	}

	// Names a client legitimately sets stay accepted, and exactly the
	// limits pass.
	var atLimit strings.Builder
	for i := range defaultMaxAttrs - 1 {
		fmt.Fprintf(&atLimit, `"k%d":%d,`, i, i)
	}
	body := `{"name":"a",` + limitStart + `,"attributes":{` + atLimit.String() + `"llm.hedge.attempt":2}}`
	td, n, err := testDecoder(3, 5).decodeBytes([]byte(body))
	require.Nil(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, defaultMaxAttrs+1, td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().Len(),
		"the record's attributes and llm.stream.capture")
}

// countingReader counts the bytes the decoder pulled from the body.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func zeroArray(n int) []byte {
	b := append([]byte{'['}, bytes.Repeat([]byte("0,"), n)...)
	b[len(b)-1] = ']'
	return b
}

// TestDecodeStopsEarly (docs/security.md, the ingest listener): a 16 MB
// body of zeros, of records past max_records, or of one record with a
// million attributes is refused after reading the first part of it, not
// decoded whole.
func TestDecodeStopsEarly(t *testing.T) {
	var attrs bytes.Buffer
	attrs.WriteString(`{"name":"a",` + limitStart + `,"attributes":{`)
	for i := 0; attrs.Len() < 16<<20-64; i++ {
		fmt.Fprintf(&attrs, `"k%d":0,`, i)
	}
	attrs.WriteString(`"z":0}}`)
	records := bytes.Repeat([]byte(`{"name":"a",`+limitStart+"}\n"), 16<<20/60)
	offsets := append([]byte(`{"name":"a",`+limitStart+`,"chunk_offsets_ms":`), zeroArray(8<<20-64)...)
	offsets = append(offsets, '}')
	tests := []struct {
		name   string
		body   []byte
		status int
		msg    string
		// whole: a chunk array is read whole (it is bounded by
		// max_request_body) before its elements are counted.
		whole bool
	}{
		{"zeros array", zeroArray(8<<20 - 1), http.StatusBadRequest, "JSON object", false},
		{"records past max_records", records, http.StatusRequestEntityTooLarge, "more than 10000 records", false},
		{"a million attributes", attrs.Bytes(), http.StatusRequestEntityTooLarge, "more than 128 attributes", false},
		{"chunk offsets past max_chunks_per_record", offsets, http.StatusRequestEntityTooLarge, "more than 100000 chunk times", true},
	}
	d := testDecoder(defaultMaxRecords, defaultMaxChunks)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.LessOrEqual(t, len(tt.body), 16<<20)
			src := &countingReader{r: bytes.NewReader(tt.body)}
			td, _, err := d.decode(context.Background(), src)
			require.NotNil(t, err)
			assert.Equal(t, tt.status, err.Status)
			assert.Contains(t, err.Message, tt.msg)
			assert.Zero(t, td.SpanCount())
			if !tt.whole {
				assert.Less(t, src.n, len(tt.body)/2, "stopped before reading the rest")
			}
		})
	}
}

// TestDecodeMemoryBudget: records within every per-record limit but whose
// spans would take more than budgetFactor x max_request_body are refused.
func TestDecodeMemoryBudget(t *testing.T) {
	d := testDecoder(defaultMaxRecords, defaultMaxChunks)
	d.limits.MaxBody = 1 << 20 // budget 8 MiB: about 87,000 chunk events
	// Every chunk kept: elision would give the budget back.
	d.limits.MaxChunkEvents = defaultMaxChunks
	rec := append([]byte(`{"name":"a",`+limitStart+`,"chunk_offsets_ms":`), zeroArray(50000)...)
	rec = append(rec, "}\n"...)
	td, _, err := d.decodeBytes(bytes.Repeat(rec, 3))
	require.NotNil(t, err)
	assert.Equal(t, http.StatusRequestEntityTooLarge, err.Status)
	assert.Equal(t, 1, err.Record)
	assert.Equal(t, "chunk_offsets_ms", err.Field)
	assert.Contains(t, err.Message, "max_request_body")
	assert.Zero(t, td.SpanCount())

	_, n, err := d.decodeBytes(rec)
	require.Nil(t, err, "one record is within the budget")
	assert.Equal(t, 1, n)
}

// cancelAfter cancels a context once the decoder has read n bytes.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p[:min(len(p), 512)])
	c.n -= n
	if c.n <= 0 {
		c.cancel()
	}
	return n, err
}

// TestDecodeStopsWhenContextEnds: a client gone or a receiver shutting
// down stops decoding between values.
func TestDecodeStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	records := bytes.Repeat([]byte(`{"name":"a",`+limitStart+`,"chunk_offsets_ms":[1,2,3]}`+"\n"), 5000)
	src := &cancelAfter{r: bytes.NewReader(records), n: 64 << 10, cancel: cancel}
	td, _, err := testDecoder(defaultMaxRecords, 10).decode(ctx, src)
	require.NotNil(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, err.Status)
	assert.Contains(t, err.Message, "canceled")
	assert.Zero(t, td.SpanCount())
	assert.LessOrEqual(t, src.n, 0)
	assert.Greater(t, src.n, -200<<10, "stopped soon after the context ended")
}

// TestDecodeElidesPastMaxChunkEvents: a record of 100,000 chunk offsets
// (within every limit) becomes a span of at most max_chunk_events chunk
// events that says how many it elided; its memory is charged for the kept
// events only, so that records of this size fill a request as before.
func TestDecodeElidesPastMaxChunkEvents(t *testing.T) {
	d := testDecoder(defaultMaxRecords, defaultMaxChunks)
	var offsets bytes.Buffer
	offsets.WriteString(`{"name":"long",` + limitStart + `,"chunk_offsets_ms":[`)
	for i := range 100_000 {
		if i > 0 {
			offsets.WriteByte(',')
		}
		ms := i
		if i >= 50_000 {
			ms += 4000 // one stall of 4 s after chunk 50,000
		}
		fmt.Fprintf(&offsets, "%d", ms)
	}
	offsets.WriteString("]}\n")
	td, n, err := d.decodeBytes(bytes.Repeat(offsets.Bytes(), 10))
	require.Nil(t, err)
	require.Equal(t, 10, n)
	span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	assert.Equal(t, 4, span.Events().Len(), "the first and last chunks and both chunks of the stall")
	elided, ok := span.Attributes().Get(semconv.AttrChunkEventsElided)
	require.True(t, ok)
	assert.Equal(t, int64(100_000-4), elided.Int())
	keep, ok := span.Attributes().Get(semconv.AttrChunkEventsKeepGapsAboveMs)
	require.True(t, ok)
	assert.Equal(t, 2000.0, keep.Double())

	var c figures.Chunks
	require.NoError(t, figures.NewChunkReader(figures.DefaultChunkEventsConfig()).Read(span, &c))
	f, _ := c.Derive(int64(2*time.Second), nil)
	assert.Equal(t, 100_000, f.ChunkCount)
	assert.Equal(t, 1, f.StallCount)
	assert.Equal(t, int64(4001*time.Millisecond), f.StallTotal)
	assert.Equal(t, []figures.Stall{{AfterChunk: 50_000, At: int64(span.StartTimestamp()) + int64(49_999*time.Millisecond), Duration: int64(4001 * time.Millisecond), Gaps: 1}}, f.Stalls)
	assert.Less(t, (&ptrace.ProtoMarshaler{}).TracesSize(td)/10, 64<<10, "each span is a few KiB of OTLP, not megabytes")
}

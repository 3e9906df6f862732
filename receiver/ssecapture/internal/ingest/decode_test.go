// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
)

// The receiver's default limits (its factory.go), which the messages
// these tests expect quote.
const (
	defaultMaxBody        = 16 << 20
	defaultMaxRecords     = 10000
	defaultMaxChunks      = 100000
	defaultMaxAttrs       = 128
	defaultMaxValueLength = 4096
	defaultMaxStartAge    = 24 * time.Hour
	defaultMaxClockSkew   = 5 * time.Minute
	defaultMaxDuration    = time.Hour
)

// testReceipt is when the test decoders' requests arrive: a minute after
// the start of the examples' streams (1790000000000000000).
var testReceipt = time.Unix(1_790_000_060, 0)

func testDecoder(maxRecords, maxChunks int) *recordDecoder {
	rng := rand.New(rand.NewPCG(1, 2))
	return &recordDecoder{limits: Limits{
		MaxRecords: maxRecords, MaxChunks: maxChunks,
		MaxAttrs: defaultMaxAttrs, MaxValueLen: defaultMaxValueLength, MaxBody: defaultMaxBody,
		MaxStartAge: defaultMaxStartAge, MaxClockSkew: defaultMaxClockSkew, MaxDuration: defaultMaxDuration,
		MaxChunkEvents: figures.DefaultMaxChunkEvents, KeepGapsAbove: figures.DefaultKeepGapsAbove,
	}, newID: rng.Uint64, now: func() time.Time { return testReceipt }}
}

func (d *recordDecoder) decodeBytes(body []byte) (ptrace.Traces, int, *ingestError) {
	return d.decode(context.Background(), bytes.NewReader(body))
}

// TestDecodeGolden turns the example requests of testdata/ingest into spans
// and compares them with the expected traces (regenerate with
// UPDATE_GOLDEN=1 and review the diff).
func TestDecodeGolden(t *testing.T) {
	for _, name := range []string{"single.json", "array.json", "stream.ndjson", "elided.json"} {
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", name))
			require.NoError(t, err)
			d := testDecoder(100, 100)
			if name == "elided.json" {
				// More chunks than this: the span shows elision.
				d.limits.MaxChunkEvents, d.limits.KeepGapsAbove = 6, time.Second
			}
			td, n, ierr := d.decodeBytes(body)
			require.Nil(t, ierr)
			assert.Equal(t, td.SpanCount(), n)
			expected := filepath.Join("testdata", strings.TrimSuffix(name, filepath.Ext(name))+"_expected.yaml")
			if os.Getenv("UPDATE_GOLDEN") != "" {
				require.NoError(t, golden.WriteTraces(t, expected, td))
			}
			want, err := golden.ReadTraces(expected)
			require.NoError(t, err)
			require.NoError(t, ptracetest.CompareTraces(want, td))
		})
	}
}

// TestDecodeSpecExample checks that an ingested record yields the figures of
// docs/contract.md section 4's worked example.
func TestDecodeSpecExample(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "single.json"))
	require.NoError(t, err)
	td, _, ierr := testDecoder(1, 100).decodeBytes(body)
	require.Nil(t, ierr)
	span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	var chunks []int64
	for i := range span.Events().Len() {
		ev := span.Events().At(i)
		require.Equal(t, semconv.EventChunk, ev.Name())
		chunks = append(chunks, int64(ev.Timestamp()))
	}
	f := figures.Derive(int64(span.StartTimestamp()), figures.PrepareChunkTimes(chunks), 2e9, nil)
	assert.Equal(t, 8, f.ChunkCount)
	assert.InDelta(t, 100.0, figures.Millis(f.TTFT), 1e-9)
	assert.InDelta(t, 9000.0, figures.Millis(f.StallTotal), 1e-9)
	assert.Equal(t, 2, f.StallCount)
	assert.InDelta(t, 6000.0, figures.Millis(f.MaxStall), 1e-9)
}

func TestDecodeErrors(t *testing.T) {
	const start = `"start_time_unix_nano": 1790000000000000000`
	tests := []struct {
		name   string
		body   string
		status int
		record int
		field  string
		msg    string
	}{
		{"empty", "  ", http.StatusBadRequest, -1, "", "empty body"},
		{"not json", "{", http.StatusBadRequest, 0, "", "malformed JSON"},
		{"bad array", `[{"name":"a",` + start + `}`, http.StatusBadRequest, 1, "", "malformed JSON"},
		{"data after array", `[{"name":"a",` + start + `}] {}`, http.StatusBadRequest, 1, "", "malformed JSON"},
		{"not an object", `[{"name":"a",` + start + `}, 3]`, http.StatusBadRequest, 1, "", "JSON object"},
		{"unknown field", `{"name":"a",` + start + `,"chunk_times":[1]}`, http.StatusBadRequest, 0, "chunk_times", "unknown field"},
		{"missing name", `{` + start + `}`, http.StatusBadRequest, 0, "name", "required"},
		{"empty name", `{"name":"",` + start + `}`, http.StatusBadRequest, 0, "name", "required"},
		{"missing start", `{"name":"a"}`, http.StatusBadRequest, 0, "start_time_unix_nano", "missing"},
		{"negative start", `{"name":"a","start_time_unix_nano":-1}`, http.StatusBadRequest, 0, "start_time_unix_nano", "positive"},
		{"start as bad string", `{"name":"a","start_time_unix_nano":"17e8"}`, http.StatusBadRequest, 0, "start_time_unix_nano", "decimal string"},
		{"end before start", `{"name":"a",` + start + `,"end_time_unix_nano":1}`, http.StatusBadRequest, 0, "end_time_unix_nano", "before"},
		{"short trace id", `{"name":"a",` + start + `,"trace_id":"abc"}`, http.StatusBadRequest, 0, "trace_id", "32 hex digits"},
		{"zero span id", `{"name":"a",` + start + `,"span_id":"0000000000000000"}`, http.StatusBadRequest, 0, "span_id", "all zeros"},
		{"non-hex parent", `{"name":"a",` + start + `,"parent_span_id":"zzzzzzzzzzzzzzzz"}`, http.StatusBadRequest, 0, "parent_span_id", "hex"},
		{"numeric id", `{"name":"a",` + start + `,"span_id":12}`, http.StatusBadRequest, 0, "span_id", "string"},
		{"both chunk fields", `{"name":"a",` + start + `,"chunk_times_unix_nano":[],"chunk_offsets_ms":[]}`, http.StatusBadRequest, 0, "chunk_offsets_ms", "not both"},
		{"chunk times not array", `{"name":"a",` + start + `,"chunk_times_unix_nano":5}`, http.StatusBadRequest, 0, "chunk_times_unix_nano", "array"},
		{"zero chunk time", `{"name":"a",` + start + `,"chunk_times_unix_nano":[1, 0]}`, http.StatusBadRequest, 0, "chunk_times_unix_nano", "element 1"},
		{"quoted chunk time not digits", `{"name":"a",` + start + `,"chunk_times_unix_nano":["1790000000000000001", "17e8"]}`, http.StatusBadRequest, 0, "chunk_times_unix_nano", "element 1"},
		{"bool chunk time", `{"name":"a",` + start + `,"chunk_times_unix_nano":[true]}`, http.StatusBadRequest, 0, "chunk_times_unix_nano", "element 0"},
		{"negative offset", `{"name":"a",` + start + `,"chunk_offsets_ms":[-1]}`, http.StatusBadRequest, 0, "chunk_offsets_ms", "non-negative"},
		{"unterminated chunk array", `{"name":"a",` + start + `,"chunk_offsets_ms":[1,}`, http.StatusBadRequest, 0, "chunk_offsets_ms", "malformed JSON"},
		{"object attribute", `{"name":"a",` + start + `,"attributes":{"x":{"y":1}}}`, http.StatusBadRequest, 0, "attributes.x", "string, number, boolean"},
		{"null attribute", `{"name":"a",` + start + `,"attributes":{"x":null}}`, http.StatusBadRequest, 0, "attributes.x", "string, number, boolean"},
		{"mixed array attribute", `{"name":"a",` + start + `,"attributes":{"x":[1,"a"]}}`, http.StatusBadRequest, 0, "attributes.x", "one type"},
		{"nested array attribute", `{"name":"a",` + start + `,"attributes":{"x":[[1]]}}`, http.StatusBadRequest, 0, "attributes.x", "arrays must hold"},
		{"attributes not object", `{"name":"a",` + start + `,"attributes":[1]}`, http.StatusBadRequest, 0, "attributes", "object"},
		{"second record bad", `{"name":"a",` + start + "}\n{\"name\":\"b\"}", http.StatusBadRequest, 1, "start_time_unix_nano", "missing"},
		{"too many records", strings.Repeat(`{"name":"a",`+start+"}\n", 4), http.StatusRequestEntityTooLarge, 3, "", "more than 3 records"},
		{"too many records in array", "[" + strings.TrimSuffix(strings.Repeat(`{"name":"a",`+start+"},", 4), ",") + "]", http.StatusRequestEntityTooLarge, 3, "", "more than 3 records"},
		{"too many chunks", `{"name":"a",` + start + `,"chunk_offsets_ms":[1,2,3,4,5,6]}`, http.StatusRequestEntityTooLarge, 0, "chunk_offsets_ms", "more than 5 chunk times"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td, n, err := testDecoder(3, 5).decodeBytes([]byte(tt.body))
			require.NotNil(t, err)
			assert.Equal(t, tt.status, err.Status)
			assert.Equal(t, tt.record, err.Record)
			assert.Equal(t, tt.field, err.Field)
			assert.Contains(t, err.Message, tt.msg)
			assert.Zero(t, n)
			assert.Zero(t, td.SpanCount(), "nothing is half-ingested")
		})
	}
}

func TestDecodeEndDefaultsToLastChunk(t *testing.T) {
	td, _, err := testDecoder(1, 10).decodeBytes([]byte(`{"name":"a","start_time_unix_nano":1790000000000001000,"chunk_times_unix_nano":[1790000000000003000, 1790000000000002000, 1790000000000000500]}`))
	require.Nil(t, err)
	span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	assert.Equal(t, uint64(1790000000000003000), uint64(span.EndTimestamp()))
	assert.Equal(t, ptrace.SpanKindClient, span.Kind())
	assert.Equal(t, 3, span.Events().Len())
	assert.False(t, span.TraceID().IsEmpty(), "ids are generated when absent")
	assert.False(t, span.SpanID().IsEmpty())
	assert.True(t, span.ParentSpanID().IsEmpty())
}

func FuzzDecodeRecords(f *testing.F) {
	for _, name := range []string{"single.json", "array.json", "stream.ndjson"} {
		body, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(f, err)
		f.Add(body)
	}
	f.Add([]byte(`{"name":"a","start_time_unix_nano":"1","chunk_offsets_ms":[1e308, "1.5"]}`))
	f.Add([]byte(`[{"name":"a","start_time_unix_nano":1,"attributes":{"k":[1,2.5]}}]`))
	f.Add([]byte(`{"name":"a","start_time_unix_nano":1,"attributes":{"llm.stream.stall_ms":1,"x":"y","x":"z"}}`))
	f.Add([]byte(`{"name":"a","start_time_unix_nano":1,"attributes":{"service.name":["a",1],"k":[true,false]}}` + "\n[1]"))
	f.Add([]byte(`{"name":"a\xff","start_time_unix_nano":"1790000000000000000","chunk_offsets_ms":["1.5","1e3"]}`))
	f.Add([]byte(`{"name":"a","start_time_unix_nano":1789999999000000000,"end_time_unix_nano":1790000400000000000}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d := testDecoder(50, 50)
		d.limits.MaxAttrs, d.limits.MaxValueLen = 8, 64
		td, n, err := d.decodeBytes(body)
		if err != nil {
			require.Zero(t, td.SpanCount(), "a rejected request yields no span")
			require.Contains(t, []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge}, err.Status)
			require.GreaterOrEqual(t, err.Record, -1)
			require.NotEmpty(t, err.Message)
			return
		}
		require.Equal(t, n, td.SpanCount())
		if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
			require.True(t, json.Valid(body), "an accepted array is valid JSON")
		}
		rss := td.ResourceSpans()
		for i := range rss.Len() {
			spans := rss.At(i).ScopeSpans().At(0).Spans()
			for j := range spans.Len() {
				s := spans.At(j)
				require.NotEmpty(t, s.Name())
				require.False(t, s.TraceID().IsEmpty())
				require.False(t, s.SpanID().IsEmpty())
				start, end := s.StartTimestamp().AsTime(), s.EndTimestamp().AsTime()
				require.False(t, start.Before(testReceipt.Add(-defaultMaxStartAge)), "start within max_start_age")
				require.False(t, end.After(testReceipt.Add(defaultMaxClockSkew)), "end within max_clock_skew")
				require.False(t, end.Before(start))
				require.LessOrEqual(t, end.Sub(start), defaultMaxDuration)
				require.LessOrEqual(t, len(s.Name()), 64)
				require.True(t, utf8.ValidString(s.Name()))
				require.LessOrEqual(t, s.Attributes().Len(), 8+1)
				require.LessOrEqual(t, s.Events().Len(), 50)
				capture, _ := s.Attributes().Get(semconv.AttrCapture)
				require.Equal(t, semconv.CaptureIngest, capture.AsString(), "the receiver marks the origin")
				for k, v := range s.Attributes().All() {
					require.True(t, utf8.ValidString(k))
					require.True(t, utf8.ValidString(v.AsString()))
					if k == semconv.AttrCapture {
						continue
					}
					require.False(t, strings.HasPrefix(k, semconv.StreamNamespace), "a record never sets a figure: %s", k)
					require.NotEqual(t, "service.name", k, "service.name is moved to the resource")
					require.NotEmpty(t, k)
					if v.Type() == pcommon.ValueTypeStr {
						require.LessOrEqual(t, len(v.Str()), 64)
					}
				}
				for k := range s.Events().Len() {
					when := s.Events().At(k).Timestamp().AsTime()
					require.False(t, when.After(testReceipt.Add(defaultMaxClockSkew)), "chunk time within max_clock_skew")
					require.LessOrEqual(t, when.Sub(start), defaultMaxDuration)
				}
			}
		}
	})
}

func BenchmarkDecodeRecords(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("[")
	for i := range 100 {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`{"name":"chat gpt-4o","start_time_unix_nano":1790000000000000000,"attributes":{"gen_ai.request.model":"gpt-4o","gen_ai.provider.name":"openai"},"chunk_offsets_ms":[`)
		for j := range 100 {
			if j > 0 {
				sb.WriteString(",")
			}
			sb.WriteString("120.5")
		}
		sb.WriteString("]}")
	}
	sb.WriteString("]")
	body := []byte(sb.String())
	d := testDecoder(1000, 1000)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, _, err := d.decodeBytes(body); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(b.N*100*100)/b.Elapsed().Seconds(), "chunks/s")
}

// TestIngestDocExamples decodes the examples of docs/ingest.md, so the
// documentation cannot drift from the decoder.
func TestIngestDocExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "ingest.md"))
	require.NoError(t, err)
	text := string(doc)
	i := strings.Index(text, "<<EOF\n")
	require.Positive(t, i)
	body := text[i+len("<<EOF\n"):]
	end := strings.Index(body, "\nEOF")
	require.GreaterOrEqual(t, end, 0, "the heredoc ends")
	body = body[:end]
	// The shell fills in the start time; the test decoder's clock stands a
	// minute after this one.
	body = strings.ReplaceAll(body, "$start", "1790000000000000000")
	td, n, ierr := testDecoder(10, 100).decodeBytes([]byte(body))
	require.Nil(t, ierr)
	require.Equal(t, 1, n)
	span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	var chunks []int64
	for i := range span.Events().Len() {
		chunks = append(chunks, int64(span.Events().At(i).Timestamp()))
	}
	f := figures.Derive(int64(span.StartTimestamp()), figures.PrepareChunkTimes(chunks), 2e9, nil)
	assert.Equal(t, 2, f.StallCount)
	assert.InDelta(t, 9000.0, figures.Millis(f.StallTotal), 1e-9)
	assert.InDelta(t, 6000.0, figures.Millis(f.MaxStall), 1e-9)

	// The browser example's record shape.
	browser := `{"name":"chat gpt-4o","start_time_unix_nano":"1790000000000000000","attributes":{"gen_ai.operation.name":"chat","gen_ai.request.model":"gpt-4o","service.name":"web"},"chunk_offsets_ms":[12.300000000000182,40.5]}`
	td, _, ierr = testDecoder(10, 100).decodeBytes([]byte(browser))
	require.Nil(t, ierr)
	svc, _ := td.ResourceSpans().At(0).Resource().Attributes().Get("service.name")
	assert.Equal(t, "web", svc.Str())
}

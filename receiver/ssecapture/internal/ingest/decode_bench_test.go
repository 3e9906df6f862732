// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// benchShapes are request bodies of about 1 MB, one per shape of input.
func benchShapes() []struct {
	name   string
	body   []byte
	accept bool
	attrs  int
} {
	record := func(attrs string, offsets []byte) []byte {
		r := []byte(`{"name":"chat gpt-4o","start_time_unix_nano":1790000000000000000`)
		if attrs != "" {
			r = append(r, `,"attributes":{`+attrs+`}`...)
		}
		if offsets != nil {
			r = append(r, `,"chunk_offsets_ms":`...)
			r = append(r, offsets...)
		}
		return append(r, "}\n"...)
	}
	manyAttrs := func(n int) []byte {
		var sb strings.Builder
		for i := range n {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `"attribute.%d":%d`, i, i)
		}
		return record(sb.String(), nil)
	}
	long := `"gen_ai.request.model":"` + strings.Repeat("m", 4000) + `"`
	var realistic bytes.Buffer
	for realistic.Len() < 1<<20 {
		var offs strings.Builder
		offs.WriteByte('[')
		for j := range 100 {
			if j > 0 {
				offs.WriteByte(',')
			}
			fmt.Fprintf(&offs, "%d.5", 100+j*37)
		}
		offs.WriteByte(']')
		realistic.Write(record(`"gen_ai.request.model":"gpt-4o","gen_ai.provider.name":"openai","gen_ai.usage.output_tokens":250`, []byte(offs.String())))
	}
	return []struct {
		name   string
		body   []byte
		accept bool
		attrs  int
	}{
		{"zeros_array", zeroArray(1 << 19), false, 0},
		{"zero_offsets", bytes.Repeat(record("", zeroArray(50000)), 10), true, 0},
		{"many_records", bytes.Repeat(record("", nil), (1<<20)/66), true, 0},
		{"realistic", realistic.Bytes(), true, 0},
		{"long_strings", bytes.Repeat(record(long, nil), 250), true, 0},
		{"attributes_1k", bytes.Repeat(manyAttrs(1000), 50), true, 1000},
		{"attributes_10k", bytes.Repeat(manyAttrs(10000), 5), true, 10000},
		{"attributes_100k", manyAttrs(100000), true, 100000},
	}
}

// BenchmarkDecodeShapes reports, for each body shape, the bytes allocated
// per body byte (B/body-byte) and, for attribute-heavy bodies, the
// nanoseconds per attribute, which stay flat as the count grows.
func BenchmarkDecodeShapes(b *testing.B) {
	for _, s := range benchShapes() {
		b.Run(s.name, func(b *testing.B) {
			d := testDecoder(1<<20, 1<<20)
			d.limits.MaxAttrs = 1 << 20
			d.limits.MaxBody = 16 << 20
			b.ReportAllocs()
			b.SetBytes(int64(len(s.body)))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			n := 0
			for b.Loop() {
				_, _, err := d.decode(context.Background(), bytes.NewReader(s.body))
				if (err == nil) != s.accept {
					b.Fatalf("accept %v: %v", s.accept, err)
				}
				n++
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(n)/float64(len(s.body)), "B/body-byte")
			if s.attrs > 0 {
				attrs := len(s.body) / len(bytes.SplitAfter(s.body, []byte("\n"))[0]) * s.attrs
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n)/float64(attrs), "ns/attribute")
			}
		})
	}
}

// benchRecordsBody is BenchmarkDecodeRecords' body: 100 records of 100
// chunk offsets each.
func benchRecordsBody() []byte {
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
	return []byte(sb.String())
}

// plainRecord is an ingest record as plain Go types: what encoding/json
// decodes the body into, without any of the decoder's checks or spans.
type plainRecord struct {
	Name       string         `json:"name"`
	Start      int64          `json:"start_time_unix_nano"`
	Attributes map[string]any `json:"attributes"`
	Offsets    []float64      `json:"chunk_offsets_ms"`
}

// BenchmarkDecodeVersusJSON decodes BenchmarkDecodeRecords' body into spans
// and, in the same run, with encoding/json into plain structs, and reports
// per chunk the decoder's time, its allocations and the ratio of the two
// times (ratio-vs-json; the goal is at most 1).
func BenchmarkDecodeVersusJSON(b *testing.B) {
	body := benchRecordsBody()
	const chunks = 100 * 100
	d := testDecoder(1000, 1000)
	b.ReportAllocs()
	var jsonNs, decNs float64
	var allocs uint64
	for b.Loop() {
		t0 := time.Now()
		var recs []plainRecord
		if err := json.Unmarshal(body, &recs); err != nil || len(recs) != 100 {
			b.Fatal(err)
		}
		t1 := time.Now()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		t2 := time.Now()
		if _, _, err := d.decodeBytes(body); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		runtime.ReadMemStats(&after)
		jsonNs += float64(t1.Sub(t0).Nanoseconds())
		decNs += float64(t3.Sub(t2).Nanoseconds())
		allocs += after.Mallocs - before.Mallocs
	}
	b.ReportMetric(decNs/float64(b.N)/chunks, "ns/chunk")
	b.ReportMetric(jsonNs/float64(b.N)/chunks, "json-ns/chunk")
	b.ReportMetric(decNs/jsonNs, "ratio-vs-json")
	b.ReportMetric(float64(allocs)/float64(b.N)/chunks, "allocs/chunk")
}

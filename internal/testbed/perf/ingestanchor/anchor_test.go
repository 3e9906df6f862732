// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ingestanchor

import (
	"encoding/json"
	"strings"
	"testing"
)

// record is one ingest record's fields, as plain Go values.
type record struct {
	Name              string         `json:"name"`
	StartTimeUnixNano int64          `json:"start_time_unix_nano"`
	Attributes        map[string]any `json:"attributes"`
	ChunkOffsetsMs    []float64      `json:"chunk_offsets_ms"`
}

// body is BenchmarkDecodeRecords' body: 100 records of 100 chunk offsets.
func body() []byte {
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

func BenchmarkEncodingJSON(b *testing.B) {
	in := body()
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		var records []record
		if err := json.Unmarshal(in, &records); err != nil {
			b.Fatal(err)
		}
		if len(records) != 100 || len(records[99].ChunkOffsetsMs) != 100 {
			b.Fatalf("%d records", len(records))
		}
	}
	b.ReportMetric(float64(b.N*100*100)/b.Elapsed().Seconds(), "chunks/s")
}

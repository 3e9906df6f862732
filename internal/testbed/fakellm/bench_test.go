// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkChatStream measures what fakellm itself costs per streamed response of 100 chunks
// with no delays, so that benchmarks built on it know it is not their bottleneck.
func BenchmarkChatStream(b *testing.B) {
	srv, err := New(Config{Profile: `{"ttft_ms":0}`, Chunks: 100, DiscardBodies: true})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	hs := ts.URL
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Post(hs+"/v1/chat/completions", "application/json", strings.NewReader(chatStreamBody))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		_ = resp.Body.Close()
		srv.Reset() // keep the journal small
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/chunk")
}

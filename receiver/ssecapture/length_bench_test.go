// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// BenchmarkStreamLength proxies one stream of n small chunks, from an
// upstream on loopback through the proxy to a client, for n from 100 to
// 2,000,000, and reports per chunk: CPU (ns/chunk, wall time of the whole
// in-process path: upstream, proxy, client), bytes allocated
// (alloc-B/chunk), and the bytes the finished span still holds once
// delivered (retained-B/chunk, the heap with the span kept minus the heap
// before the stream, after a GC) with its OTLP size (otlp-B/chunk). Memory
// per chunk stays flat or falls as streams grow: past max_chunk_events the
// span holds a bounded number of events.
func BenchmarkStreamLength(b *testing.B) {
	frame := []byte("data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n")
	for _, n := range []int{100, 10_000, 100_000, 2_000_000} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			block := bytes.Repeat(frame, 512) // written 512 frames at a time
			upstream := newTestServer(b, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				for left := n; left > 0; left -= 512 {
					_, _ = w.Write(block[:min(left, 512)*len(frame)])
				}
				_, _ = w.Write([]byte("data: [DONE]\n\n"))
			}))
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			p := cfg.Proxy.GetOrInsertDefault()
			p.NetAddr.Endpoint = "127.0.0.1:0"
			p.Upstream.Endpoint = upstream
			sink := new(consumertest.TracesSink)
			tel := componenttest.NewTelemetry()
			defer func() { _ = tel.Shutdown(context.Background()) }()
			rcv := startReceiver(b, cfg, sink, componenttest.NewNopHost(), tel)
			url := "http://" + rcv.addrs["proxy"].String() + "/v1/chat/completions"
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()

			var before, after runtime.MemStats
			var retained, otlp, allocated int64
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				sink.Reset()
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&before)
				b.StartTimer()
				resp, err := client.Post(url, "application/json", strings.NewReader(`{"model":"gpt-4o","stream":true}`))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				for sink.SpanCount() == 0 {
					runtime.Gosched()
				}
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				td := sink.AllTraces()[0]
				retained += int64(after.HeapAlloc) - int64(before.HeapAlloc)
				allocated += int64(after.TotalAlloc - before.TotalAlloc)
				otlp += int64((&ptrace.ProtoMarshaler{}).TracesSize(td))
				runtime.KeepAlive(td)
				b.StartTimer()
			}
			chunks := float64(b.N) * float64(n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/chunks, "ns/chunk")
			b.ReportMetric(float64(allocated)/chunks, "alloc-B/chunk")
			b.ReportMetric(float64(retained)/chunks, "retained-B/chunk")
			b.ReportMetric(float64(otlp)/chunks, "otlp-B/chunk")
		})
	}
}

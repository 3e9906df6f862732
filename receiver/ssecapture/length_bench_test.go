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
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// BenchmarkStreamLength proxies one stream of n small chunks, from an
// upstream on loopback through the proxy to a client, for n from 100 to
// 2,000,000, and reports per chunk: CPU (ns/chunk, wall time of the whole
// in-process path: upstream, proxy, client; cpu-ns/chunk, the process's
// user and system CPU over the same streams), allocations (allocs/chunk,
// alloc-B/chunk), and the bytes the finished span still holds once
// delivered (retained-B/chunk, the heap with the span kept minus the heap
// before the stream, after a GC) with its OTLP size (otlp-B/chunk). Memory
// per chunk stays flat or falls as streams grow: past max_chunk_events the
// span holds a bounded number of events.
//
// Each length runs twice on the same stream: unguarded (the default proxy)
// and guarded (a guard block with a stall watchdog, a TTFT timeout and a
// hedge delay on an alternate, none of which fires). The guarded run also
// reports its cost against the unguarded one just measured, so that both
// figures come from the same run on the same machine: guarded/unguarded-ns
// and guarded/unguarded-cpu (ratios of ns/chunk and cpu-ns/chunk), and
// added-allocs/chunk (allocations per chunk the guard adds: 0 after
// commit, the guard's per-call ones spread over the stream's chunks).
func BenchmarkStreamLength(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000, 2_000_000} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			var plain streamCost
			b.Run("unguarded", func(b *testing.B) { plain = benchStream(b, n, false) })
			b.Run("guarded", func(b *testing.B) {
				g := benchStream(b, n, true)
				if plain.ns == 0 || plain.cpu == 0 {
					return // unguarded did not run (-bench selected guarded only)
				}
				b.ReportMetric(g.ns/plain.ns, "guarded/unguarded-ns")
				b.ReportMetric(g.cpu/plain.cpu, "guarded/unguarded-cpu")
				b.ReportMetric(g.allocs-plain.allocs, "added-allocs/chunk")
			})
		})
	}
}

// streamCost is what benchStream measured, per chunk.
type streamCost struct {
	ns, cpu, allocs float64
}

// benchFrame is the chat frame the benchmark's upstream streams.
var benchFrame = []byte("data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n")

func benchStream(b *testing.B, n int, guarded bool) streamCost {
	frame := benchFrame
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
	if guarded {
		// Every part of the guard is on, so that its whole path after
		// commit is measured: the watchdog re-arms on content, and the
		// race held an alternate and a TTFT timeout until the first chunk.
		gc := p.Guard.GetOrInsertDefault()
		gc.StallTimeout = AutoDuration(time.Minute)
		gc.TTFTTimeout = 30 * time.Second
		gc.Hedge.Delay = AutoDuration(10 * time.Second)
		alt := confighttp.NewDefaultClientConfig()
		alt.Endpoint = upstream
		gc.Hedge.Alternates = []confighttp.ClientConfig{alt}
	}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	sink := new(consumertest.TracesSink)
	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(context.Background()) }()
	rcv := startReceiver(b, cfg, sink, componenttest.NewNopHost(), tel)
	url := "http://" + rcv.addrs["proxy"].String() + "/v1/chat/completions"
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	var before, after runtime.MemStats
	var retained, otlp, allocated, mallocs int64
	var cpu time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		sink.Reset()
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&before)
		cpu0 := processCPU(b)
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
		cpu += processCPU(b) - cpu0
		runtime.GC()
		runtime.ReadMemStats(&after)
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
		td := sink.AllTraces()[0]
		retained += int64(after.HeapAlloc) - int64(before.HeapAlloc)
		allocated += int64(after.TotalAlloc - before.TotalAlloc)
		mallocs += int64(after.Mallocs - before.Mallocs)
		otlp += int64((&ptrace.ProtoMarshaler{}).TracesSize(td))
		runtime.KeepAlive(td)
		b.StartTimer()
	}
	chunks := float64(b.N) * float64(n)
	c := streamCost{
		ns:     float64(b.Elapsed().Nanoseconds()) / chunks,
		cpu:    float64(cpu.Nanoseconds()) / chunks,
		allocs: float64(mallocs) / chunks,
	}
	b.ReportMetric(c.ns, "ns/chunk")
	b.ReportMetric(c.cpu, "cpu-ns/chunk")
	b.ReportMetric(c.allocs, "allocs/chunk")
	b.ReportMetric(float64(allocated)/chunks, "alloc-B/chunk")
	b.ReportMetric(float64(retained)/chunks, "retained-B/chunk")
	b.ReportMetric(float64(otlp)/chunks, "otlp-B/chunk")
	return c
}

// processCPU is the user and system CPU time the process has used, every
// goroutine's: upstream, proxy and client run in it.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

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
// Each length runs on the same stream unguarded (the default proxy) and
// guarded (a guard block with a stall watchdog, a TTFT timeout and a hedge
// delay on an alternate, none of which fires), and then both in turn, one
// stream of each per iteration, in ratio: its ratios of guarded to unguarded of wall
// time (ratio-ns) and CPU (ratio-cpu) per chunk and the allocations per
// chunk the guard adds (added-allocs/chunk: 0 after commit, the guard's
// per-call ones spread over the stream's chunks) come from streams
// measured side by side, whatever the machine does meanwhile.
func BenchmarkStreamLength(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000, 2_000_000} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			b.Run("unguarded", func(b *testing.B) {
				rig := newStreamRig(b, n, false)
				var sum streamSample
				b.ReportAllocs()
				for b.Loop() {
					sum.add(rig.stream(b))
				}
				sum.report(b, float64(b.N)*float64(n))
			})
			b.Run("guarded", func(b *testing.B) {
				rig := newStreamRig(b, n, true)
				var sum streamSample
				b.ReportAllocs()
				for b.Loop() {
					sum.add(rig.stream(b))
				}
				sum.report(b, float64(b.N)*float64(n))
			})
			b.Run("ratio", func(b *testing.B) {
				plain, guarded := newStreamRig(b, n, false), newStreamRig(b, n, true)
				var ps, gs streamSample
				for i := 0; b.Loop(); i++ {
					// Alternate which goes first, so that neither always
					// runs on the caches and heap the other left.
					if i%2 == 0 {
						ps.add(plain.stream(b))
						gs.add(guarded.stream(b))
					} else {
						gs.add(guarded.stream(b))
						ps.add(plain.stream(b))
					}
				}
				chunks := float64(b.N) * float64(n)
				b.ReportMetric(float64(gs.wall)/float64(ps.wall), "ratio-ns")
				b.ReportMetric(float64(gs.cpu)/float64(ps.cpu), "ratio-cpu")
				b.ReportMetric(float64(gs.mallocs-ps.mallocs)/chunks, "added-allocs/chunk")
			})
		})
	}
}

// benchFrame is the chat frame the benchmark's upstream streams.
var benchFrame = []byte("data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n")

// streamRig is an upstream of n-chunk streams and a proxy in front of it.
type streamRig struct {
	sink   *consumertest.TracesSink
	url    string
	client *http.Client
}

func newStreamRig(b *testing.B, n int, guarded bool) *streamRig {
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
		gc.Hedge.Alternates = []AlternateConfig{{ClientConfig: alt}}
	}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	r := &streamRig{sink: new(consumertest.TracesSink), client: &http.Client{Transport: &http.Transport{}}}
	tel := componenttest.NewTelemetry()
	b.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	rcv := startReceiver(b, cfg, r.sink, componenttest.NewNopHost(), tel)
	r.url = "http://" + rcv.addrs["proxy"].String() + "/v1/chat/completions"
	b.Cleanup(r.client.CloseIdleConnections)
	return r
}

// streamSample is what one stream, or a sum of them, cost.
type streamSample struct {
	wall, cpu                    time.Duration
	mallocs, allocated, retained int64
	otlp                         int64
}

func (s *streamSample) add(o streamSample) {
	s.wall += o.wall
	s.cpu += o.cpu
	s.mallocs += o.mallocs
	s.allocated += o.allocated
	s.retained += o.retained
	s.otlp += o.otlp
}

func (s *streamSample) report(b *testing.B, chunks float64) {
	b.ReportMetric(float64(s.wall.Nanoseconds())/chunks, "ns/chunk")
	b.ReportMetric(float64(s.cpu.Nanoseconds())/chunks, "cpu-ns/chunk")
	b.ReportMetric(float64(s.mallocs)/chunks, "allocs/chunk")
	b.ReportMetric(float64(s.allocated)/chunks, "alloc-B/chunk")
	b.ReportMetric(float64(s.retained)/chunks, "retained-B/chunk")
	b.ReportMetric(float64(s.otlp)/chunks, "otlp-B/chunk")
}

// stream proxies one stream and measures it, the benchmark's timer
// stopped around the GCs that make its memory figures exact.
func (r *streamRig) stream(b *testing.B) streamSample {
	var before, after runtime.MemStats
	r.sink.Reset()
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&before)
	cpu0, wall0 := processCPU(b), time.Now()
	b.StartTimer()
	resp, err := r.client.Post(r.url, "application/json", strings.NewReader(`{"model":"gpt-4o","stream":true}`))
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	for r.sink.SpanCount() == 0 {
		runtime.Gosched()
	}
	b.StopTimer()
	s := streamSample{wall: time.Since(wall0), cpu: processCPU(b) - cpu0}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("status %d", resp.StatusCode)
	}
	td := r.sink.AllTraces()[0]
	s.retained = int64(after.HeapAlloc) - int64(before.HeapAlloc)
	s.allocated = int64(after.TotalAlloc - before.TotalAlloc)
	s.mallocs = int64(after.Mallocs - before.Mallocs)
	s.otlp = int64((&ptrace.ProtoMarshaler{}).TracesSize(td))
	runtime.KeepAlive(td)
	b.StartTimer()
	return s
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

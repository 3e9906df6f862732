// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgeadvisorexporter

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The advisor's capacity, for docs/deployment.md's sizing of a fleet:
//
//	go test -run '^$' -bench 'Advisor(Ingest|SeriesMemory)' -benchtime 2s ./exporter/hedgeadvisorexporter/
//
// BenchmarkAdvisorIngest: attempt spans recorded per second of CPU (user
// and system time of the process, so a core's worth) and the share of them
// the store took, each span a proxied
// stream of 50 chunks, in batches of 100 as the batch processor hands them
// on, spread over 1,000 series. BenchmarkAdvicePolling (bench_test.go) is
// the cost of an advice GET.
func BenchmarkAdvisorIngest(b *testing.B) {
	cfg := createDefaultConfig().(*Config)
	a, clock := newTestAdvisor(b, cfg)
	batches := make([]ptrace.Traces, 10)
	for i := range batches {
		batches[i] = attemptBatch(i*100, 100, 1000, 50)
	}
	var recorded, refused int64
	b.ReportAllocs()
	cpu := processCPU()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		clock.Advance(time.Millisecond)
		c := a.record(client.Info{}, batches[i%len(batches)])
		recorded += c.recorded
		refused += c.capped + c.dropped + c.untrusted + c.implausible
	}
	b.StopTimer()
	spans := float64(b.N * 100)
	b.ReportMetric(spans/(float64(processCPU()-cpu)/1e9), "spans/cpu-s")
	b.ReportMetric(float64(recorded)/spans, "recorded/span")
	if refused > recorded {
		b.Fatalf("%d attempts refused, %d recorded: the benchmark measures refusals", refused, recorded)
	}
}

// BenchmarkAdvisorSeriesMemory: the live heap per series once every series
// holds min_samples attempts, at 1,000 and 10,000 series.
func BenchmarkAdvisorSeriesMemory(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("series=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				before := liveHeap()
				cfg := createDefaultConfig().(*Config)
				cfg.MaxSeries = n
				a, _ := newTestAdvisor(b, cfg)
				b.StartTimer()
				for first := 0; first < n; first += 500 {
					for range cfg.MinSamples {
						require.NoError(b, a.consumeTraces(context.Background(), attemptBatch(first, 500, n, 20)))
					}
				}
				b.StopTimer()
				after := liveHeap()
				runtime.KeepAlive(a)
				b.ReportMetric(float64(after-before)/float64(n)/1024, "KiB/series")
				b.StartTimer()
			}
		})
	}
}

// attemptBatch is n attempt spans of series first.. (mod series), each
// with chunks content chunks 20 to 69 ms apart.
func attemptBatch(first, n, series, chunks int) ptrace.Traces {
	specs := make([]attemptSpec, n)
	for i := range specs {
		s := (first + i) % series
		gaps := make([]time.Duration, chunks-1)
		for k := range gaps {
			gaps[k] = time.Duration(20+(k*7+i)%50) * time.Millisecond
		}
		specs[i] = attemptSpec{
			provider: "openai", model: fmt.Sprintf("model-%d", s),
			ttft: time.Duration(200+(i*37+s)%800) * time.Millisecond, gaps: gaps,
			service: fmt.Sprintf("proxy-%d", i%30),
		}
	}
	return traces(specs...)
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

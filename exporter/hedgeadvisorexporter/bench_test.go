// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgeadvisorexporter

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/streamstall/streamstall/exporter/hedgeadvisorexporter/internal/metadata"
	"github.com/streamstall/streamstall/internal/advice"
)

// BenchmarkAdvicePolling: what polling the advice costs with 1,000 series
// (the default max_series), each with enough attempts to advise, when 8
// clients poll it with their own model filter at about 100 GET/s in all (the
// fake clock moves 10 ms per GET). "cached" serves from the answer computed
// at most once a second; "computed_every_get" recomputes it for every GET, as
// the endpoint did before; "whole_advice" serves the whole advice, unfiltered,
// as a guarded proxy with an advisor block fetches it. cpu-µs/GET is the process's CPU time (user and
// system) per GET, cores@100GET/s what that rate costs.
func BenchmarkAdvicePolling(b *testing.B) {
	for _, mode := range []struct {
		name    string
		compute bool
		whole   bool
	}{{"cached", false, false}, {"computed_every_get", true, false}, {"whole_advice", false, true}} {
		b.Run(mode.name, func(b *testing.B) {
			a, clock := pollingAdvisor(b)
			const clients = 8
			b.SetParallelism((clients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			var next atomic.Int64
			b.ReportAllocs()
			cpu := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				c := next.Add(1) % clients
				target := fmt.Sprintf("%s?provider=openai&model=model-%d", AdvicePath, c)
				if mode.whole {
					target = AdvicePath
				}
				req := httptest.NewRequest(http.MethodGet, target, http.NoBody)
				for pb.Next() {
					clock.Advance(10 * time.Millisecond)
					if mode.compute {
						a.answerMu.Lock()
						a.answerAt = time.Time{}
						a.answerMu.Unlock()
					}
					rec := httptest.NewRecorder()
					a.serveAdvice(rec, req)
					if rec.Code != http.StatusOK || rec.Body.Len() < 100 {
						b.Fatalf("GET: %d %q", rec.Code, rec.Body.String())
					}
				}
			})
			b.StopTimer()
			perGET := float64(processCPU()-cpu) / float64(b.N)
			b.ReportMetric(perGET/1e3, "cpu-µs/GET")
			b.ReportMetric(perGET*100/1e9, "cores@100GET/s")
		})
	}
}

// pollingAdvisor is an advisor with 1,000 series, each with min_samples
// attempts from as many clients (the share cap allows 4 % per client).
func pollingAdvisor(b *testing.B) (*advisor, *clockwork.FakeClock) {
	b.Helper()
	cfg := createDefaultConfig().(*Config)
	clock := clockwork.NewFakeClockAt(time.Unix(1_790_000_000, 0))
	a, err := newAdvisor(exportertest.NewNopSettings(metadata.Type), cfg, clock)
	require.NoError(b, err)
	now := clock.Now().UnixNano()
	a.store.Lock()
	for s := range cfg.MaxSeries {
		k := advice.Key{Provider: "openai", Model: fmt.Sprintf("model-%d", s), Dims: []string{}}
		for i := range cfg.MinSamples {
			ms := int64(200 + (i*37+s)%800)
			smp := advice.Sample{
				TTFT:   ms * int64(time.Millisecond),
				Gaps:   []int64{int64(20+i%30) * int64(time.Millisecond), int64(40+i%50) * int64(time.Millisecond)},
				Client: fmt.Sprintf("client-%d", i),
			}
			require.Equal(b, advice.Recorded, a.store.Record(now, k, smp))
		}
	}
	a.store.Unlock()
	return a, clock
}

// processCPU is the CPU time the process has used, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

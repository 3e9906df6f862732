package bench

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.uber.org/goleak"

	"github.com/streamstall/streamstall/internal/fakellm"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runCaptureChild(spec))
	}
	goleak.VerifyTestMain(m)
}

var (
	streamsFlag     = flag.Int("streams", 120, "BenchmarkChunkLatency: streams per path and round")
	concurrencyFlag = flag.Int("concurrency", 30, "BenchmarkChunkLatency: streams at a time")
	chunksFlag      = flag.Int("chunks", 50, "BenchmarkChunkLatency: content chunks per stream, 2 ms apart")
	roundsFlag      = flag.Int("rounds", 3, "BenchmarkChunkLatency: rounds over the three paths")
)

type pathStats struct {
	name    string
	url     string
	lat     []time.Duration
	cpu     time.Duration
	chunks  int
	errors  int
	proc    *proxyProcess
	skipped string
}

// BenchmarkChunkLatency streams the same scripted answers (50 content
// chunks 2 ms apart, 30 streams at a time) directly from fakellm, through
// sse_capture, through a bare Go httputil.ReverseProxy (the floor of any
// Go proxy) and through nginx, interleaved in rounds, and reports per path
// the chunk delivery latency and, against the direct path, the latency and
// CPU each proxy adds per chunk. The proxies run in processes of their own
// (sse_capture and the bare proxy are this test binary re-executed), so none
// shares a scheduler with fakellm and the clients.
func BenchmarkChunkLatency(b *testing.B) {
	streams, concurrency, chunks, rounds := *streamsFlag, *concurrencyFlag, *chunksFlag, *roundsFlag
	fake, upstream := startFakeLLM(b)
	capture, bare := startCaptureProcess(b, upstream), startBareProcess(b, upstream)
	nginx := &pathStats{name: "nginx"}
	paths := []*pathStats{{name: "direct", url: upstream}, {name: "sse_capture", url: capture.url, proc: capture},
		{name: "go_bare", url: bare.url, proc: bare}, nginx}
	if bin, ok := findNginx(); ok {
		ng := startNginx(b, bin, upstream)
		nginx.url, nginx.proc = ng.url, ng
	} else {
		nginx.skipped = "nginx is not installed (apt-get install -y nginx): no nginx comparison"
		b.Log(nginx.skipped)
	}
	gaps := make([]float64, chunks-1)
	for i := range gaps {
		gaps[i] = 2
	}
	header := scriptHeader(b, fakellm.Script{TTFTMillis: 2, GapsMillis: gaps})
	ctx := context.Background()

	for _, p := range paths { // warm up connections and code paths
		if p.skipped == "" {
			if _, _, err := runStreams(ctx, fake, p.url, concurrency, concurrency, header); err != nil {
				b.Fatalf("%s warm-up: %v", p.name, err)
			}
		}
	}
	for b.Loop() {
		for range rounds {
			for _, p := range paths {
				if p.skipped != "" {
					continue
				}
				cpu0, ext0 := selfCPU(), p.proc.cpuTime()
				lat, errs, err := runStreams(ctx, fake, p.url, streams, concurrency, header)
				p.cpu += selfCPU() - cpu0 + p.proc.cpuTime() - ext0
				p.errors += errs
				switch {
				case err != nil && p.proc == capture:
					b.Errorf("%s: %d failed streams, first: %v", p.name, errs, err)
				case err != nil:
					// A baseline's failures are counted in its row, not ours to fail on.
					b.Logf("%s: %d failed streams, first: %v", p.name, errs, err)
				}
				p.lat = append(p.lat, lat...)
				p.chunks += len(lat)
			}
		}
	}

	direct := paths[0]
	slices.Sort(direct.lat)
	d50, d99 := percentile(direct.lat, 0.50), percentile(direct.lat, 0.99)
	directCPU := direct.cpu / time.Duration(max(1, direct.chunks))
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-12s %8s %9s %9s %11s %11s %12s %7s\n", "path", "chunks", "p50 µs", "p99 µs", "+p50 µs", "+p99 µs", "+CPU µs/chk", "errors")
	for _, p := range paths {
		if p.skipped != "" {
			fmt.Fprintf(&table, "%-12s %s\n", p.name, p.skipped)
			continue
		}
		slices.Sort(p.lat)
		p50, p99 := percentile(p.lat, 0.50), percentile(p.lat, 0.99)
		cpu := p.cpu / time.Duration(max(1, p.chunks))
		fmt.Fprintf(&table, "%-12s %8d %9.1f %9.1f %11.1f %11.1f %12.2f %7d\n", p.name, p.chunks,
			micros(p50), micros(p99), micros(p50-d50), micros(p99-d99), micros(cpu-directCPU), p.errors)
		b.ReportMetric(micros(p50), "µs-p50-"+p.name)
		b.ReportMetric(micros(p99), "µs-p99-"+p.name)
		if p != direct {
			b.ReportMetric(micros(p50-d50), "µs-p50-added-"+p.name)
			b.ReportMetric(micros(p99-d99), "µs-p99-added-"+p.name)
			b.ReportMetric(micros(cpu-directCPU), "µs-cpu/chunk-added-"+p.name)
		}
	}
	_, _ = fmt.Fprint(os.Stdout, table.String())
}

// BenchmarkConcurrentStreams runs 1,000 simultaneous streams (20 chunks,
// 100 ms apart: 10,000 chunks/s) directly, through sse_capture and through
// nginx: no sse_capture stream may fail or arrive incomplete, and every
// stream must have become a span in the pipeline.
func BenchmarkConcurrentStreams(b *testing.B) {
	const streams = 1000
	fake, upstream := startFakeLLM(b)
	capture := startCaptureProcess(b, upstream)
	paths := []*pathStats{{name: "direct", url: upstream}, {name: "sse_capture", url: capture.url, proc: capture}, {name: "nginx"}}
	if bin, ok := findNginx(); ok {
		ng := startNginx(b, bin, upstream)
		paths[2].url, paths[2].proc = ng.url, ng
	} else {
		paths[2].skipped = "nginx is not installed (apt-get install -y nginx): no nginx comparison"
	}
	gaps := make([]float64, 19)
	for i := range gaps {
		gaps[i] = 100
	}
	header := scriptHeader(b, fakellm.Script{TTFTMillis: 100, GapsMillis: gaps})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	runs := 0
	for b.Loop() {
		runs++
		for _, p := range paths {
			if p.skipped != "" {
				continue
			}
			cpu0 := p.proc.cpuTime()
			start := time.Now()
			lat, errs, err := runStreams(ctx, fake, p.url, streams, streams, header)
			elapsed := time.Since(start)
			p.cpu += p.proc.cpuTime() - cpu0
			p.errors += errs
			p.lat = append(p.lat, lat...)
			p.chunks += len(lat)
			if errs > 0 {
				b.Errorf("%s: %d of %d streams failed, first: %v", p.name, errs, streams, err)
			}
			_, _ = fmt.Fprintf(os.Stdout, "%-12s %d concurrent streams: %d chunks in %v, %d errors\n", p.name, streams, len(lat), elapsed.Round(time.Millisecond), errs)
		}
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-12s %8s %10s %10s %12s %7s\n", "path", "chunks", "p50 µs", "p99 µs", "CPU µs/chk", "errors")
	for _, p := range paths {
		if p.skipped != "" {
			fmt.Fprintf(&table, "%-12s %s\n", p.name, p.skipped)
			continue
		}
		slices.Sort(p.lat)
		cpu := ""
		if p.proc != nil {
			cpu = fmt.Sprintf("%.2f", micros(p.cpu/time.Duration(max(1, p.chunks))))
		}
		fmt.Fprintf(&table, "%-12s %8d %10.1f %10.1f %12s %7d\n", p.name, p.chunks, micros(percentile(p.lat, 0.5)), micros(percentile(p.lat, 0.99)), cpu, p.errors)
		b.ReportMetric(micros(percentile(p.lat, 0.99)), "µs-p99-"+p.name)
		b.ReportMetric(float64(p.errors), "errors-"+p.name)
	}
	out := capture.stop()
	var spans int
	_, _ = fmt.Sscanf(out, "spans %d", &spans)
	fmt.Fprintf(&table, "sse_capture delivered %d spans to its pipeline for %d streams\n", spans, runs*streams)
	_, _ = fmt.Fprint(os.Stdout, table.String())
	if spans != runs*streams {
		b.Errorf("%d spans reached the pipeline, want %d", spans, runs*streams)
	}
}

// BenchmarkIngest posts batches of 100 records of 100 chunk offsets each to
// the ingest endpoint: each iteration posts 40 batches from 4 clients.
func BenchmarkIngest(b *testing.B) {
	const records, chunks, batches, clients = 100, 100, 40, 4
	_, upstream := startFakeLLM(b)
	_, ingestURL := startProxy(b, upstream, consumertest.NewNop())
	var sb strings.Builder
	sb.WriteString("[")
	for i := range records {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`{"name":"chat gpt-4o","start_time_unix_nano":"1790000000000000000","attributes":{"gen_ai.request.model":"gpt-4o","gen_ai.provider.name":"openai","service.name":"web"},"chunk_offsets_ms":[`)
		for j := range chunks {
			if j > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, "%.1f", 100+float64(j)*25.5)
		}
		sb.WriteString("]}")
	}
	sb.WriteString("]")
	body := sb.String()
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var failed atomic.Int64
	var once sync.Once
	b.SetBytes(int64(len(body) * batches))
	for b.Loop() {
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				for range batches / clients {
					resp, err := client.Post(ingestURL+"/v1/streams", "application/json", strings.NewReader(body))
					if err == nil {
						_ = resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							err = fmt.Errorf("status %d", resp.StatusCode)
						}
					}
					if err != nil {
						failed.Add(1)
						once.Do(func() { b.Error(err) })
					}
				}
			})
		}
		wg.Wait()
	}
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N*batches*records)/secs, "records/s")
	b.ReportMetric(float64(b.N*batches*records*chunks)/secs, "chunk-events/s")
	_, _ = fmt.Fprintf(os.Stdout, "\ningest: %.0f records/s, %.0f chunk events/s (%d records of %d chunks per request, %d clients), %d failed requests\n",
		float64(b.N*batches*records)/secs, float64(b.N*batches*records*chunks)/secs, records, chunks, clients, failed.Load())
}

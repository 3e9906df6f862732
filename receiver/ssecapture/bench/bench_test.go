// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
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

	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runCaptureChild(spec))
	}
	goleak.VerifyTestMain(m)
}

var (
	streamsFlag     = flag.Int("streams", 200, "BenchmarkChunkLatency: streams per path and round")
	concurrencyFlag = flag.Int("concurrency", 100, "BenchmarkChunkLatency: streams at a time")
	chunksFlag      = flag.Int("chunks", 40, "BenchmarkChunkLatency: content chunks per stream")
	gapFlag         = flag.Float64("gap", 25, "BenchmarkChunkLatency: milliseconds between content chunks")
	roundsFlag      = flag.Int("rounds", 9, "BenchmarkChunkLatency: rounds over all paths")
	pinFlag         = flag.Bool("pin", false, "BenchmarkChunkLatency: load on CPU 0, every proxy on CPU 1")
	jitterFlag      = flag.Bool("jitter", true, "BenchmarkChunkLatency: stagger first chunks and jitter gaps; false: every stream in lockstep")
	quietStealFlag  = flag.Float64("quiet-steal", 1, "BenchmarkChunkLatency: percent of CPU time the hypervisor may steal in a round still called quiet")
	variantFlag     = flag.String("variant", "", `BenchmarkChunkLatency: environment variables (for example "GOMAXPROCS=1 GOGC=200") of a second sse_capture process, a path of its own (sse_capture*) in the same rounds`)
	nginxWorkers    = flag.Int("nginx-workers", 0, "BenchmarkChunkLatency: nginx worker processes; 0: one per CPU, as Debian's nginx.conf has it (worker_processes auto)")
	controlFlag     = flag.Bool("control", true, "BenchmarkChunkLatency: run a second, identical nginx as a path of its own (nginx_again): how far two identical paths differ is what the comparison can resolve")
)

type pathStats struct {
	name     string
	url      string
	lat      []time.Duration // every round's, pooled
	rounds   []roundStats
	cpu      time.Duration // the proxy process's own
	switches int64         // the proxy process's context switches
	chunks   int
	errors   int
	proc     *proxyProcess
	skipped  string
}

// roundStats is one path's delivery latency in one round, and the share of
// CPU time the hypervisor stole while it ran.
type roundStats struct {
	p50, p99 time.Duration
	stolen   float64 // percent
}

// BenchmarkChunkLatency streams the same scripted answers directly from
// fakellm, through sse_capture, through a bare Go httputil.ReverseProxy
// (the floor of any Go proxy) and through nginx, and reports per path the
// chunk delivery latency, the latency each proxy adds per chunk and the
// proxy process's CPU per chunk.
//
// The default load is what one gateway instance sees at a busy hour: 100
// streams at a time, each a chunk every 25 ms (40 tokens/s), 4,000 chunks/s
// in all, with staggered starts and jittered gaps. -concurrency 30 -gap 2
// -chunks 50 -streams 120 -jitter=false is the stress variant (15,000
// chunks/s in lockstep bursts of 30, the two cores saturated); -pin gives
// the proxies a core of their own.
//
// On a shared two-core machine a p99 is mostly scheduling noise, and a
// difference of two p99s measured minutes apart is noise squared. So the
// paths run in rounds, in an order that rotates every round; within a round
// each proxy's p99 is compared with the direct path's of the same round,
// and the table reports the median of those per-round differences, with
// their range. On a VM the hypervisor also takes CPU time away now and
// then, unseen from inside but for the steal counter of /proc/stat: each
// path's run records the share stolen, a round in which it stayed at most
// -quiet-steal for every path is quiet, and the target is judged over all
// rounds and over the quiet ones alone. A second nginx, identical to the
// first (nginx_again, -control), is a path of its own: how its per-round
// p99 differs from nginx's shows how large a difference between two
// proxies this run can resolve at all. The proxies run in processes of
// their own (sse_capture and the bare proxy are this test binary
// re-executed), so none shares a scheduler with fakellm and the clients;
// each may use every CPU: a Go proxy one thread per CPU, nginx one worker
// per CPU, as Debian's nginx.conf runs it.
func BenchmarkChunkLatency(b *testing.B) {
	streams, concurrency, chunks, rounds := *streamsFlag, *concurrencyFlag, *chunksFlag, *roundsFlag
	placement := "load and proxies share every CPU"
	if *pinFlag {
		placement = "load on CPU 0, each proxy on CPU 1"
		if why := pinLoad(b); why != "" {
			placement = why
		}
	}
	fake, upstream := startFakeLLM(b)
	capture, bare := startCaptureProcess(b, upstream), startBareProcess(b, upstream)
	nginx := &pathStats{name: "nginx"}
	capturePath := &pathStats{name: "sse_capture", url: capture.url, proc: capture}
	paths := []*pathStats{{name: "direct", url: upstream}, capturePath, {name: "go_bare", url: bare.url, proc: bare}, nginx}
	var variant *pathStats
	if *variantFlag != "" {
		// The same receiver under other runtime settings, measured in the
		// same rounds as the rest: a setting's effect on the tail is
		// smaller than the drift of a shared VM between two runs.
		v := startCaptureProcess(b, upstream, strings.Fields(*variantFlag)...)
		variant = &pathStats{name: "sse_capture*", url: v.url, proc: v}
		paths = append(paths, variant)
		b.Logf("sse_capture* is sse_capture with %s", *variantFlag)
	}
	var control *pathStats // nginx again: the comparison's own resolution
	if bin, ok := findNginx(); ok {
		ng := startNginx(b, bin, upstream, *nginxWorkers)
		nginx.url, nginx.proc = ng.url, ng
		if *controlFlag {
			again := startNginx(b, bin, upstream, *nginxWorkers)
			control = &pathStats{name: "nginx_again", url: again.url, proc: again}
			paths = append(paths, control)
		}
	} else {
		nginx.skipped = "nginx is not installed (apt-get install -y nginx): no nginx comparison"
		b.Log(nginx.skipped)
	}
	run := paths[:0:0]
	for _, p := range paths {
		if p.skipped == "" {
			run = append(run, p)
		}
	}
	headers := latencyScripts(b, streams, chunks, *gapFlag, *jitterFlag)
	ctx := context.Background()

	for _, p := range run { // warm up connections and code paths
		_, errs, err := runStreams(ctx, fake, p.url, concurrency, concurrency, headers)
		switch {
		case err != nil && (ours(p) || p == paths[0]):
			b.Fatalf("%s warm-up: %d failed streams, first: %v", p.name, errs, err)
		case err != nil:
			// go_bare loses a stream now and then to a net/http race (see
			// runBareChild), which says nothing about sse_capture: logged,
			// as in the rounds.
			b.Logf("%s warm-up: %d failed streams, first: %v", p.name, errs, err)
		}
	}
	steal0, wall0 := stolenCPU(), time.Now()
	for b.Loop() {
		for r := range rounds {
			for k := range run {
				p := run[(r+k)%len(run)]
				cpu0, switches0, runSteal0, runWall0 := p.proc.cpuTime(), p.proc.contextSwitches(), stolenCPU(), time.Now()
				lat, errs, err := runStreams(ctx, fake, p.url, streams, concurrency, headers)
				p.cpu += p.proc.cpuTime() - cpu0
				p.switches += p.proc.contextSwitches() - switches0
				p.errors += errs
				switch {
				case err != nil && ours(p):
					b.Errorf("%s: %d failed streams, first: %v", p.name, errs, err)
				case err != nil:
					// A baseline's failures are counted in its row, not ours to fail on.
					b.Logf("%s: %d failed streams, first: %v", p.name, errs, err)
				}
				p.lat = append(p.lat, lat...)
				p.chunks += len(lat)
				slices.Sort(lat)
				p.rounds = append(p.rounds, roundStats{percentile(lat, 0.50), percentile(lat, 0.99), stolenShare(runSteal0, runWall0)})
			}
		}
	}

	// Time the hypervisor gave this machine's CPUs to others: invisible to
	// top, and the first suspect for a tail measured in milliseconds.
	steal := stolenShare(steal0, wall0)
	direct := paths[0]
	// A quiet round is one in which the hypervisor stole at most
	// -quiet-steal of the CPU time during every path's run: there, a
	// difference of tails is the proxies' own.
	quiet := make([]bool, len(direct.rounds))
	for r := range quiet {
		quiet[r] = true
		for _, p := range run {
			quiet[r] = quiet[r] && p.rounds[r].stolen <= *quietStealFlag
		}
	}
	all := func(int) bool { return true }
	isQuiet := func(r int) bool { return quiet[r] }
	added := func(p *pathStats, pick func(roundStats) time.Duration, keep func(int) bool) (med, lo, hi time.Duration) {
		med, lo, hi, _ = perRound(p, direct, pick, keep)
		return med, lo, hi
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\n%d rounds of %d streams per path, %d at a time, %d chunks %.0f ms apart (%.0f chunks/s); %s; CPU stolen by the hypervisor %.1f %%\n",
		rounds, streams, concurrency, chunks, *gapFlag, float64(concurrency)*1000 / *gapFlag, placement, steal)
	fmt.Fprintf(&table, "%-12s %8s %8s %9s %9s %20s %7s %s\n", "path", "chunks", "p50 µs", "p99 µs", "+p50 µs", "+p99 µs [range]", "CPU µs/chunk", "switches/chunk")
	for _, p := range paths {
		if p.skipped != "" {
			fmt.Fprintf(&table, "%-12s %s\n", p.name, p.skipped)
			continue
		}
		slices.Sort(p.lat)
		p50, p99 := percentile(p.lat, 0.50), percentile(p.lat, 0.99)
		b.ReportMetric(micros(p50), "µs-p50-"+p.name)
		b.ReportMetric(micros(p99), "µs-p99-"+p.name)
		if p == direct {
			fmt.Fprintf(&table, "%-12s %8d %8.0f %9.0f %9s %20s %7s\n", p.name, p.chunks, micros(p50), micros(p99), "", "", "")
			continue
		}
		a50, _, _ := added(p, p50s, all)
		a99, lo, hi := added(p, p99s, all)
		cpu := p.cpu / time.Duration(max(1, p.chunks))
		switches := float64(p.switches) / float64(max(1, p.chunks))
		fmt.Fprintf(&table, "%-12s %8d %8.0f %9.0f %9.0f %20s %7.1f %8.2f  errors %d\n", p.name, p.chunks, micros(p50), micros(p99),
			micros(a50), fmt.Sprintf("%.0f [%.0f, %.0f]", micros(a99), micros(lo), micros(hi)), micros(cpu), switches, p.errors)
		b.ReportMetric(micros(a50), "µs-p50-added-"+p.name)
		b.ReportMetric(micros(a99), "µs-p99-added-"+p.name)
		b.ReportMetric(micros(cpu), "µs-cpu/chunk-"+p.name)
		b.ReportMetric(switches, "switches/chunk-"+p.name)
	}
	for r := range direct.rounds {
		fmt.Fprintf(&table, "round %d: +p99 µs", r+1)
		for _, p := range run[1:] {
			fmt.Fprintf(&table, " %s %.0f", p.name, micros(p.rounds[r].p99-direct.rounds[r].p99))
		}
		table.WriteString("; % stolen")
		for _, p := range run {
			fmt.Fprintf(&table, " %s %.1f", p.name, p.rounds[r].stolen)
		}
		if quiet[r] {
			table.WriteString(" (quiet)")
		}
		table.WriteString("\n")
	}
	if nginx.skipped == "" {
		verdict := func(which string, keep func(int) bool) {
			a99, _, _ := added(capturePath, p99s, keep)
			n99, _, _ := added(nginx, p99s, keep)
			vs := vsNginx(capturePath, nginx, keep)
			if vs.rounds == 0 {
				fmt.Fprintf(&table, "target, %s: no such round\n", which)
				return
			}
			fmt.Fprintf(&table, "target, %s: sse_capture's added p99 %.0f µs: under 1 ms %s; at or below nginx's %.0f µs %s (at or below in %d of %d rounds)\n",
				which, micros(a99), yesNo(a99 < time.Millisecond), micros(n99), yesNo(a99 <= n99), vs.atOrBelow, vs.rounds)
			if variant != nil {
				a, _, _ := added(variant, p99s, keep)
				fmt.Fprintf(&table, "  sse_capture*'s added p99 %.0f µs; per-round p99 minus nginx's, µs: %s\n", micros(a), vsNginx(variant, nginx, keep))
			}
			if control != nil {
				// The same question asked of two identical nginx processes:
				// its answer is a coin toss, and the spread of its per-round
				// differences is what this run can tell apart.
				fmt.Fprintf(&table, "  per-round p99 minus nginx's, µs: sse_capture %s; nginx_again, identical to nginx, %s\n",
					vs, vsNginx(control, nginx, keep))
			}
		}
		verdict("all rounds", all)
		verdict(fmt.Sprintf("quiet rounds (at most %.1f %% stolen)", *quietStealFlag), isQuiet)
	}
	_, _ = fmt.Fprint(os.Stdout, table.String())
}

// latencyScripts scripts one stream per index, the same for every path.
// With jitter, a stream's first chunk comes after a uniform 2 ms to 2 ms +
// gap and each gap is uniform in [gap/2, 3gap/2]: streams that start
// together do not tick in lockstep, as the streams of independent users do
// not. Without it, every stream of a batch sends its chunks at the same
// instants: bursts of as many chunks as there are streams at a time, the
// worst case for any proxy's tail.
func latencyScripts(tb testing.TB, streams, chunks int, gap float64, jitter bool) []http.Header {
	rng := rand.New(rand.NewPCG(1, 2)) // the same workload in every run
	headers := make([]http.Header, streams)
	for i := range headers {
		s := fakellm.Script{TTFTMillis: 2, GapsMillis: make([]float64, chunks-1)}
		if jitter {
			s.TTFTMillis += rng.Float64() * gap
		}
		for k := range s.GapsMillis {
			s.GapsMillis[k] = gap
			if jitter {
				s.GapsMillis[k] = gap * (0.5 + rng.Float64())
			}
		}
		headers[i] = scriptHeader(tb, s)
	}
	return headers
}

// againstNginx is how one path's per-round p99 compared with nginx's.
type againstNginx struct {
	med, lo, hi time.Duration
	atOrBelow   int
	rounds      int
}

func (a againstNginx) String() string {
	return fmt.Sprintf("median %+.0f [%+.0f, %+.0f], at or below in %d of %d", micros(a.med), micros(a.lo), micros(a.hi), a.atOrBelow, a.rounds)
}

// vsNginx compares p's per-round p99 with nginx's over the rounds keep
// picks.
func vsNginx(p, nginx *pathStats, keep func(int) bool) againstNginx {
	var a againstNginx
	a.med, a.lo, a.hi, a.rounds = perRound(p, nginx, p99s, keep)
	for i := range nginx.rounds {
		if keep(i) && p.rounds[i].p99 <= nginx.rounds[i].p99 {
			a.atOrBelow++
		}
	}
	return a
}

// ours tells the paths through sse_capture (a failed stream fails the
// benchmark) from the baselines.
func ours(p *pathStats) bool { return strings.HasPrefix(p.name, "sse_capture") }

func p50s(s roundStats) time.Duration { return s.p50 }
func p99s(s roundStats) time.Duration { return s.p99 }

// perRound is the median and range of p's per-round figure (pick) minus
// ref's in the same round, over the n rounds keep picks.
func perRound(p, ref *pathStats, pick func(roundStats) time.Duration, keep func(int) bool) (med, lo, hi time.Duration, n int) {
	var d []time.Duration
	for i := range ref.rounds {
		if keep(i) {
			d = append(d, pick(p.rounds[i])-pick(ref.rounds[i]))
		}
	}
	if len(d) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(d)
	return median(d), d[0], d[len(d)-1], len(d)
}

func median(sorted []time.Duration) time.Duration {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
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
		ng := startNginx(b, bin, upstream, *nginxWorkers)
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
			lat, errs, err := runStreams(ctx, fake, p.url, streams, streams, []http.Header{header})
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
	// Streams that started now: ingest refuses records older than
	// max_start_age.
	start := time.Now().UnixNano()
	var sb strings.Builder
	sb.WriteString("[")
	for i := range records {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"name":"chat gpt-4o","start_time_unix_nano":"%d","attributes":`, start)
		sb.WriteString(`{"gen_ai.request.model":"gpt-4o","gen_ai.provider.name":"openai","service.name":"web"},"chunk_offsets_ms":[`)
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

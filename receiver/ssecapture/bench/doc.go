// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package bench measures what the sse_capture proxy costs a stream. It has
// no code of its own: run its benchmarks with
//
//	go test -run '^$' -bench . -benchtime 1x ./receiver/ssecapture/bench/
//
// (nginx from Debian's packages, apt-get install -y nginx; without it the
// nginx paths are skipped with a message.)
//
// BenchmarkChunkLatency streams the same scripted answers from fakellm along
// several paths: directly; through sse_capture; through a bare
// httputil.ReverseProxy that flushes every write and captures nothing
// (go_bare: the floor of any Go proxy, which tells the capture's own cost
// apart from Go's net/http); through nginx with proxy_buffering off, one
// worker per CPU as Debian's nginx.conf runs it (-nginx-workers); and through
// a second, identical nginx (nginx_again; -control=false leaves it out),
// whose distance from the first is the smallest difference between two
// proxies that the run can resolve. The default load is one gateway at a
// busy hour: 100 streams at a time, 40 chunks each, a chunk every 25 ms per
// stream, 4,000 chunks/s in all, first chunks staggered and gaps jittered
// (uniform in 12.5 to 37.5 ms, the same seeded scripts on every path).
// Each proxy runs as a process of its own (the Go proxies are the test
// binary re-executed), so none shares a scheduler with fakellm and the
// clients; the sse_capture process counts its spans and lets them go, as an
// exporter would.
//
// Latency is a client's arrival time of each content chunk minus fakellm's
// send time. The paths run in rounds (-rounds, 9) in an order that rotates
// every round; the added p50 and p99 reported are the median over rounds of
// the path's percentile minus the direct path's in the same round, with the
// range of those per-round differences. The hypervisor's steal is read from
// /proc/stat around each path's run; a round is quiet when no path lost more
// than -quiet-steal percent (1) of its CPU time, and the results are stated
// over all rounds and over the quiet ones. CPU per chunk is the proxy
// process's user+system time from /proc; switches per chunk count how often
// its threads were switched off a CPU.
//
// Other loads: -concurrency 20 -streams 60 (light), or -jitter=false
// -concurrency 30 -gap 2 -chunks 50 -streams 120 -rounds 5 (15,000 chunks/s in
// lockstep bursts). -pin puts the load on CPU 0 and every proxy on CPU 1.
//
// go_bare may lose a few streams to "unexpected EOF", a race in net/http
// between the server draining a request body and the Transport's last read
// of it (see runBareChild); sse_capture reads the request body whole before
// forwarding it and does not lose streams to it.
//
// BenchmarkConcurrentStreams runs 1,000 simultaneous streams through
// sse_capture. BenchmarkIngest posts records to the ingest endpoint.
//
// SSE_CAPTURE_BENCH_CPUPROFILE=prefix writes a CPU profile of each Go proxy
// process (prefix.sse_capture, prefix.bare) and, as it exits, its
// allocation profile (prefix.sse_capture.allocs, prefix.bare.allocs: go tool
// pprof -sample_index=alloc_space); SSE_CAPTURE_BENCH_CHILD_ENV
// sets environment variables (GOGC=..., GOMAXPROCS=...) on them alone;
// -variant "GOMAXPROCS=1" runs a second sse_capture process with those
// variables as a path of its own (sse_capture*) in the same rounds.
package bench

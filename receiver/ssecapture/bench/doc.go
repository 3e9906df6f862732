// Package bench measures what the sse_capture proxy costs a stream. It has
// no code of its own: run its benchmarks with
//
//	go test -run '^$' -bench . -benchtime 1x ./receiver/ssecapture/bench/
//
// BenchmarkChunkLatency streams the same scripted answers from fakellm
// directly, through sse_capture, through a bare Go reverse proxy and through
// nginx (proxy_buffering off), in rounds, and reports the latency each adds
// per chunk (p50, p99, paired per round) and the CPU it spends per chunk.
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

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"golang.org/x/sys/unix"

	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/sse"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
	"github.com/streamstall/streamstall/receiver/ssecapture"
)

const chatBody = `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"benchmark"}]}`

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// startFakeLLM serves fakellm on loopback.
func startFakeLLM(tb testing.TB) (*fakellm.Server, string) {
	tb.Helper()
	fake, err := fakellm.New(fakellm.Config{Seed: 1, DiscardBodies: true})
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: fake, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return fake, "http://" + ln.Addr().String()
}

// startProxy starts an sse_capture receiver with a proxy in front of
// upstream (and an ingest listener), delivering spans to next.
func startProxy(tb testing.TB, upstream string, next consumer.Traces) (proxyURL, ingestURL string) {
	tb.Helper()
	factory := ssecapture.NewFactory()
	cfg := factory.CreateDefaultConfig().(*ssecapture.Config)
	p := cfg.Proxy.GetOrInsertDefault()
	p.NetAddr.Endpoint = freeAddr(tb)
	p.Upstream.Endpoint = upstream
	p.QueueSize = 10000
	i := cfg.Ingest.GetOrInsertDefault()
	i.NetAddr.Endpoint = freeAddr(tb)
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	var r receiver.Traces
	r, err := factory.CreateTraces(context.Background(), receivertest.NewNopSettings(factory.Type()), cfg, next)
	if err != nil {
		tb.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = r.Shutdown(context.Background()) })
	return "http://" + p.NetAddr.Endpoint, "http://" + i.NetAddr.Endpoint
}

// proxyProcess is a proxy running in a process of its own, as it would in
// production: it does not share a Go scheduler with the load generator, and
// its CPU time can be read from /proc.
type proxyProcess struct {
	url    string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout bytes.Buffer
}

// stop ends the process (sse_capture: by closing its stdin) and returns
// what it printed.
func (n *proxyProcess) stop() string {
	if n.stdin != nil {
		_ = n.stdin.Close()
	} else {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
	}
	_ = n.cmd.Wait()
	return n.stdout.String()
}

const childEnv = "SSE_CAPTURE_BENCH_CHILD"

// startCaptureProcess runs sse_capture in a child process (this test binary,
// re-executed: see TestMain) in front of upstream.
func startCaptureProcess(tb testing.TB, upstream string, env ...string) *proxyProcess {
	return startChildProxy(tb, "sse_capture", upstream, env...)
}

// startBareProcess runs a bare httputil.ReverseProxy (flushing every write,
// capturing nothing) in a child process: the floor of any Go proxy, which
// tells sse_capture's own cost apart from Go's net/http.
func startBareProcess(tb testing.TB, upstream string) *proxyProcess {
	return startChildProxy(tb, "bare", upstream)
}

// startChildProxy starts a Go proxy process; env is added to its
// environment after SSE_CAPTURE_BENCH_CHILD_ENV.
func startChildProxy(tb testing.TB, kind, upstream string, env ...string) *proxyProcess {
	tb.Helper()
	addr := freeAddr(tb)
	cmd := proxyCommand(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+kind+" "+upstream+" "+addr)
	// SSE_CAPTURE_BENCH_CHILD_ENV="GOGC=400 GOMAXPROCS=1" tries runtime
	// settings on the Go proxies alone.
	cmd.Env = append(cmd.Env, strings.Fields(os.Getenv("SSE_CAPTURE_BENCH_CHILD_ENV"))...)
	cmd.Env = append(cmd.Env, env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	p := &proxyProcess{url: "http://" + addr, cmd: cmd, stdin: stdin}
	var stderr bytes.Buffer
	cmd.Stderr, cmd.Stdout = &stderr, &p.stdout
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	var once sync.Once
	tb.Cleanup(func() { once.Do(func() { p.stop() }) })
	waitListening(tb, addr, stderr.String)
	return p
}

// runCaptureChild is the child side of startChildProxy.
func runCaptureChild(spec string) int {
	kind, rest, _ := strings.Cut(spec, " ")
	upstream, addr, _ := strings.Cut(rest, " ")
	if kind == "bare" {
		defer profileChild(kind)()
		return runBareChild(upstream, addr)
	}
	factory := ssecapture.NewFactory()
	cfg := factory.CreateDefaultConfig().(*ssecapture.Config)
	p := cfg.Proxy.GetOrInsertDefault()
	p.NetAddr.Endpoint = addr
	p.Upstream.Endpoint = upstream
	// Count the spans and let them go, as an exporter would: a sink that
	// kept them all would grow the heap the garbage collector scans.
	var spans atomic.Int64
	next, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		spans.Add(int64(td.SpanCount()))
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r, err := factory.CreateTraces(context.Background(), receivertest.NewNopSettings(factory.Type()), cfg, next)
	if err == nil {
		err = r.Start(context.Background(), componenttest.NewNopHost())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer profileChild(kind)()
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	_ = r.Shutdown(context.Background())
	fmt.Printf("spans %d\n", spans.Load())
	return 0
}

// profileChild profiles a proxy process alone when
// SSE_CAPTURE_BENCH_CPUPROFILE names a file prefix: prefix.sse_capture and
// prefix.bare, and, written as the process ends, the allocations of its
// whole life in prefix.sse_capture.allocs and prefix.bare.allocs. It
// returns the function that ends the profile.
func profileChild(kind string) func() {
	prefix := os.Getenv("SSE_CAPTURE_BENCH_CPUPROFILE")
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(prefix + "." + kind)
	if err != nil {
		return func() {}
	}
	_ = pprof.StartCPUProfile(f)
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
		if h, err := os.Create(prefix + "." + kind + ".allocs"); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(h, 0)
			_ = h.Close()
		}
	}
}

// runBareChild serves a plain reverse proxy until stdin closes.
//
// It is left exactly as one would write it, and so it loses a stream now
// and then: the outbound request streams the inbound body; fakellm has the
// body and answers at once; when the proxy flushes the response headers,
// the server drains and closes the inbound body, and if the Transport's
// write loop has not yet made its last read of that body (the one that
// checks it holds no more than its Content-Length), that read fails with
// "invalid Read on closed Body", the write loop closes the upstream
// connection and the client sees "unexpected EOF". (Traced with a logging
// body and connection in this child: the close came from the write loop,
// after that error.) sse_capture reads the request body whole before it
// forwards it, which keeps it clear of this race.
func runBareChild(upstream, addr string) int {
	target, err := url.Parse(upstream)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 1000}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	_ = srv.Close()
	return 0
}

// proxyCPU, when not empty, is the CPU list (taskset -c) every proxy
// process runs on; see pinLoad.
var proxyCPU string

// proxyCommand starts a proxy process, on proxyCPU when one is set.
func proxyCommand(name string, args ...string) *exec.Cmd {
	if proxyCPU == "" {
		return exec.Command(name, args...)
	}
	return exec.Command("taskset", append([]string{"-c", proxyCPU, name}, args...)...)
}

// pinLoad gives the proxies a core of their own, as a proxy in front of an
// LLM API has in production: this process (fakellm and the clients, the
// load) is pinned to CPU 0 and every proxy started afterwards to CPU 1. On
// one CPU a Go proxy's GOMAXPROCS is 1, and nginx gets one worker, one
// thread. Without it (the default), the proxies' tails also measure how the
// kernel shares two cores between the load generator and them. It reports
// why it could not pin, and undoes the pinning at cleanup.
func pinLoad(tb testing.TB) string {
	if runtime.NumCPU() < 2 {
		return "one CPU: proxies share it with the load"
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		return "no taskset (util-linux): proxies share the CPUs with the load"
	}
	var orig unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		return "sched_getaffinity: " + err.Error()
	}
	var load unix.CPUSet
	load.Set(0)
	if err := setProcessAffinity(&load); err != nil {
		return "pinning the load: " + err.Error()
	}
	proxyCPU = "1"
	tb.Cleanup(func() {
		proxyCPU = ""
		_ = setProcessAffinity(&orig)
	})
	return ""
}

// setProcessAffinity sets the CPU mask of every thread of this process
// (sched_setaffinity is per thread; threads created later inherit it).
func setProcessAffinity(set *unix.CPUSet) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
			return err
		}
	}
	return nil
}

func waitListening(tb testing.TB, addr string, diag func() string) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("proxy on %s did not start: %v\n%s", addr, err, diag())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// findNginx looks in PATH and in the sbin directories Debian installs to.
func findNginx() (string, bool) {
	if bin, err := exec.LookPath("nginx"); err == nil {
		return bin, true
	}
	for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx"} {
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

// startNginx runs Debian's nginx with proxy_buffering off in front of
// upstream. With one worker it runs as one process (master_process off)
// that does the worker's work; with more, as a master and its workers
// (Debian's own nginx.conf asks for one per CPU: worker_processes auto).
func startNginx(tb testing.TB, bin, upstream string, workers int) *proxyProcess {
	tb.Helper()
	dir := tb.TempDir()
	addr := freeAddr(tb)
	if workers <= 0 {
		workers = runtime.NumCPU()
		if proxyCPU != "" {
			workers = 1 // -pin: the proxies have one CPU
		}
	}
	master := "off"
	if workers > 1 {
		master = "on"
	}
	conf := fmt.Sprintf(`daemon off;
master_process %[4]s;
worker_processes %[5]d;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream fakellm { server %[2]s; keepalive 256; }
  server {
    listen %[3]s;
    location / {
      proxy_pass http://fakellm;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 300s;
    }
  }
}
`, dir, strings.TrimPrefix(upstream, "http://"), addr, master, workers)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := proxyCommand(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &proxyProcess{url: "http://" + addr, cmd: cmd}
	tb.Cleanup(func() { p.stop() })
	waitListening(tb, addr, func() string {
		log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return stderr.String() + string(log)
	})
	return p
}

// cpuTime returns the user+system CPU time of the process and its
// children (nginx's workers) so far, from /proc.
func (n *proxyProcess) cpuTime() time.Duration {
	if n == nil {
		return 0
	}
	var ticks int64
	for _, pid := range n.pids() {
		if fields := procStat(pid); len(fields) > 12 {
			utime, _ := strconv.ParseInt(fields[11], 10, 64)
			stime, _ := strconv.ParseInt(fields[12], 10, 64)
			ticks += utime + stime
		}
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// procStat returns the fields of /proc/PID/stat after the command name
// (which may hold spaces): fields[0] is the state, fields[1] the parent's
// pid. nil when the process is gone.
func procStat(pid int) []string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(raw, ')')
	if err != nil || i < 0 || i+2 > len(raw) {
		return nil
	}
	return strings.Fields(string(raw[i+2:]))
}

// pids is the process and its children: nginx's master forks its workers,
// and their CPU time is the proxy's.
func (n *proxyProcess) pids() []int {
	root := n.cmd.Process.Pid
	pids := []int{root}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return pids
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == root {
			continue
		}
		if fields := procStat(pid); len(fields) > 1 && fields[1] == strconv.Itoa(root) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// contextSwitches returns how many times the process's threads have been
// switched off a CPU so far (voluntary and not), summed over its threads
// from /proc. After each, the thread waits to be put back on a CPU (woken
// from a sleep, or preempted): a chance for the scheduler to run something
// else first, which is where a proxy's tail comes from. A thread that exits
// takes its count with it; Go's threads and nginx's one rarely do.
func (n *proxyProcess) contextSwitches() int64 {
	if n == nil {
		return 0
	}
	var tasks []string
	for _, pid := range n.pids() {
		t, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
		tasks = append(tasks, t...)
	}
	var total int64
	for _, t := range tasks {
		raw, err := os.ReadFile(t)
		if err != nil {
			continue // the thread has exited
		}
		for line := range strings.Lines(string(raw)) {
			if name, value, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(name, "ctxt_switches") {
				v, _ := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
				total += v
			}
		}
	}
	return total
}

// streamResult is what a client saw of one stream: the response id (to
// find fakellm's record) and when each content chunk arrived.
type streamResult struct {
	responseID string
	arrivals   []time.Time
	err        error
}

// stolenCPU reads the steal time of all CPUs from /proc/stat (0 where
// there is none to read).
func stolenCPU() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	ticks, err := strconv.ParseInt(f[8], 10, 64)
	if err != nil {
		return 0
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// stolenShare is the percentage of all CPUs' time stolen since steal0 was
// read at wall0.
func stolenShare(steal0 time.Duration, wall0 time.Time) float64 {
	return float64(stolenCPU()-steal0) / float64(time.Since(wall0)) / float64(runtime.NumCPU()) * 100
}

// stream posts one chat request to base and records content chunk
// arrivals, stamping each read the moment it returns.
func stream(ctx context.Context, client *http.Client, base string, header http.Header) streamResult {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(chatBody))
	if err != nil {
		return streamResult{err: err}
	}
	req.Header = header.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return streamResult{err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return streamResult{err: fmt.Errorf("status %d: %s", resp.StatusCode, b)}
	}
	var res streamResult
	var at time.Time
	done := false
	p := sse.Parser{Handler: func(ev *sse.Event) {
		f, _ := llmstream.Classify(llmstream.ShapeChatCompletions, ev)
		if res.responseID == "" {
			res.responseID = f.Meta.ResponseID
		}
		switch f.Kind {
		case llmstream.KindContent:
			res.arrivals = append(res.arrivals, at)
		case llmstream.KindDone:
			done = true
		}
	}}
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		at = time.Now()
		if n > 0 {
			p.Feed(buf[:n])
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			res.err = err
			return res
		}
	}
	if !done {
		res.err = errors.New("stream ended without [DONE]")
	}
	return res
}

// runStreams runs total streams against base, concurrency at a time, stream
// i scripted by headers[i%len(headers)], and returns every chunk's delivery
// latency (client arrival minus fakellm's send time).
func runStreams(ctx context.Context, fake *fakellm.Server, base string, total, concurrency int, headers []http.Header) ([]time.Duration, int, error) {
	fake.Reset()
	tr := &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: 0, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	results := make([]streamResult, total)
	var wg sync.WaitGroup
	sem := make(chan struct{}, concurrency)
	for i := range total {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			results[i] = stream(ctx, client, base, headers[i%len(headers)])
		})
	}
	wg.Wait()
	recs, err := fake.WaitFor(ctx, total)
	if err != nil {
		return nil, 0, err
	}
	byID := make(map[string]fakellm.Request, len(recs))
	for _, r := range recs {
		byID[r.ResponseID] = r
	}
	var lat []time.Duration
	errs := 0
	var firstErr error
	for _, r := range results {
		if r.err != nil {
			errs++
			firstErr = cmpErr(firstErr, r.err)
			continue
		}
		rec, ok := byID[r.responseID]
		if !ok || len(rec.ChunkTimes) != len(r.arrivals) {
			errs++
			firstErr = cmpErr(firstErr, fmt.Errorf("stream %q: %d chunks received, %d sent", r.responseID, len(r.arrivals), len(rec.ChunkTimes)))
			continue
		}
		for k, sent := range rec.ChunkTimes {
			lat = append(lat, r.arrivals[k].Sub(sent))
		}
	}
	return lat, errs, firstErr
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func scriptHeader(tb testing.TB, s fakellm.Script) http.Header {
	b, err := json.Marshal(s)
	if err != nil {
		tb.Fatal(err)
	}
	return http.Header{fakellm.HeaderScript: {string(b)}}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Command proxynginx compares, process against process, the ocb-built
// collector's sse_capture proxy with nginx as a reverse proxy, both in front
// of the same fakellm on loopback. Every path streams the same scripted
// answers in interleaved rounds whose order rotates:
//   - direct, to fakellm;
//   - sse_capture, and a second identical one;
//   - go_bare, a bare Go httputil.ReverseProxy: Go's net/http, capturing
//     nothing;
//   - go_tcp, a byte relay on Go's network poller: no HTTP at all, the floor
//     of any proxy built on net.Conn;
//   - go_rawread, the same relay on Go's poller without the read that
//     finds nothing (one syscall.RawConn.Read per direction);
//   - go_epoll, the same relay on an epoll loop of its own, outside Go's
//     poller and scheduler, in nginx's shape;
//   - nginx, and a second identical one.
//
// The second copies are the A-vs-A controls: how far two identical processes
// differ is the resolution of every ratio. It reports, per path, the CPU
// time of the process under test per content chunk (utime+stime from
// /proc/PID/stat, its children included) and the latency each chunk gains on
// the way (client arrival minus fakellm's flush of it, minus the direct
// path's in the same round) at p50 and p99, and the ratios against nginx as
// medians over rounds with their range. proxy-vs-nginx.sh builds and
// installs what it needs.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/sse"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

func main() {
	// This program is also each Go proxy it compares, in a process of its
	// own: the variable names which and says "upstream addr".
	for env, serve := range map[string]func(upstream, addr string) error{
		bareEnv: serveBare, tcpEnv: serveTCP, rawReadEnv: serveRawRead, epollEnv: serveEpoll,
	} {
		if spec := os.Getenv(env); spec != "" {
			upstream, addr, _ := strings.Cut(spec, " ")
			log.Fatal(serve(upstream, addr))
		}
	}
	var o options
	flag.StringVar(&o.otelcol, "otelcol", "_build/otelcol-streamstall", "the ocb-built collector")
	flag.StringVar(&o.fakellm, "fakellm", "_build/fakellm", "the fakellm command")
	flag.StringVar(&o.nginx, "nginx", "", "nginx binary (empty: PATH, then /usr/sbin/nginx)")
	flag.IntVar(&o.streams, "streams", 100, "streams at a time on each path, one round")
	flag.IntVar(&o.chunks, "chunks", 120, "content chunks per stream (120: about 3 s per round, some 30 ticks of /proc CPU time per proxy)")
	flag.Float64Var(&o.gapMillis, "gap", 25, "mean gap between chunks of one stream, ms (jittered uniformly in [gap/2, 3gap/2])")
	flag.IntVar(&o.rounds, "rounds", 7, "rounds; every path runs once per round")
	flag.IntVar(&o.nginxWorkers, "nginx-workers", 0, "nginx worker processes; 0: one per CPU (Debian's worker_processes auto)")
	flag.BoolVar(&o.syscalls, "syscalls", false, "then one more round under strace -c: each proxy's system calls per chunk (Debian's strace package)")
	flag.Parse()
	if err := run(o); err != nil {
		log.Fatal(err)
	}
}

type options struct {
	otelcol, fakellm, nginx string
	streams, chunks, rounds int
	gapMillis               float64
	nginxWorkers            int
	syscalls                bool
}

// path is one way from the clients to fakellm.
type path struct {
	name string
	url  string
	proc *os.Process // nil for direct
	// Per round: CPU per chunk and the latency percentiles.
	cpu      []time.Duration
	p50, p99 []time.Duration
	chunks   int
	errors   int
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "proxynginx")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	var stops []func()
	defer func() {
		for _, stop := range slices.Backward(stops) {
			stop()
		}
	}()
	upstream, stop, err := startFakeLLM(o.fakellm)
	if err != nil {
		return err
	}
	stops = append(stops, stop)

	paths := []*path{{name: "direct", url: upstream}}
	for _, name := range []string{"sse_capture", "sse_capture_again"} {
		p, stop, err := startCollector(o.otelcol, filepath.Join(dir, name), upstream)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		stops = append(stops, stop)
		p.name = name
		paths = append(paths, p)
	}
	// This program again, as each Go proxy, in the order the rounds rotate.
	for _, self := range []struct{ name, env string }{
		{"go_bare", bareEnv}, {"go_tcp", tcpEnv}, {"go_rawread", rawReadEnv}, {"go_epoll", epollEnv},
	} {
		p, stop, err := startSelf(self.env, upstream)
		if err != nil {
			return fmt.Errorf("%s: %w", self.name, err)
		}
		stops = append(stops, stop)
		p.name = self.name
		paths = append(paths, p)
	}
	bin, err := findNginx(o.nginx)
	if err != nil {
		return err
	}
	for _, name := range []string{"nginx", "nginx_again"} {
		p, stop, err := startNginx(bin, filepath.Join(dir, name), upstream, o.nginxWorkers)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		stops = append(stops, stop)
		p.name = name
		paths = append(paths, p)
	}

	scripts := scriptHeaders(o.streams, o.chunks, o.gapMillis)
	ctx := context.Background()
	for _, p := range paths { // warm up connections and code paths
		if _, _, err := runStreams(ctx, upstream, p.url, scripts); err != nil {
			return fmt.Errorf("%s warm-up: %w", p.name, err)
		}
	}
	steal0, wall0 := stolenCPU(), time.Now()
	for r := range o.rounds {
		for k := range paths {
			p := paths[(r+k)%len(paths)]
			cpu0 := processCPU(p.proc)
			lat, errs, err := runStreams(ctx, upstream, p.url, scripts)
			cpu := processCPU(p.proc) - cpu0
			if err != nil {
				log.Printf("%s round %d: %d failed streams, first: %v", p.name, r+1, errs, err)
			}
			p.errors += errs
			p.chunks += len(lat)
			slices.Sort(lat)
			p.cpu = append(p.cpu, cpu/time.Duration(max(1, len(lat))))
			p.p50 = append(p.p50, percentile(lat, 0.50))
			p.p99 = append(p.p99, percentile(lat, 0.99))
		}
	}
	report(os.Stdout, o, paths, stolenShare(steal0, wall0))
	if o.syscalls {
		counts, err := countSyscalls(ctx, dir, upstream, paths, scripts)
		if err != nil {
			return err
		}
		reportSyscalls(os.Stdout, counts)
	}
	return nil
}

// report prints per path the medians over rounds, then the ratios.
func report(w io.Writer, o options, paths []*path, steal float64) {
	byName := map[string]*path{}
	for _, p := range paths {
		byName[p.name] = p
	}
	direct := byName["direct"]
	added := func(p *path, pick func(*path) []time.Duration) []float64 {
		out := make([]float64, len(pick(p)))
		for i := range out {
			out[i] = micros(pick(p)[i] - pick(direct)[i])
		}
		return out
	}
	p50 := func(p *path) []time.Duration { return p.p50 }
	p99 := func(p *path) []time.Duration { return p.p99 }
	_, _ = fmt.Fprintf(w, "%d rounds of %d streams per path, %d chunks each, a chunk every %.0f ms (jittered) per stream: %.0f chunks/s; %d CPUs; CPU stolen by the hypervisor %.1f %%\n",
		o.rounds, o.streams, o.chunks, o.gapMillis, float64(o.streams)*1000/o.gapMillis, runtime.NumCPU(), steal)
	_, _ = fmt.Fprintf(w, "%-18s %8s %10s %10s %14s %14s %7s\n", "path", "chunks", "p50 µs", "p99 µs", "added p50 µs", "added p99 µs", "errors")
	for _, p := range paths {
		if p == direct {
			_, _ = fmt.Fprintf(w, "%-18s %8d %10.0f %10.0f\n", p.name, p.chunks, median(durations(p.p50)), median(durations(p.p99)))
			continue
		}
		_, _ = fmt.Fprintf(w, "%-18s %8d %10.0f %10.0f %14.0f %14.0f %7d   CPU %.1f µs/chunk\n", p.name, p.chunks,
			median(durations(p.p50)), median(durations(p.p99)), median(added(p, p50)), median(added(p, p99)), p.errors, median(durations(p.cpu)))
	}
	ratio := func(label string, a, b *path, pick func(*path) []float64) {
		x, y := pick(a), pick(b)
		rs := make([]float64, len(x))
		for i := range rs {
			rs[i] = x[i] / y[i]
		}
		slices.Sort(rs)
		_, _ = fmt.Fprintf(w, "  %-42s %5.2fx  [%.2f, %.2f]\n", label, median(rs), rs[0], rs[len(rs)-1])
	}
	cpu := func(p *path) []float64 { return durations(p.cpu) }
	a50 := func(p *path) []float64 { return added(p, p50) }
	a99 := func(p *path) []float64 { return added(p, p99) }
	capture, captureAgain, nginx, nginxAgain := byName["sse_capture"], byName["sse_capture_again"], byName["nginx"], byName["nginx_again"]
	for r := range direct.p99 {
		_, _ = fmt.Fprintf(w, "round %d: direct p99 %.0f µs; added p99 µs:", r+1, micros(direct.p99[r]))
		for _, p := range paths {
			if p != direct {
				_, _ = fmt.Fprintf(w, " %s %.0f", p.name, micros(p.p99[r]-direct.p99[r]))
			}
		}
		_, _ = fmt.Fprintln(w)
	}
	_, _ = fmt.Fprintln(w, "ratios, median over rounds [range]:")
	ratio("CPU per chunk, sse_capture / nginx", capture, nginx, cpu)
	ratio("  control: sse_capture_again / sse_capture", captureAgain, capture, cpu)
	ratio("  control: nginx_again / nginx", nginxAgain, nginx, cpu)
	ratio("CPU per chunk, go_bare / nginx", byName["go_bare"], nginx, cpu)
	ratio("CPU per chunk, go_tcp / nginx", byName["go_tcp"], nginx, cpu)
	ratio("CPU per chunk, go_rawread / nginx", byName["go_rawread"], nginx, cpu)
	ratio("CPU per chunk, go_epoll / nginx", byName["go_epoll"], nginx, cpu)
	ratio("added p50, sse_capture / nginx", capture, nginx, a50)
	ratio("  control: nginx_again / nginx", nginxAgain, nginx, a50)
	ratio("added p99, sse_capture / nginx", capture, nginx, a99)
	ratio("  control: sse_capture_again / sse_capture", captureAgain, capture, a99)
	ratio("  control: nginx_again / nginx", nginxAgain, nginx, a99)
}

// scriptHeaders scripts one stream per index, the same on every path: the
// first chunk after 2 ms plus a uniform draw in [0, gap], each gap uniform in
// [gap/2, 3gap/2], so that streams that start together do not tick in lockstep.
func scriptHeaders(streams, chunks int, gap float64) []http.Header {
	rng := rand.New(rand.NewPCG(1, 2))
	headers := make([]http.Header, streams)
	for i := range headers {
		s := fakellm.Script{TTFTMillis: 2 + rng.Float64()*gap, GapsMillis: make([]float64, chunks-1)}
		for k := range s.GapsMillis {
			s.GapsMillis[k] = gap * (0.5 + rng.Float64())
		}
		b, err := json.Marshal(s)
		if err != nil {
			panic(err) // a Script always marshals
		}
		headers[i] = http.Header{fakellm.HeaderScript: {string(b)}, "Content-Type": {"application/json"}}
	}
	return headers
}

type streamResult struct {
	responseID string
	arrivals   []time.Time
	err        error
}

// runStreams runs every script at once against base and returns each
// content chunk's latency: its arrival at the client minus fakellm's flush
// of it, matched by response id.
func runStreams(ctx context.Context, upstream, base string, headers []http.Header) ([]time.Duration, int, error) {
	if err := resetFakeLLM(ctx, upstream); err != nil {
		return nil, 0, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: len(headers), DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	results := make([]streamResult, len(headers))
	var wg sync.WaitGroup
	for i, h := range headers {
		wg.Go(func() { results[i] = stream(ctx, client, base, h) })
	}
	wg.Wait()
	sent, err := fakeRequests(ctx, upstream)
	if err != nil {
		return nil, 0, err
	}
	var lat []time.Duration
	errs := 0
	var first error
	for _, r := range results {
		rec, ok := sent[r.responseID]
		switch {
		case r.err != nil:
		case !ok || len(rec.ChunkTimes) != len(r.arrivals):
			r.err = fmt.Errorf("stream %q: %d chunks received, %d sent", r.responseID, len(r.arrivals), len(rec.ChunkTimes))
		}
		if r.err != nil {
			errs++
			first = cmp(first, r.err)
			continue
		}
		for k, at := range rec.ChunkTimes {
			lat = append(lat, r.arrivals[k].Sub(at))
		}
	}
	return lat, errs, first
}

func cmp(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

const chatBody = `{"model":"perf","stream":true,"messages":[{"role":"user","content":"hi"}]}`

// stream reads one answer, stamping each read; a content chunk's arrival
// is the read that completed it.
func stream(ctx context.Context, client *http.Client, base string, header http.Header) streamResult {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(chatBody))
	if err != nil {
		return streamResult{err: err}
	}
	req.Header = header.Clone()
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

func resetFakeLLM(ctx context.Context, upstream string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, upstream+fakellm.RequestsPath, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	return nil
}

// fakeRequests is what fakellm recorded, by response id.
func fakeRequests(ctx context.Context, upstream string) (map[string]fakellm.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, upstream+fakellm.RequestsPath, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var recs []fakellm.Request
	if err := json.NewDecoder(resp.Body).Decode(&recs); err != nil {
		return nil, fmt.Errorf("fakellm's requests: %w", err)
	}
	out := make(map[string]fakellm.Request, len(recs))
	for _, r := range recs {
		out[r.ResponseID] = r
	}
	return out, nil
}

func startFakeLLM(bin string) (string, func(), error) {
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-print-addr", "-discard-bodies")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("fakellm printed no address: %w", err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return "http://" + strings.TrimSpace(line), stop, nil
}

// collectorConfig runs the proxy alone; its spans go to the debug exporter,
// which logs one line per batch and lets them go.
const collectorConfig = `receivers:
  sse_capture:
    proxy:
      endpoint: %s
      upstream:
        endpoint: %s
exporters:
  debug:
    verbosity: basic
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [sse_capture]
      exporters: [debug]
`

func startCollector(bin, dir, upstream string) (*path, func(), error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, collectorConfig, addr, upstream), 0o600); err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(bin, "--config", cfg)
	return startListening(cmd, addr)
}

// bareEnv makes this program a bare reverse proxy ("upstream addr"): the
// go_bare path.
const bareEnv = "PROXYNGINX_BARE"

// startSelf runs this program again as the proxy that env names. go_bare's
// is a plain httputil.ReverseProxy that flushes every write and captures
// nothing: the floor of a Go proxy that speaks HTTP, which tells the
// capture's cost apart from Go's net/http.
func startSelf(env, upstream string) (*path, func(), error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), env+"="+upstream+" "+addr)
	return startListening(cmd, addr)
}

// epollEnv makes this program a byte relay on an epoll loop of its own
// ("upstream addr"): the go_epoll path.
const epollEnv = "PROXYNGINX_EPOLL"

// tcpEnv makes this program a byte relay ("upstream addr"): the go_tcp path.
const tcpEnv = "PROXYNGINX_TCP"

// serveTCP is the go_tcp process: every client connection gets an upstream
// connection of its own, and each direction is one goroutine that reads what
// is there and writes it at once. It does not speak HTTP: it is the floor of
// any proxy on Go's network poller, below net/http.
func serveTCP(upstream, addr string) error { return serveRelay(upstream, addr, relayBytes) }

// serveRelay serves addr: every client connection gets an upstream
// connection of its own, and relay copies each direction on a goroutine of
// its own.
func serveRelay(upstream, addr string, relay func(dst, src net.Conn)) error {
	host, ln, err := listenFor(upstream, addr)
	if err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer func() { _ = c.Close() }()
			u, err := net.Dial("tcp", host)
			if err != nil {
				return
			}
			defer func() { _ = u.Close() }()
			go relay(u, c)
			relay(c, u)
		}()
	}
}

// listenFor listens on addr for a relay to upstream's host.
func listenFor(upstream, addr string) (host string, ln net.Listener, err error) {
	target, err := url.Parse(upstream)
	if err != nil {
		return "", nil, err
	}
	ln, err = net.Listen("tcp", addr)
	return target.Host, ln, err
}

// relayBytes copies src to dst with plain reads and writes (io.Copy would
// splice between two TCP connections, which no HTTP proxy can do).
func relayBytes(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
}

// serveBare is the go_bare process: it serves until SIGTERM ends it.
func serveBare(upstream, addr string) error {
	target, err := url.Parse(upstream)
	if err != nil {
		return err
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 1000}
	// The request body is read whole before it is forwarded, as sse_capture
	// does: streamed, a Transport's last read of it races the server's
	// drain of it at the handler's end and loses a stream now and then
	// ("unexpected EOF").
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		rp.ServeHTTP(w, r)
	})
	srv := &http.Server{Addr: addr, Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	return srv.ListenAndServe()
}

func findNginx(bin string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("nginx is not installed (proxy-vs-nginx.sh installs Debian's package)")
}

// nginxConfig is a reverse proxy that streams: no response buffering,
// keepalive connections upstream, workers as Debian's nginx.conf has them.
const nginxConfig = `daemon off;
master_process on;
worker_processes %[4]d;
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
`

func startNginx(bin, dir, upstream string, workers int) (*path, func(), error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	cfg := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, nginxConfig, dir, strings.TrimPrefix(upstream, "http://"), addr, workers), 0o600); err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(bin, "-c", cfg, "-p", dir, "-e", filepath.Join(dir, "error.log"))
	return startListening(cmd, addr)
}

// startListening starts a proxy process that is to listen on addr and
// waits until it does; its output is kept for the error of one that fails.
func startListening(cmd *exec.Cmd, addr string) (*path, func(), error) {
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	stop := func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }
	if err := waitListening(addr); err != nil {
		stop()
		return nil, nil, fmt.Errorf("%w\n%s", err, logs.String())
	}
	return &path{url: "http://" + addr, proc: cmd.Process}, stop, nil
}

// processCPU is the user and system time of a process and of its live
// children (nginx's workers), from /proc/PID/stat; zero for none.
func processCPU(p *os.Process) time.Duration {
	if p == nil {
		return 0
	}
	total, _ := statCPU(p.Pid)
	for _, pid := range childPids(p.Pid) {
		cpu, _ := statCPU(pid)
		total += cpu
	}
	return total
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// statCPU is a process's utime+stime and its parent's pid.
func statCPU(pid int) (time.Duration, int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	// The command name may hold spaces: fields count from after its ')'.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 13 {
		return 0, 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks, ppid
}

// stolenCPU is the machine's steal time so far, in ticks, from /proc/stat.
func stolenCPU() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 {
		return 0
	}
	v, _ := strconv.ParseInt(fields[8], 10, 64)
	return v
}

// stolenShare is the share of all CPUs' time stolen since steal0 at wall0, in percent.
func stolenShare(steal0 int64, wall0 time.Time) float64 {
	ticks := float64(stolenCPU() - steal0)
	return 100 * ticks / clockTicks / time.Since(wall0).Seconds() / float64(runtime.NumCPU())
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

func waitListening(addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))]
}

func durations(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = micros(d)
	}
	return out
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

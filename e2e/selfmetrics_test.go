// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// collectorWithMetrics starts otelcol-streamstall with the config files in
// order and its own metrics served on a free loopback port; it returns the
// process and the URL to scrape them from.
func collectorWithMetrics(t *testing.T, files ...string) (*harness.Process, string) {
	t.Helper()
	port := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := harness.StartCollectorFilesWithMetrics(ctx, binary(t, "STREAMSTALL_OTELCOL", "otelcol-streamstall"), t.TempDir(), port, files...)
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("---- otelcol-streamstall output ----\n%s", p.Output())
		}
	})
	return p, fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
}

// selfMetric sums the samples of the Prometheus text scrape whose metric
// name is name and whose labels include every label given (`key="value"`).
// It reports whether any sample matched, so that a counter that was never
// registered is told from one that stands at zero.
func selfMetric(scrape []byte, name string, labels ...string) (float64, bool) {
	var sum float64
	found := false
	for line := range strings.SplitSeq(string(scrape), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		metric, labelSet, _ := strings.Cut(series, "{")
		if metric != name {
			continue
		}
		matched := true
		for _, l := range labels {
			if !strings.Contains(labelSet, l) {
				matched = false
				break
			}
		}
		if !matched {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

// sseCaptureLines is what a scrape says of the sse_capture receiver, for a
// failure message.
func sseCaptureLines(scrape []byte) string {
	var b strings.Builder
	for line := range strings.SplitSeq(string(scrape), "\n") {
		if strings.Contains(line, "sse_capture") && !strings.HasPrefix(line, "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func scrapeSelf(t *testing.T, url string) []byte {
	t.Helper()
	r := send(t, http.MethodGet, url, nil, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	return r.body
}

// blackHole is an OTLP/HTTP backend that hangs: it accepts every
// connection and reads the requests it is sent, but answers none until
// released; then it answers each with an empty OTLP success. It keeps the
// body size of every request, the OTLP size of what was exported.
type blackHole struct {
	URL      string
	released chan struct{}
	mu       sync.Mutex
	sizes    []int64
}

func startBlackHole(t *testing.T) *blackHole {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := &blackHole{URL: "http://" + l.Addr().String(), released: make(chan struct{})}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { h.serve(c) })
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return h
}

func (h *blackHole) serve(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		n, err := io.Copy(io.Discard, req.Body)
		if err != nil {
			return
		}
		h.mu.Lock()
		h.sizes = append(h.sizes, n)
		h.mu.Unlock()
		<-h.released
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n"); err != nil {
			return
		}
	}
}

// release makes the black hole answer what it holds and all that follows.
func (h *blackHole) release() { close(h.released) }

// requestSizes returns the body sizes of the requests the black hole read.
func (h *blackHole) requestSizes() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int64(nil), h.sizes...)
}

// blackHoleQueueBytes is the proxy's span queue budget in the black-holed
// exporter test: 4 MiB instead of the 64 MiB default, so that some forty
// spans of 20,000-chunk streams (15 to 135 KiB of OTLP each with every gap
// kept) fill it and the test reaches the drop path within 80 streams; the
// default would take some seven hundred. With the default keep_gaps_above
// and max_chunk_events such a stream's span is about 1.2 KB, so queue_size
// (1000 spans) bounds the queue long before its bytes do.
const blackHoleQueueBytes = 4 << 20

// blackHolePeakBudget bounds the rise of the collector's peak RSS while 80
// streams of 20,000 chunks go through the proxy with the exporter hung (it
// rose by 32 to 38 MiB). Before the queue was bounded in bytes, 615 such
// spans held 2,626 MiB; now the queue holds at most blackHoleQueueBytes of
// OTLP (about three times that in memory) and the streams in flight their
// frame buffers. What proves the byte budget is the size of the spans the
// queue held, measured when the backend comes back.
const blackHolePeakBudget = 128 << 20

// The exporter hangs, so the proxy's span queue fills: past its byte budget
// spans are dropped and counted, memory stays flat, and the clients'
// streams are untouched.
func TestHostileBlackHoledExporter(t *testing.T) {
	up := startUpstream(t)
	hole := startBlackHole(t)
	proxyPort, ingestPort := freePort(t), freePort(t)
	dir := t.TempDir()
	cfg, err := harness.WriteFile(dir, "otelcol.yaml", fill(`
receivers:
  sse_capture:
    proxy:
      endpoint: 127.0.0.1:${PROXY}
      upstream:
        endpoint: ${UPSTREAM}
      queue_bytes: ${QUEUE_BYTES}
      # Spans as large as the receiver makes them: every gap is kept, up
      # to the largest chunk event bound, so that the byte budget and not
      # the span count (queue_size, 1000) is what fills.
      max_chunk_events: 16384
      keep_gaps_above: 1ns
    ingest:
      endpoint: 127.0.0.1:${INGEST}
processors:
  stall:
exporters:
  otlp_http:
    endpoint: ${HOLE}
    # Protobuf, uncompressed: the black hole reads the OTLP size of the
    # span in flight from its Content-Length, as the queue sizes spans.
    encoding: proto
    compression: none
    # Longer than the test: the one export in flight never returns.
    timeout: 10m
    retry_on_failure:
      enabled: false
    sending_queue:
      enabled: false
service:
  pipelines:
    traces:
      receivers: [sse_capture]
      processors: [stall]
      exporters: [otlp_http]
`, "PROXY", proxyPort, "INGEST", ingestPort, "UPSTREAM", up.srv.URL, "HOLE", hole.URL, "QUEUE_BYTES", blackHoleQueueBytes))
	require.NoError(t, err)
	col, metrics := collectorWithMetrics(t, cfg)
	baseline, err := col.PeakRSS()
	require.NoError(t, err)

	const streams, chunks, parallel = 80, 20_000, 4
	// Each chunk flushed on its own, so that chunks arrive apart and the
	// receiver keeps them as events.
	frame := chunkFrame("black-holed", "a")
	up.script("black-holed", func(w http.ResponseWriter, _ *http.Request) {
		for range chunks {
			flushed(w, frame)
		}
		flushed(w, "data: [DONE]\n\n")
	})
	want := chunks*len(frame) + len("data: [DONE]\n\n")
	proxy := fmt.Sprintf("127.0.0.1:%d", proxyPort)
	replies := make([]reply, streams)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range replies {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			replies[i] = proxyStream(t, proxy, "black-holed")
		})
	}
	wg.Wait()
	for i, r := range replies {
		require.Equal(t, http.StatusOK, r.status, "stream %d", i)
		require.Len(t, r.body, want, "stream %d: the client gets every byte", i)
	}

	// Every span is accounted for: dropped past the byte budget, or held by
	// the queue and the export that hangs.
	var dropped float64
	eventually(t, 30*time.Second, "every span queued or dropped", func() error {
		scrape := scrapeSelf(t, metrics)
		var ok bool
		dropped, ok = selfMetric(scrape, "otelcol_receiver_sse_capture_spans_dropped", `reason="queue_bytes"`)
		if !ok {
			return fmt.Errorf("no queue_bytes drops in the scrape (exports %v):\n%s%w", hole.requestSizes(), sseCaptureLines(scrape), errNotYet)
		}
		captured, _ := selfMetric(scrape, "otelcol_receiver_sse_capture_streams_captured")
		if captured < streams {
			return fmt.Errorf("%v of %d streams captured: %w", captured, streams, errNotYet)
		}
		return nil
	})
	eventually(t, 10*time.Second, "no request in flight", func() error {
		scrape := scrapeSelf(t, metrics)
		if n, ok := selfMetric(scrape, "otelcol_receiver_sse_capture_requests_in_flight"); !ok || n != 0 {
			return fmt.Errorf("requests in flight %v (in the scrape: %v):\n%s%w", n, ok, sseCaptureLines(scrape), errNotYet)
		}
		return nil
	})
	held := streams - int(dropped)
	t.Logf("%v of %d spans dropped past queue_bytes %d; %d held", dropped, streams, blackHoleQueueBytes, held)
	refused, _ := selfMetric(scrapeSelf(t, metrics), "otelcol_receiver_refused_spans", `receiver="sse_capture"`)
	assert.InDelta(t, dropped, refused, 0, "dropped spans are refused in the standard receiver metrics")
	require.Len(t, hole.requestSizes(), 1, "one export, hanging")
	assert.Positive(t, dropped, "the byte budget, not the span count, is what filled")

	// The backend comes back: the queue delivers what it held, the span in
	// flight included, and that fitted the byte budget. The exported spans
	// carry the stall processor's figures on top of what was queued, at
	// most figureBytes per span.
	const figureBytes = 2 << 10
	peak, err := col.PeakRSS()
	require.NoError(t, err)
	hole.release()
	eventually(t, 30*time.Second, "the held spans exported", func() error {
		if n := len(hole.requestSizes()); n < held {
			return fmt.Errorf("%d of %d: %w", n, held, errNotYet)
		}
		return nil
	})
	sizes := hole.requestSizes()
	assert.Len(t, sizes, held, "one export per held span")
	var total int64
	for _, n := range sizes {
		total += n
	}
	t.Logf("the %d held spans were %d bytes of OTLP (%d to %d each)", len(sizes), total, slices.Min(sizes), slices.Max(sizes))
	assert.LessOrEqual(t, total, int64(blackHoleQueueBytes+figureBytes*len(sizes)), "spans held past the byte budget")
	eventually(t, 30*time.Second, "the held spans accepted", func() error {
		accepted, _ := selfMetric(scrapeSelf(t, metrics), "otelcol_receiver_accepted_spans", `receiver="sse_capture"`)
		if int(accepted) != held {
			return fmt.Errorf("%v accepted, %d held: %w", accepted, held, errNotYet)
		}
		return nil
	})

	t.Logf("peak RSS %d MiB (+%d MiB)", peak>>20, (peak-baseline)>>20)
	assert.Less(t, peak-baseline, int64(blackHolePeakBudget))
}

// examples/proxy-with-metrics.yaml as it is, batch after stall, with its
// endpoints moved to loopback and its OTLP exporter pointed at the sink:
// the receiver's accepted counter equals what the pipeline delivered.
func TestProxyWithMetricsCountsAccepted(t *testing.T) {
	up := startUpstream(t)
	sink := startSink(t)
	up.script("counted", func(w http.ResponseWriter, _ *http.Request) {
		for i := range 5 {
			flushed(w, chunkFrame("counted", fmt.Sprintf("t%d", i)))
		}
		flushed(w, "data: [DONE]\n\n")
	})
	proxyPort, promPort := freePort(t), freePort(t)
	override, err := harness.WriteFile(t.TempDir(), "override.yaml", fill(`
receivers:
  sse_capture:
    proxy:
      endpoint: 127.0.0.1:${PROXY}
      upstream:
        endpoint: ${UPSTREAM}
exporters:
  otlp_http:
    endpoint: ${SINK}
    encoding: json
    compression: none
  prometheus:
    endpoint: 127.0.0.1:${PROM}
service:
  pipelines:
    traces:
      exporters: [otlp_http, stall_metrics]
`, "PROXY", proxyPort, "UPSTREAM", up.srv.URL, "SINK", sink.URL, "PROM", promPort))
	require.NoError(t, err)
	_, metrics := collectorWithMetrics(t, filepath.Join("..", "examples", "proxy-with-metrics.yaml"), override)

	const streams, parallel = 100, 10
	proxy := fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", proxyPort)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	statuses := make([]int, streams)
	for i := range statuses {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			statuses[i] = send(t, http.MethodPost, proxy, map[string]string{"Content-Type": "application/json"},
				strings.NewReader(`{"model":"counted","stream":true}`)).status
		})
	}
	wg.Wait()
	for i, s := range statuses {
		require.Equal(t, http.StatusOK, s, "stream %d", i)
	}

	eventually(t, 30*time.Second, "100 spans at the sink", func() error {
		n := 0
		for _, sp := range sink.Spans() {
			if sp.Name() == "chat counted" {
				n++
			}
		}
		if n < streams {
			return fmt.Errorf("%d spans: %w", n, errNotYet)
		}
		return nil
	})
	got := 0
	for _, sp := range sink.Spans() {
		if sp.Name() == "chat counted" {
			got++
		}
	}
	assert.Equal(t, streams, got, "the sink got one span per stream")

	scrape := scrapeSelf(t, metrics)
	accepted, ok := selfMetric(scrape, "otelcol_receiver_accepted_spans", `receiver="sse_capture"`)
	require.True(t, ok, "no otelcol_receiver_accepted_spans for sse_capture in:\n%s", scrape)
	assert.InDelta(t, streams, accepted, 0, "accepted spans")
	refused, _ := selfMetric(scrape, "otelcol_receiver_refused_spans", `receiver="sse_capture"`)
	assert.Zero(t, refused, "refused spans")
}

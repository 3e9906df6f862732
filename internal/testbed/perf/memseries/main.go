// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Command memseries measures, in one process, what a metrics pipeline holds
// per attribute set: the stall processor and the stall_metrics connector (or
// contrib's spanmetrics connector with exponential histograms, the anchor)
// in front of contrib's prometheus exporter, filled with one attribute set
// per model as e2e's TestConnectorMemoryPerSeries does, then scraped (or in
// front of otlp_http, or of prometheusremotewrite writing to a real
// Prometheus, whose HTTP API then says what it stored). It
// prints the live heap after a GC at each stage (robust: no GC headroom, no
// timing), the highest heap in use seen while it ran and the process's peak
// resident set (VmHWM, Linux), and writes heap
// profiles (go tool pprof -sample_index=inuse_space).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/connector/spanmetricsconnector"
	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusexporter"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/streamstall/streamstall/connector/stallmetricsconnector"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/processor/stallprocessor"
)

func main() {
	var o options
	flag.IntVar(&o.series, "series", 2000, "attribute sets (one model each)")
	flag.StringVar(&o.connector, "connector", "stall_metrics", "stall_metrics or spanmetrics")
	flag.StringVar(&o.temporality, "temporality", "cumulative", "the connector's temporality: cumulative or delta")
	flag.DurationVar(&o.flushInterval, "flush-interval", time.Second, "the connector's flush interval (the e2e test's 1s; the default is 15s)")
	flag.IntVar(&o.trickle, "trickle", 0, "flush intervals of steady traffic after the fill, before the scrapes")
	flag.Float64Var(&o.trickleShare, "trickle-share", 0.1, "share of the sets that record a call in each interval of -trickle")
	flag.IntVar(&o.scrapes, "scrapes", 3, "scrapes after the first complete one")
	flag.StringVar(&o.profiles, "profiles", "", "directory for heap profiles (none when empty)")
	flag.StringVar(&o.exporter, "exporter", "prometheus", "prometheus (scraped), otlphttp (to a sink that reads and drops each request, as a Prometheus with OTLP ingest would) or prometheusremotewrite (to -prometheus-url)")
	flag.StringVar(&o.prometheusURL, "prometheus-url", "", "base URL of the Prometheus that -exporter prometheusremotewrite writes to (its /api/v1/write, started with --web.enable-remote-write-receiver) and then queries; a fresh one for each run")
	flag.BoolVar(&o.dump, "dump", false, "print the last scrape in the text format")
	flag.Parse()
	if err := run(o); err != nil {
		log.Fatal(err)
	}
}

type options struct {
	series      int
	connector   string
	temporality string
	scrapes     int
	profiles    string
	dump        bool
	exporter    string
	// prometheusURL is where prometheusremotewrite writes and what is
	// queried afterwards.
	prometheusURL string
	// flushInterval is the connector's; trickle intervals of steady
	// traffic, trickleShare of the sets recording a call in each.
	flushInterval time.Duration
	trickle       int
	trickleShare  float64
}

func run(o options) error {
	ctx := context.Background()
	host := componenttest.NewNopHost()
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	var exp exporter.Metrics
	switch o.exporter {
	case "prometheus":
		exp, err = newPrometheusExporter(ctx, addr)
	case "otlphttp":
		exp, err = newOTLPExporter(ctx, addr)
	case "prometheusremotewrite":
		exp, err = newRemoteWriteExporter(ctx, o.prometheusURL)
	default:
		err = fmt.Errorf("unknown exporter %q", o.exporter)
	}
	if err != nil {
		return err
	}
	var next consumer.Metrics = exp
	var kinds exportedKinds
	if o.exporter == "prometheusremotewrite" {
		if next, err = kinds.wrap(exp); err != nil {
			return err
		}
	}
	conn, err := newConnector(ctx, o, next)
	if err != nil {
		return err
	}
	proc, err := newStallProcessor(ctx, conn)
	if err != nil {
		return err
	}
	for _, c := range []component.Component{exp, conn, proc} {
		if err := c.Start(ctx, host); err != nil {
			return err
		}
	}
	defer func() {
		for _, c := range []component.Component{proc, conn, exp} {
			_ = c.Shutdown(ctx)
		}
	}()

	var peak atomic.Uint64
	stop := sampleHeapInUse(&peak)
	defer stop()

	baseline := liveHeap()
	residentBaseline := peakResident()
	perResident := func() string {
		if residentBaseline == 0 {
			return "unknown (no /proc/self/status)"
		}
		return fmt.Sprintf("%.1f", (float64(peakResident())-float64(residentBaseline))/float64(o.series)/1000)
	}
	per := func(b uint64) float64 { return (float64(b) - float64(baseline)) / float64(o.series) / 1000 }
	start := time.Now().Add(-time.Minute)
	const perRequest = 500
	for first := 0; first < o.series; first += perRequest {
		if err := proc.ConsumeTraces(ctx, spans(start, first, min(first+perRequest, o.series), nil)); err != nil {
			return err
		}
	}
	fmt.Printf("%s temporality=%s exporter=%s flush_interval=%v series=%d, KB per set above the started pipeline:\n",
		o.connector, o.temporality, o.exporter, o.flushInterval, o.series)
	fmt.Printf("  live heap after a GC, spans recorded (a flush may have begun): %.1f\n", per(liveHeap()))
	time.Sleep(2*o.flushInterval + o.flushInterval/2) // two flushes: every series is in the exporter
	lo, hi := liveRange(o.flushInterval)
	fmt.Printf("  live heap after a GC, flushed: %.1f to %.1f (five GCs over one flush interval)\n", per(lo), per(hi))
	if err := o.writeProfile("flushed"); err != nil {
		return err
	}

	if o.trickle > 0 {
		// A steady state: every flush interval, a share of the sets
		// records one more call, the rest stay idle.
		rng := rand.New(rand.NewPCG(3, 4))
		for range o.trickle {
			var models []int
			for i := range o.series {
				if rng.Float64() < o.trickleShare {
					models = append(models, i)
				}
			}
			for first := 0; first < len(models); first += perRequest {
				if err := proc.ConsumeTraces(ctx, spans(start, 0, 0, models[first:min(first+perRequest, len(models))])); err != nil {
					return err
				}
			}
			time.Sleep(o.flushInterval)
		}
		time.Sleep(o.flushInterval / 2)
		lo, hi := liveRange(o.flushInterval)
		fmt.Printf("  live heap after a GC, %d intervals later, %.0f %% of the sets recording a call in each: %.1f to %.1f\n",
			o.trickle, 100*o.trickleShare, per(lo), per(hi))
		if err := o.writeProfile("trickle"); err != nil {
			return err
		}
	}
	fmt.Printf("  highest heap in use so far: %.1f\n", per(peak.Load()))
	fmt.Printf("  peak resident set so far: %s\n", perResident())

	if o.exporter == "otlphttp" {
		fmt.Printf("  %d OTLP requests of %d bytes on average\n", sink.requests.Load(), sink.bytes.Load()/max(1, sink.requests.Load()))
		return nil
	}
	if o.exporter == "prometheusremotewrite" {
		return checkRemoteWrite(ctx, o.prometheusURL, o, &kinds)
	}
	url := "http://" + addr + "/metrics"
	deadline := time.Now().Add(2 * time.Minute)
	for {
		n, err := countSeries(url, calls(o.connector))
		if err != nil {
			return err
		}
		if n >= o.series {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d series in the scrape", n, o.series)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var size int64
	for range o.scrapes {
		if size, err = scrape(url, io.Discard); err != nil {
			return err
		}
	}
	lo, hi = liveRange(o.flushInterval)
	fmt.Printf("  live heap after a GC, after %d more scrapes: %.1f to %.1f\n", o.scrapes, per(lo), per(hi))
	fmt.Printf("  highest heap in use, scrapes included: %.1f\n", per(peak.Load()))
	fmt.Printf("  peak resident set, scrapes included: %s\n", perResident())
	fmt.Printf("  one scrape: %d bytes (%.0f per set)\n", size, float64(size)/float64(o.series))
	if err := o.writeProfile("scraped"); err != nil {
		return err
	}
	if o.dump {
		req, err := http.NewRequest(http.MethodGet, url, http.NoBody)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req) // the text format: no Accept header
		if err != nil {
			return err
		}
		_, _ = io.Copy(os.Stdout, resp.Body)
		_ = resp.Body.Close()
	}
	return nil
}

// liveRange is the lowest and highest live heap of five GCs spread over one
// flush interval: the lowest is between flushes, the highest may catch a
// flush building its batch while the exporter still holds the previous one.
func liveRange(interval time.Duration) (lo, hi uint64) {
	for i := range 5 {
		if i > 0 {
			time.Sleep(interval / 5)
		}
		v := liveHeap()
		if i == 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	return lo, hi
}

// liveHeap is the heap still referenced after a full GC.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// peakResident is the process's peak resident set (VmHWM) in bytes, 0 where
// /proc/self/status does not say: what a memory limit must cover, the GC's
// headroom and the runtime's own memory included.
func peakResident() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// sampleHeapInUse keeps the highest heap in use (spans holding objects,
// live or not yet collected) seen every few milliseconds: the heap's share
// of a resident-set peak, GC headroom included. runtime/metrics reads it
// without stopping the world, as runtime.ReadMemStats would.
func sampleHeapInUse(peak *atomic.Uint64) (stop func()) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				metrics.Read(samples)
				if inUse := samples[0].Value.Uint64() + samples[1].Value.Uint64(); inUse > peak.Load() {
					peak.Store(inUse)
				}
			}
		}
	}()
	return func() { close(done) }
}

func (o options) writeProfile(stage string) error {
	if o.profiles == "" {
		return nil
	}
	if err := os.MkdirAll(o.profiles, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(o.profiles, fmt.Sprintf("%s-%s-%s-%d-%s.pprof", o.connector, o.exporter, o.temporality, o.series, stage)))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	runtime.GC()
	return pprof.Lookup("heap").WriteTo(f, 0)
}

// spans are the e2e test's: one winning call per model (models, or
// first to end when nil), with a stall and token usage.
func spans(start time.Time, first, end int, models []int) ptrace.Traces {
	if models == nil {
		for i := first; i < end; i++ {
			models = append(models, i)
		}
	}
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(semconv.AttrServiceName, "e2e-series")
	ss := rs.ScopeSpans().AppendEmpty()
	for _, i := range models {
		sp := ss.Spans().AppendEmpty()
		sp.SetName("chat")
		sp.SetKind(ptrace.SpanKindClient)
		sp.SetTraceID(pcommon.TraceID([16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}))
		sp.SetSpanID(pcommon.SpanID([8]byte{1, 2, 3, 4, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}))
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		for _, off := range []int64{100, 150, 200, 3200, 3250} {
			ev := sp.Events().AppendEmpty()
			ev.SetName(semconv.EventChunk)
			ev.SetTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Duration(off) * time.Millisecond)))
		}
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(3260 * time.Millisecond)))
		sp.Attributes().PutStr(semconv.AttrOperationName, "chat")
		sp.Attributes().PutStr(semconv.AttrSystem, "openai")
		sp.Attributes().PutStr(semconv.AttrRequestModel, fmt.Sprintf("model-%06d", i))
		sp.Attributes().PutInt(semconv.AttrUsageOutputTokens, 5)
		sp.Attributes().PutInt(semconv.AttrUsageInputTokens, 12)
	}
	return td
}

func newPrometheusExporter(ctx context.Context, addr string) (exporter.Metrics, error) {
	f := prometheusexporter.NewFactory()
	cfg := f.CreateDefaultConfig()
	if err := confmap.NewFromStringMap(map[string]any{"endpoint": addr}).Unmarshal(cfg); err != nil {
		return nil, err
	}
	return f.CreateMetrics(ctx, exportertest.NewNopSettings(f.Type()), cfg)
}

// otlpSink reads each OTLP request whole and drops it.
type otlpSink struct{ requests, bytes atomic.Int64 }

var sink otlpSink

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	s.requests.Add(1)
	s.bytes.Add(n)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

func newOTLPExporter(ctx context.Context, addr string) (exporter.Metrics, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: &sink, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	f := otlphttpexporter.NewFactory()
	cfg := f.CreateDefaultConfig()
	if err := confmap.NewFromStringMap(map[string]any{"endpoint": "http://" + addr}).Unmarshal(cfg); err != nil {
		return nil, err
	}
	return f.CreateMetrics(ctx, exportertest.NewNopSettings(f.Type()), cfg)
}

func newConnector(ctx context.Context, o options, next consumer.Metrics) (connector.Traces, error) {
	var f connector.Factory
	var conf map[string]any
	switch o.connector {
	case "stall_metrics":
		f = stallmetricsconnector.NewFactory()
		conf = map[string]any{"flush_interval": o.flushInterval, "max_series": max(o.series, 1), "temporality": o.temporality}
	case "spanmetrics":
		// Exponential histograms, the model as a dimension (one set per
		// model, as for stall_metrics), the same flush interval.
		f = spanmetricsconnector.NewFactory()
		temporality := "AGGREGATION_TEMPORALITY_CUMULATIVE"
		if o.temporality == "delta" {
			temporality = "AGGREGATION_TEMPORALITY_DELTA"
		}
		conf = map[string]any{
			"metrics_flush_interval":  o.flushInterval,
			"aggregation_temporality": temporality,
			"histogram":               map[string]any{"exponential": map[string]any{"max_size": 160}},
			"dimensions":              []any{map[string]any{"name": semconv.AttrRequestModel}},
		}
	default:
		return nil, fmt.Errorf("unknown connector %q", o.connector)
	}
	cfg := f.CreateDefaultConfig()
	if err := confmap.NewFromStringMap(conf).Unmarshal(cfg); err != nil {
		return nil, err
	}
	if v, ok := cfg.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return nil, err
		}
	}
	set := connectortest.NewNopSettings(f.Type())
	set.Resource.Attributes().PutStr("service.instance.id", "memseries")
	return f.CreateTracesToMetrics(ctx, set, cfg, next)
}

func newStallProcessor(ctx context.Context, next consumer.Traces) (processor.Traces, error) {
	f := stallprocessor.NewFactory()
	return f.CreateTraces(ctx, processortest.NewNopSettings(f.Type()), f.CreateDefaultConfig(), next)
}

// calls is the family that holds one series per set.
func calls(connectorName string) string {
	if connectorName == "spanmetrics" {
		return "traces_span_metrics_calls_total"
	}
	return "llm_stream_calls_total"
}

// countSeries scrapes url in the protobuf format and counts the series of
// one family, decoding one family at a time.
func countSeries(url, family string) (int, error) {
	resp, err := get(url)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	n := 0
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return 0, err
		}
		if strings.EqualFold(mf.GetName(), family) {
			n += len(mf.GetMetric())
		}
	}
}

// scrape reads the whole exposition in the protobuf format into w, as
// Prometheus does for native histograms.
func scrape(url string, w io.Writer) (int64, error) {
	resp, err := get(url)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	return io.Copy(w, resp.Body)
}

func get(url string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("scrape: %s", resp.Status)
	}
	return resp, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

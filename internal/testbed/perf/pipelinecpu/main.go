// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Command pipelinecpu measures what the stall processor and the
// stall_metrics connector cost the ocb-built collector per span: four
// collectors take the same OTLP spans (each with 200 chunk events) in
// interleaved rounds whose order rotates: one that only receives them, a
// second identical one (the A-vs-A control: how far two identical processes
// differ is the resolution of every ratio), one with stall, one with stall
// and stall_metrics. Each collector's CPU time (utime+stime from
// /proc/PID/stat) over a round, per span, is compared with the receive-only
// one's in the same round; the ratios are medians over rounds with their
// range. pipeline-cpu.sh builds what it needs.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

func main() {
	var o options
	flag.StringVar(&o.otelcol, "otelcol", "_build/otelcol-streamstall", "the ocb-built collector")
	flag.IntVar(&o.spans, "spans", 5000, "spans per collector per round")
	flag.IntVar(&o.perRequest, "per-request", 100, "spans per OTLP request")
	flag.IntVar(&o.chunks, "chunks", 200, "chunk events per span")
	flag.IntVar(&o.rounds, "rounds", 7, "rounds; every collector takes the spans once per round")
	flag.StringVar(&o.compare, "compare-otelcol", "", "another build of the collector (another commit): its stall and stall_metrics collectors run in the same rounds, and each of ours is compared with its twin")
	flag.Parse()
	if err := run(o); err != nil {
		log.Fatal(err)
	}
}

type options struct {
	otelcol, compare                  string
	spans, perRequest, chunks, rounds int
}

// pipelines are the collectors' service sections; every one ends in the
// debug exporter, which logs a line per batch and lets it go.
var pipelines = []struct{ name, config string }{
	{"receive_only", `
    traces:
      receivers: [otlp]
      exporters: [debug]`},
	{"receive_only_again", `
    traces:
      receivers: [otlp]
      exporters: [debug]`},
	{"stall", `
    traces:
      receivers: [otlp]
      processors: [stall]
      exporters: [debug]`},
	{"stall_and_stall_metrics", `
    traces:
      receivers: [otlp]
      processors: [stall]
      exporters: [debug, stall_metrics]
    metrics:
      receivers: [stall_metrics]
      exporters: [debug]`},
}

const collectorConfig = `receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
%sexporters:
  debug:
    verbosity: basic
service:
  telemetry:
    metrics:
      level: none
  pipelines:%s
`

type collector struct {
	name string
	url  string
	proc *os.Process
	cpu  []time.Duration // per span, per round
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "pipelinecpu")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	type run struct{ name, config, bin string }
	var runs []run
	for _, p := range pipelines {
		runs = append(runs, run{p.name, p.config, o.otelcol})
	}
	if o.compare != "" {
		for _, p := range pipelines[2:] {
			runs = append(runs, run{p.name + compareSuffix, p.config, o.compare})
		}
	}
	var cols []*collector
	for _, r := range runs {
		c, stop, err := startCollector(r.bin, filepath.Join(dir, r.name), r.config)
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		defer stop()
		c.name = r.name
		cols = append(cols, c)
	}
	bodies, err := requests(o)
	if err != nil {
		return err
	}
	ctx := context.Background()
	for _, c := range cols { // warm up
		if err := post(ctx, c.url, bodies[:min(len(bodies), 2)]); err != nil {
			return fmt.Errorf("%s warm-up: %w", c.name, err)
		}
	}
	for r := range o.rounds {
		for k := range cols {
			c := cols[(r+k)%len(cols)]
			cpu0 := processCPU(c.proc.Pid)
			if err := post(ctx, c.url, bodies); err != nil {
				return fmt.Errorf("%s round %d: %w", c.name, r+1, err)
			}
			time.Sleep(200 * time.Millisecond) // the exporter's last batch
			c.cpu = append(c.cpu, (processCPU(c.proc.Pid)-cpu0)/time.Duration(o.spans))
		}
	}
	fmt.Printf("%d rounds of %d spans per collector (%d chunk events each, %d per OTLP request)\n", o.rounds, o.spans, o.chunks, o.perRequest)
	base := cols[0]
	stall := cols[slices.IndexFunc(cols, func(c *collector) bool { return c.name == "stall" })]
	for _, c := range cols {
		line := fmt.Sprintf("%-32s CPU %6.1f µs/span (median over rounds)", c.name, median(micros(c.cpu)))
		if c != base {
			line += "   / receive_only " + ratios(c, base)
		}
		if c.name == "stall_and_stall_metrics" {
			// What stall_metrics adds to stall, from the same rounds.
			line += "   / stall " + ratios(c, stall)
		}
		if twin, ok := strings.CutSuffix(c.name, compareSuffix); ok {
			ours := cols[slices.IndexFunc(cols, func(c *collector) bool { return c.name == twin })]
			line += "   ours / this " + ratios(ours, c)
		}
		fmt.Println(line)
	}
	return nil
}

// compareSuffix names the collectors of -compare-otelcol.
const compareSuffix = "@compare"

// ratios is the median and range over rounds of c's CPU per span to base's
// in the same round.
func ratios(c, base *collector) string {
	rs := make([]float64, len(c.cpu))
	for i := range rs {
		rs[i] = float64(c.cpu[i]) / float64(base.cpu[i])
	}
	slices.Sort(rs)
	return fmt.Sprintf("%.2fx [%.2f, %.2f]", median(rs), rs[0], rs[len(rs)-1])
}

// requests are the OTLP/protobuf bodies of one round: streaming calls of a
// few models, 200 chunk events about 25 ms apart with one 3 s stall.
func requests(o options) ([][]byte, error) {
	start := time.Now().Add(-time.Hour)
	var out [][]byte
	marshaler := &ptrace.ProtoMarshaler{}
	for first := 0; first < o.spans; first += o.perRequest {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr(semconv.AttrServiceName, "pipelinecpu")
		ss := rs.ScopeSpans().AppendEmpty()
		for i := first; i < min(first+o.perRequest, o.spans); i++ {
			sp := ss.Spans().AppendEmpty()
			sp.SetName("chat")
			sp.SetKind(ptrace.SpanKindClient)
			sp.SetTraceID(pcommon.TraceID([16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}))
			sp.SetSpanID(pcommon.SpanID([8]byte{1, 2, 3, 4, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}))
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
			at := start.Add(800 * time.Millisecond)
			for k := range o.chunks {
				gap := time.Duration(20+(k*7+i)%11) * time.Millisecond
				if k == o.chunks/2 {
					gap = 3 * time.Second
				}
				at = at.Add(gap)
				ev := sp.Events().AppendEmpty()
				ev.SetName(semconv.EventChunk)
				ev.SetTimestamp(pcommon.NewTimestampFromTime(at))
			}
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(10 * time.Millisecond)))
			sp.Attributes().PutStr(semconv.AttrOperationName, "chat")
			sp.Attributes().PutStr(semconv.AttrSystem, "openai")
			sp.Attributes().PutStr(semconv.AttrRequestModel, "model-"+strconv.Itoa(i%10))
			sp.Attributes().PutInt(semconv.AttrUsageOutputTokens, int64(o.chunks))
		}
		b, err := marshaler.MarshalTraces(td)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// post sends the bodies one after the other, as one client would.
func post(ctx context.Context, url string, bodies [][]byte) error {
	for _, b := range bodies {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/traces", bytes.NewReader(b))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
	}
	return nil
}

func startCollector(bin, dir, pipelines string) (*collector, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	cfg := filepath.Join(dir, "config.yaml")
	// Only the components a pipeline uses: a connector defined and unused
	// fails validation.
	components := ""
	if strings.Contains(pipelines, "stall") {
		components += "processors:\n  stall:\n"
	}
	if strings.Contains(pipelines, "stall_metrics") {
		components += "connectors:\n  stall_metrics:\n"
	}
	if err := os.WriteFile(cfg, fmt.Appendf(nil, collectorConfig, addr, components, pipelines), 0o600); err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(bin, "--config", cfg)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	stop := func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			stop()
			return nil, nil, fmt.Errorf("nothing listens on %s: %w\n%s", addr, err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &collector{url: "http://" + addr, proc: cmd.Process}, stop, nil
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// processCPU is a process's utime+stime from /proc/PID/stat.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name may hold spaces: fields count from after its ')'.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

func micros(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(time.Microsecond)
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

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallmetricsconnector

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/streamstall/streamstall/internal/exphist"
	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/figures/figurestest"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/processor/stallprocessor"
)

// latencies are lognormal values around 1.6 s, the field median TTFT.
func latencies() []float64 {
	r := rand.New(rand.NewPCG(1, 2))
	values := make([]float64, 4096)
	for i := range values {
		values[i] = 1.6 * math.Exp(r.NormFloat64())
	}
	return values
}

// BenchmarkRecordValue compares the cost of one value in a histogram with a
// raw DDSketch.Add on the same values, in the same run.
func BenchmarkRecordValue(b *testing.B) {
	values := latencies()
	b.Run("DDSketch.Add", func(b *testing.B) {
		b.ReportAllocs()
		sketch, err := ddsketch.NewDefaultDDSketch(defaultRelativeAccuracy)
		if err != nil {
			b.Fatal(err)
		}
		i := 0
		for b.Loop() {
			_ = sketch.Add(values[i&4095])
			i++
		}
	})
	b.Run("Histogram.Record", func(b *testing.B) {
		b.ReportAllocs()
		scale, err := exphist.ScaleForAccuracy(defaultRelativeAccuracy)
		if err != nil {
			b.Fatal(err)
		}
		// Enough buckets for the range, as the raw sketch has.
		layout, err := exphist.NewLayout(scale, 4096)
		if err != nil {
			b.Fatal(err)
		}
		h := layout.NewHistogram()
		i := 0
		for b.Loop() {
			_ = h.Record(values[i&4095])
			i++
		}
	})
}

// BenchmarkConsumeTraces is the whole path per recorded value: a batch of
// streaming spans of 64 chunks (TTFT, 63 gaps, generation, active time,
// stalls, the call), read, derived and recorded.
func BenchmarkConsumeTraces(b *testing.B) {
	const spans, chunks = 100, 64
	r := rand.New(rand.NewPCG(3, 4))
	calls := make([]call, spans)
	for i := range calls {
		ms := int64(200 + r.IntN(2000))
		times := make([]int64, chunks)
		for j := range times {
			times[j] = ms
			ms += int64(20 + r.IntN(60))
			if r.IntN(30) == 0 {
				ms += 3000 // a stall
			}
		}
		calls[i] = call{service: "chat-api", attrs: genAI("openai", fmt.Sprintf("model-%d", i%8)), chunksMs: times}
	}
	// The processor runs once, outside the measurement: the connector's input.
	td := processed(b, calls...)
	c, err := newStallMetrics(connectorSettings(), defaultConfig(), consumertest.NewNop(), clockwork.NewFakeClock())
	if err != nil {
		b.Fatal(err)
	}
	valuesPerBatch := countValues(b, c, td)
	b.ReportAllocs()
	batches := 0
	for b.Loop() {
		_ = c.ConsumeTraces(context.Background(), td)
		batches++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(batches*valuesPerBatch), "ns/value")
}

// countValues records td once into c and returns how many histogram values
// it made.
func countValues(b *testing.B, c *stallMetrics, td ptrace.Traces) int {
	b.Helper()
	_ = c.ConsumeTraces(context.Background(), td)
	md := c.buildMetrics(0)
	n := 0
	for _, name := range []string{semconv.MetricTimeToFirstChunk, semconv.MetricTimePerOutputChunk, semconv.MetricGenerationDuration, semconv.MetricActiveGenDuration, semconv.MetricStallDuration} {
		forMetric(md, name, func(m pmetric.Metric) {
			for _, dp := range m.ExponentialHistogram().DataPoints().All() {
				n += int(dp.Count())
			}
		})
	}
	return n
}

// BenchmarkMemoryPerSeries fills series (one model each) with the docs/contract.md
// worked example and reports the bytes allocated, and the bytes still live
// after a GC, per series (the eight metrics a winner records, of one
// attribute set).
func BenchmarkMemoryPerSeries(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("series=%d", n), func(b *testing.B) {
			batches := make([]ptrace.Traces, n)
			for i := range batches {
				c := workedExample
				c.attrs = genAI("openai", fmt.Sprintf("model-%d", i), semconv.AttrHedgeAttempt, 0, semconv.AttrHedgeOutcome, "winner")
				batches[i] = processed(b, c)
			}
			cfg := defaultConfig()
			cfg.MaxSeries = n
			var live uint64
			b.ReportAllocs()
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				c, err := newStallMetrics(connectorSettings(), cfg, consumertest.NewNop(), clockwork.NewFakeClock())
				if err != nil {
					b.Fatal(err)
				}
				for _, td := range batches {
					_ = c.ConsumeTraces(context.Background(), td)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				live = after.HeapAlloc - before.HeapAlloc
				runtime.KeepAlive(c)
			}
			b.ReportMetric(float64(live)/float64(n), "live-B/series")
		})
	}
}

// pipelineInput is the OTLP encoding of a batch of 100 streaming spans of 200
// chunk events each (20 ms apart, three 3 s stalls), every chunk event
// carrying llm.stream.chunk.kind as streamstall's proxy writes it: what an
// OTLP receiver decodes.
func pipelineInput(b *testing.B) []byte {
	const spans, chunks = 100, 200
	calls := make([]call, spans)
	for i := range calls {
		times := make([]int64, chunks)
		ms := int64(400)
		for j := range times {
			times[j] = ms
			ms += 20
			if j == 49 || j == 99 || j == 149 {
				ms += 3000
			}
		}
		calls[i] = call{service: "chat-api", attrs: genAI("openai", fmt.Sprintf("model-%d", i%8), semconv.AttrUsageOutputTokens, 260), chunksMs: times}
	}
	td := traces(calls...)
	for i, rs := range td.ResourceSpans().All() {
		// Every span its own, as in a real batch.
		rs.ScopeSpans().At(0).Spans().At(0).SetSpanID(pcommon.SpanID{byte(i), 1})
	}
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkPipelineVsReceive is the collector CPU per span that the stall
// processor and this connector add to receiving it: in every iteration, on
// the same OTLP body, receive-only (decoding it, what an OTLP receiver does
// before the first consumer) alternates with decoding it and running it
// through the stall processor into the connector, in turn first and second.
// Alternating gives both the same interference on a shared machine and the
// same garbage collection; the ratio is the figure. The control runs
// receive-only against itself: its ratio is the noise; processor is the
// stall processor alone, into a nop consumer; pipeline is the processor
// into the started connector, which takes what the processor judged from
// the hand-off; pipeline_read_twice the same with no connector started, so
// that nothing is handed off and the connector reads each sealed span's
// chunk times again (figures.ChunkReader.ReadSealed). read_floor is the
// least any design that reads the evidence pays after the decode: one
// touch of each event's name, time and kind, nothing written, nothing
// recorded; figures_floor the least any design pays for the figures (see
// figuresFloor).
func BenchmarkPipelineVsReceive(b *testing.B) {
	body := pipelineInput(b)
	c, err := newStallMetrics(connectorSettings(), defaultConfig(), consumertest.NewNop(), clockwork.NewFakeClock())
	if err != nil {
		b.Fatal(err)
	}
	pf := stallprocessor.NewFactory()
	proc, err := pf.CreateTraces(context.Background(), processortest.NewNopSettings(pf.Type()), pf.CreateDefaultConfig(), c)
	if err != nil {
		b.Fatal(err)
	}
	alone, err := pf.CreateTraces(context.Background(), processortest.NewNopSettings(pf.Type()), pf.CreateDefaultConfig(), consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var u ptrace.ProtoUnmarshaler
	processor := func() {
		td, err := u.UnmarshalTraces(body)
		if err != nil {
			b.Fatal(err)
		}
		if err := alone.ConsumeTraces(ctx, td); err != nil {
			b.Fatal(err)
		}
	}
	receive := func() {
		if _, err := u.UnmarshalTraces(body); err != nil {
			b.Fatal(err)
		}
	}
	pipeline := func() {
		td, err := u.UnmarshalTraces(body)
		if err != nil {
			b.Fatal(err)
		}
		if err := proc.ConsumeTraces(ctx, td); err != nil {
			b.Fatal(err)
		}
	}
	// readFloor touches what any reader of the evidence must: each event's
	// name, time and kind, once, and keeps nothing but a sum.
	readFloor := func() {
		td, err := u.UnmarshalTraces(body)
		if err != nil {
			b.Fatal(err)
		}
		var sum int64
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, span := range ss.Spans().All() {
					for _, ev := range span.Events().All() {
						if ev.Name() == semconv.EventChunk {
							sum += int64(ev.Timestamp())
							if kind, ok := ev.Attributes().Get(semconv.AttrChunkKind); ok && kind.Str() == semconv.ChunkKindReasoning {
								sum++
							}
						}
					}
				}
			}
		}
		floorSink = sum
	}
	// figuresFloor is the least any design pays for the figures: the read
	// floor, then what the contract writes on each span (the stall
	// processor's figure attributes and its three stall events, their
	// positions known beforehand, nothing looked for and no seal), and each
	// gap recorded once, in bulk, into one histogram per model.
	// The connector's default histograms.
	scale, err := exphist.ScaleForAccuracy(defaultConfig().Histogram.RelativeAccuracy)
	if err != nil {
		b.Fatal(err)
	}
	layout, err := exphist.NewLayout(scale, defaultConfig().Histogram.MaxBuckets)
	if err != nil {
		b.Fatal(err)
	}
	gapHists := map[string]*exphist.Histogram{}
	var times []int64
	var gaps []float64
	figuresFloor := func() {
		td, err := u.UnmarshalTraces(body)
		if err != nil {
			b.Fatal(err)
		}
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, span := range ss.Spans().All() {
					times = times[:0]
					firstAnswer := int64(-1)
					events := span.Events()
					for _, ev := range events.All() {
						if ev.Name() != semconv.EventChunk {
							continue
						}
						t := int64(ev.Timestamp())
						times = append(times, t)
						if kind, ok := ev.Attributes().Get(semconv.AttrChunkKind); firstAnswer < 0 && (!ok || kind.Str() != semconv.ChunkKindReasoning) {
							firstAnswer = t
						}
					}
					figurestest.WriteFloor(span, times, firstAnswer, []int{50, 100, 150}, figurestest.Threshold)
					attrs := span.Attributes()
					model, _ := attrs.Get(semconv.AttrRequestModel)
					h := gapHists[model.Str()]
					if h == nil {
						h = layout.NewHistogram()
						gapHists[model.Str()] = h
					}
					gaps = gaps[:0]
					for i := 1; i < len(times); i++ {
						gaps = append(gaps, float64(times[i]-times[i-1])/1e9)
					}
					if err := h.RecordAll(gaps); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	}
	startConnector := func(b *testing.B) {
		if err := c.Start(ctx, componenttest.NewNopHost()); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Shutdown(ctx) })
	}
	for _, bc := range []struct {
		name  string
		a, b  func()
		setUp func(*testing.B)
	}{
		{"control", receive, receive, nil},
		{"read_floor", receive, readFloor, nil},
		{"figures_floor", receive, figuresFloor, nil},
		{"processor", receive, processor, nil},
		{"pipeline_read_twice", receive, pipeline, nil},
		{"pipeline", receive, pipeline, startConnector},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.setUp != nil {
				bc.setUp(b)
			}
			var timeA, timeB time.Duration
			first := true
			b.ReportAllocs()
			for b.Loop() {
				for _, side := range [2]bool{first, !first} {
					start := time.Now()
					if side {
						bc.a()
						timeA += time.Since(start)
					} else {
						bc.b()
						timeB += time.Since(start)
					}
				}
				first = !first
			}
			b.ReportMetric(float64(timeA.Nanoseconds())/float64(b.N*100), "receive-ns/span")
			b.ReportMetric(float64(timeB.Nanoseconds())/float64(b.N*100), bc.name+"-ns/span")
			b.ReportMetric(float64(timeB)/float64(timeA), "ratio")
		})
	}
}

// floorSink keeps the read floor's loads from being optimized away.
var floorSink int64

// BenchmarkConnectorHandoffVsReadSealed is what the connector costs per
// span right after the stall processor, with the evidence the processor
// handed off (the connector of this process, started) against reading
// each sealed span's chunk times again (a connector whose hand-off never
// holds an entry), alternating in every iteration on spans of the same
// body just processed; the processor is not timed.
func BenchmarkConnectorHandoffVsReadSealed(b *testing.B) {
	body := pipelineInput(b)
	ctx := context.Background()
	newConnector := func() *stallMetrics {
		c, err := newStallMetrics(connectorSettings(), defaultConfig(), consumertest.NewNop(), clockwork.NewFakeClock())
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	taking, reading := newConnector(), newConnector()
	reading.handoff = figures.NewHandoff(figures.DefaultHandoffEntries, figures.DefaultHandoffBytes)
	if err := taking.Start(ctx, componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = taking.Shutdown(ctx) })
	pf := stallprocessor.NewFactory()
	sink := new(consumertest.TracesSink)
	proc, err := pf.CreateTraces(ctx, processortest.NewNopSettings(pf.Type()), pf.CreateDefaultConfig(), sink)
	if err != nil {
		b.Fatal(err)
	}
	var u ptrace.ProtoUnmarshaler
	run := func(c *stallMetrics) time.Duration {
		td, err := u.UnmarshalTraces(body)
		if err != nil {
			b.Fatal(err)
		}
		if err := proc.ConsumeTraces(ctx, td); err != nil {
			b.Fatal(err)
		}
		sink.Reset()
		start := time.Now()
		_ = c.ConsumeTraces(ctx, td)
		return time.Since(start)
	}
	var takeTime, readTime time.Duration
	first := true
	for b.Loop() {
		if first {
			takeTime += run(taking)
			readTime += run(reading)
		} else {
			readTime += run(reading)
			takeTime += run(taking)
		}
		first = !first
	}
	b.ReportMetric(float64(takeTime.Nanoseconds())/float64(b.N*100), "handoff-ns/span")
	b.ReportMetric(float64(readTime.Nanoseconds())/float64(b.N*100), "read-sealed-ns/span")
	b.ReportMetric(float64(takeTime)/float64(readTime), "ratio")
}

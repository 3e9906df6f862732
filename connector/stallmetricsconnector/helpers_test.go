// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallmetricsconnector

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/streamstall/streamstall/connector/stallmetricsconnector/internal/metadata"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/processor/stallprocessor"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite the expected metrics under testdata/")

// epoch is the fake clock's start and the base of every span's timestamps.
var epoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// call describes one streaming span as a client or proxy emits it, before
// the stall processor: chunk offsets in milliseconds from the span start.
type call struct {
	service  string
	attrs    map[string]any
	startMs  int64
	chunksMs []int64
	// reasoning is the number of leading chunks that are reasoning chunks.
	reasoning int
}

func (c call) appendTo(td ptrace.Traces) {
	rs := td.ResourceSpans().AppendEmpty()
	if c.service != "" {
		rs.Resource().Attributes().PutStr(semconv.AttrServiceName, c.service)
	}
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("chat")
	span.SetKind(ptrace.SpanKindClient)
	span.SetTraceID(pcommon.TraceID{1, 2, 3})
	span.SetSpanID(pcommon.SpanID{4, 5, 6})
	start := epoch.Add(time.Duration(c.startMs) * time.Millisecond)
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	end := start
	for i, ms := range c.chunksMs {
		at := start.Add(time.Duration(ms) * time.Millisecond)
		ev := span.Events().AppendEmpty()
		ev.SetName(semconv.EventChunk)
		ev.SetTimestamp(pcommon.NewTimestampFromTime(at))
		kind := semconv.ChunkKindText
		if i < c.reasoning {
			kind = semconv.ChunkKindReasoning
		}
		ev.Attributes().PutStr(semconv.AttrChunkKind, kind)
		end = at
	}
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(end.Add(time.Millisecond)))
	if err := span.Attributes().FromRaw(c.attrs); err != nil {
		panic(err)
	}
}

func traces(calls ...call) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, c := range calls {
		c.appendTo(td)
	}
	return td
}

func genAI(provider, model string, more ...any) map[string]any {
	m := map[string]any{
		semconv.AttrProviderName:  provider,
		semconv.AttrRequestModel:  model,
		semconv.AttrOperationName: "chat",
	}
	for i := 0; i+1 < len(more); i += 2 {
		m[more[i].(string)] = more[i+1]
	}
	return m
}

// testPipeline is the real stall processor in front of the connector, which
// exports into sink; the connector runs on a fake clock.
type testPipeline struct {
	t         *testing.T
	clock     *clockwork.FakeClock
	sink      *consumertest.MetricsSink
	connector *stallMetrics
	processor interface {
		ConsumeTraces(context.Context, ptrace.Traces) error
	}
}

func newPipeline(t *testing.T, cfg *Config, processorCfg func(*stallprocessor.Config)) *testPipeline {
	t.Helper()
	p := &testPipeline{t: t, clock: clockwork.NewFakeClockAt(epoch), sink: new(consumertest.MetricsSink)}
	ctx := clockwork.AddToContext(context.Background(), p.clock)
	conn, err := NewFactory().CreateTracesToMetrics(ctx, connectortest.NewNopSettings(metadata.Type), cfg, p.sink)
	require.NoError(t, err)
	p.connector = conn.(*stallMetrics)

	pf := stallprocessor.NewFactory()
	pcfg := pf.CreateDefaultConfig().(*stallprocessor.Config)
	if processorCfg != nil {
		processorCfg(pcfg)
	}
	proc, err := pf.CreateTraces(context.Background(), processortest.NewNopSettings(pf.Type()), pcfg, p.connector)
	require.NoError(t, err)
	require.NoError(t, proc.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, proc.Shutdown(context.Background())) })
	p.processor = proc
	// Shutdown is a no-op when already shut down or never started.
	t.Cleanup(func() { require.NoError(t, p.connector.Shutdown(context.Background())) })
	return p
}

func (p *testPipeline) start() {
	require.NoError(p.t, p.connector.Start(context.Background(), componenttest.NewNopHost()))
}

func (p *testPipeline) consume(calls ...call) {
	require.NoError(p.t, p.processor.ConsumeTraces(context.Background(), traces(calls...)))
}

// flush exports synchronously, as a tick would, after moving the clock.
func (p *testPipeline) flush(after time.Duration) {
	p.clock.Advance(after)
	require.NoError(p.t, p.connector.flush(context.Background()))
}

// defaultConfig is the default configuration with a flush interval longer
// than any test, so that only the tests' explicit flushes export.
func defaultConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.FlushInterval = 24 * time.Hour
	return cfg
}

// compareGolden compares md with testdata/<name>.yaml. Timestamps come from
// the fake clock and are compared too; only orders are ignored.
func compareGolden(t *testing.T, name string, md pmetric.Metrics) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".yaml")
	if *updateGolden {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		// A copy: writing sorts in place. The fake clock's timestamps are kept.
		cp := pmetric.NewMetrics()
		md.CopyTo(cp)
		require.NoError(t, golden.WriteMetricsToFile(path, cp, golden.SkipMetricTimestampNormalization()))
	}
	expected, err := golden.ReadMetrics(path)
	require.NoError(t, err)
	require.NoError(t, pmetrictest.CompareMetrics(expected, md,
		pmetrictest.IgnoreMetricsOrder(),
		pmetrictest.IgnoreMetricDataPointsOrder(),
		pmetrictest.IgnoreScopeVersion(),
	))
}

func connectorSettings() connector.Settings { return connectortest.NewNopSettings(metadata.Type) }

// processed runs calls through the real stall processor and returns what it
// hands on: the connector's input.
func processed(tb testing.TB, calls ...call) ptrace.Traces {
	tb.Helper()
	pf := stallprocessor.NewFactory()
	sink := new(consumertest.TracesSink)
	proc, err := pf.CreateTraces(context.Background(), processortest.NewNopSettings(pf.Type()), pf.CreateDefaultConfig(), sink)
	require.NoError(tb, err)
	require.NoError(tb, proc.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(tb, proc.ConsumeTraces(context.Background(), traces(calls...)))
	require.NoError(tb, proc.Shutdown(context.Background()))
	require.Len(tb, sink.AllTraces(), 1)
	return sink.AllTraces()[0]
}

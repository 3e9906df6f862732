// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallmetricsconnector

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/processor/stallprocessor"
)

// handoffCalls are three spans with three seals, one with a stall.
func handoffCalls() []call {
	calls := []call{workedExample, workedExample, {service: "chat-api", attrs: genAI("openai", "gpt-4o"), chunksMs: []int64{100, 100, 120, 2500, 2520}}}
	for i := range calls {
		calls[i].startMs = int64(i) * 10
	}
	return calls
}

// processTo runs td through a stall processor into sink.
func processTo(t *testing.T, sink *consumertest.TracesSink, td ptrace.Traces) ptrace.Traces {
	t.Helper()
	pf := stallprocessor.NewFactory()
	proc, err := pf.CreateTraces(context.Background(), processortest.NewNopSettings(pf.Type()), pf.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, proc.ConsumeTraces(context.Background(), td))
	return sink.AllTraces()[len(sink.AllTraces())-1]
}

func sameMetrics(a, b pmetric.Metrics) error {
	return pmetrictest.CompareMetrics(a, b, pmetrictest.IgnoreMetricsOrder(), pmetrictest.IgnoreMetricDataPointsOrder())
}

// spanChanges are what a processor between stall and stall_metrics may do
// to a span: each is seen, and the span read in full.
var spanChanges = map[string]func(ptrace.Span){
	"nothing": func(ptrace.Span) {},
	"the last chunk moved": func(span ptrace.Span) {
		events := span.Events()
		for i := events.Len() - 1; i >= 0; i-- {
			if ev := events.At(i); ev.Name() == semconv.EventChunk {
				ev.SetTimestamp(ev.Timestamp() + pcommon.Timestamp(7*time.Millisecond))
				return
			}
		}
	},
	"a chunk event dropped": func(span ptrace.Span) {
		dropped := false
		span.Events().RemoveIf(func(ev ptrace.SpanEvent) bool {
			drop := !dropped && ev.Name() == semconv.EventChunk
			dropped = dropped || drop
			return drop
		})
	},
	"the span end moved": func(span ptrace.Span) { span.SetEndTimestamp(span.EndTimestamp() + pcommon.Timestamp(time.Second)) },
}

// A span whose evidence the processor handed off records what the same
// span records read in full (its seal removed: a span from elsewhere) or
// read the cheap way (no connector open when the processor ran, so nothing
// handed off: the connector finds no entry and verifies the seal), whatever
// a processor between them changed; the hand-off holds nothing after.
func TestHandedOffSpansRecordAsSpansReadInFull(t *testing.T) {
	handoff := figures.ProcessHandoff()
	for name, change := range spanChanges {
		run := func(mode string) pmetric.Metrics {
			p := newPipeline(t, defaultConfig(), nil)
			if mode == "handed off" {
				p.start()
			}
			td := processTo(t, new(consumertest.TracesSink), traces(handoffCalls()...))
			if mode == "handed off" {
				require.Equal(t, 3, handoff.Len(), "%s: every sealed span is handed off", name)
			}
			for _, rs := range td.ResourceSpans().All() {
				span := rs.ScopeSpans().At(0).Spans().At(0)
				if mode == "from elsewhere" {
					span.Attributes().Remove(semconv.AttrFiguresSeal)
				}
				change(span)
			}
			require.NoError(t, p.connector.ConsumeTraces(context.Background(), td))
			assert.Zero(t, handoff.Len(), "%s, %s: taken or dropped", name, mode)
			p.flush(time.Second)
			require.NoError(t, p.connector.Shutdown(context.Background()))
			require.NotEmpty(t, p.sink.AllMetrics())
			return p.sink.AllMetrics()[0]
		}
		full := run("from elsewhere")
		require.NoError(t, sameMetrics(full, run("sealed")), name)
		require.NoError(t, sameMetrics(full, run("handed off")), name)
	}
}

// Evidence that no connector took is dropped once the hand-off is full:
// the span it was for, when it comes, is read again and records the same.
func TestEvictedHandoffFallsBack(t *testing.T) {
	want := func() pmetric.Metrics {
		p := newPipeline(t, defaultConfig(), nil)
		require.NoError(t, p.connector.ConsumeTraces(context.Background(), processTo(t, new(consumertest.TracesSink), traces(handoffCalls()...))))
		p.flush(time.Second)
		return p.sink.AllMetrics()[0]
	}()

	p := newPipeline(t, defaultConfig(), nil)
	p.start()
	sink := new(consumertest.TracesSink)
	td := processTo(t, sink, traces(handoffCalls()...))
	// Spans no connector takes (another pipeline's), enough to fill the
	// hand-off.
	others := ptrace.NewTraces()
	spans := others.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for i := range figures.DefaultHandoffEntries {
		span := spans.AppendEmpty()
		span.SetSpanID(pcommon.SpanID{byte(i >> 8), byte(i), 9})
		span.SetStartTimestamp(pcommon.NewTimestampFromTime(epoch))
		for _, ms := range []int64{100, 120} {
			ev := span.Events().AppendEmpty()
			ev.SetName(semconv.EventChunk)
			ev.SetTimestamp(pcommon.NewTimestampFromTime(epoch.Add(time.Duration(ms) * time.Millisecond)))
		}
		span.SetEndTimestamp(pcommon.NewTimestampFromTime(epoch.Add(time.Second)))
	}
	processTo(t, sink, others)
	require.Equal(t, figures.DefaultHandoffEntries, figures.ProcessHandoff().Len(), "the hand-off is full")

	require.NoError(t, p.connector.ConsumeTraces(context.Background(), td))
	assert.Equal(t, figures.DefaultHandoffEntries, figures.ProcessHandoff().Len(), "nothing of the three spans was left")
	p.flush(time.Second)
	require.NoError(t, sameMetrics(want, p.sink.AllMetrics()[0]))
	require.NoError(t, p.connector.Shutdown(context.Background()))
	assert.Zero(t, figures.ProcessHandoff().Len(), "the last connector closed")
}

// Pipelines running at once share the process's hand-off: each connector
// records its own spans, as the same spans read in full record.
func TestConcurrentPipelinesShareTheHandoff(t *testing.T) {
	const pipelines, batches = 4, 20
	callsOf := func(p, b int) []call {
		calls := handoffCalls()
		for i := range calls {
			calls[i].startMs += int64(p*1000 + b*40)
			calls[i].attrs = genAI("openai", fmt.Sprintf("model-%d", p))
		}
		return calls
	}
	var ps []*testPipeline
	for range pipelines {
		p := newPipeline(t, defaultConfig(), nil)
		p.start()
		ps = append(ps, p)
	}
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			for b := range batches {
				if err := p.processor.ConsumeTraces(context.Background(), traces(callsOf(i, b)...)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, figures.ProcessHandoff().Len(), "every entry taken")
	for i, p := range ps {
		want := newPipeline(t, defaultConfig(), nil)
		for b := range batches {
			td := processTo(t, new(consumertest.TracesSink), traces(callsOf(i, b)...))
			for _, rs := range td.ResourceSpans().All() {
				rs.ScopeSpans().At(0).Spans().At(0).Attributes().Remove(semconv.AttrFiguresSeal)
			}
			require.NoError(t, want.connector.ConsumeTraces(context.Background(), td))
		}
		want.flush(time.Second)
		p.flush(time.Second)
		require.NoError(t, sameMetrics(want.sink.AllMetrics()[0], p.sink.AllMetrics()[0]), "pipeline %d", i)
	}
	for _, p := range ps {
		require.NoError(t, p.connector.Shutdown(context.Background()))
	}
}

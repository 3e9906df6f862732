// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallmetricsconnector

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/streamstall/streamstall/connector/stallmetricsconnector/internal/metadatatest"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/processor/stallprocessor"
)

// The Vercel AI SDK spans of the stall processor's golden file, through the
// processor: each doStream span records its TTFT under the provider and
// model the processor read from the SDK's attributes, and nothing
// interval-based; a marker span is no llm.stream.calls call.
func TestVercelSpansThroughTheProcessor(t *testing.T) {
	td, err := golden.ReadTraces(filepath.Join("..", "..", "processor", "stallprocessor", "testdata", "vercel_ai_sdk", "input.yaml"))
	require.NoError(t, err)
	pf := stallprocessor.NewFactory()
	sink := new(consumertest.TracesSink)
	proc, err := pf.CreateTraces(context.Background(), processortest.NewNopSettings(pf.Type()), pf.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, proc.ConsumeTraces(context.Background(), td))

	o := newObserved(t, defaultConfig())
	md := o.consumeAndFlush(t, sink.AllTraces()[0])

	ttft := histogramPoint(t, md, semconv.MetricTimeToFirstChunk, map[string]any{
		semconv.AttrServiceName: "next-chat", semconv.AttrProviderName: "openai.chat", semconv.AttrRequestModel: "gpt-4o-mini",
	})
	assert.Equal(t, uint64(1), ttft.Count())
	assert.InDelta(t, 0.4126, ttft.Sum(), 1e-12)
	older := histogramPoint(t, md, semconv.MetricTimeToFirstChunk, map[string]any{
		semconv.AttrServiceName: "next-chat", semconv.AttrProviderName: "anthropic.messages", semconv.AttrRequestModel: "claude-3-5-haiku-latest",
	})
	assert.Equal(t, uint64(1), older.Count())
	assert.InDelta(t, 0.95, older.Sum(), 1e-12)

	for _, name := range []string{
		semconv.MetricTimePerOutputChunk, semconv.MetricGenerationDuration, semconv.MetricActiveGenDuration,
		semconv.MetricStallDuration, semconv.MetricCalls, semconv.MetricTimeToFirstAnswer,
	} {
		forMetric(md, name, func(pmetric.Metric) { t.Errorf("%s recorded from marker spans", name) })
	}
}

// A carried marker set that claims a stall is refused and counted: no
// figure of it is recorded.
func TestForgedMarkerSetRefused(t *testing.T) {
	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("ai.streamText.doStream")
	attrs := span.Attributes()
	attrs.PutStr(semconv.AttrEvidence, semconv.EvidenceMarkers)
	attrs.PutDouble(semconv.AttrTTFTMs, 400)
	attrs.PutDouble(semconv.AttrStallMs, 60000)

	o := newObserved(t, defaultConfig())
	md := o.consumeAndFlush(t, td)
	assert.Zero(t, md.DataPointCount())
	metadatatest.AssertEqualConnectorStallMetricsSpansInconsistent(t, o.tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
}

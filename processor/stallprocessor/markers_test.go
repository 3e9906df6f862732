// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallprocessor

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/processor/stallprocessor/internal/metadatatest"
)

// markerGoldenCases are the golden files of spans from instrumentations
// that record no event per chunk, read like goldenCases.
var markerGoldenCases = []struct {
	name      string
	configure func(*Config)
}{
	{name: "vercel_ai_sdk"},
	{name: "vercel_responses"},
	{name: "openinference"},
	{name: "markers_hostile"},
	{name: "markers_off", configure: func(c *Config) { c.MarkerEvents = figures.MarkerEventsConfig{} }},
}

// Spans without evidence leave byte for byte unchanged: OpenInference's
// span without events, and every span when markers are off.
func TestMarkerSpansWithoutEvidenceUnchanged(t *testing.T) {
	input, err := golden.ReadTraces(filepath.Join("testdata", "openinference", "input.yaml"))
	require.NoError(t, err)
	want := ptrace.NewTraces()
	input.CopyTo(want)
	got := runProcessor(t, createDefaultConfig().(*Config), input)
	assertSameBytes(t, spanOnly(want, 0), spanOnly(got, 0))

	input, err = golden.ReadTraces(filepath.Join("testdata", "markers_off", "input.yaml"))
	require.NoError(t, err)
	want = ptrace.NewTraces()
	input.CopyTo(want)
	cfg := createDefaultConfig().(*Config)
	cfg.MarkerEvents = figures.MarkerEventsConfig{}
	assertSameBytes(t, want, runProcessor(t, cfg, input))
}

// The figures of the Vercel AI SDK span, read back as stall_metrics reads
// them: TTFT exactly from the first-chunk event, wall generation to the
// finish, no stall figure, and a consistent set.
func TestVercelSpanFigures(t *testing.T) {
	input, err := golden.ReadTraces(filepath.Join("testdata", "vercel_ai_sdk", "input.yaml"))
	require.NoError(t, err)
	out := runProcessor(t, createDefaultConfig().(*Config), input)
	span := out.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1)
	require.Equal(t, "ai.streamText.doStream", span.Name())

	r := figures.ReadAttributes(span.Attributes())
	r.ReadStallEvents(span.Events())
	require.NoError(t, r.Check())
	assert.InDelta(t, 412.6, r.Float(figures.IdxTTFTMs), 1e-9)
	assert.InDelta(t, 4457.6, r.Float(figures.IdxGenerationMs), 1e-9)
	for _, i := range []int{figures.IdxChunkCount, figures.IdxStallMs, figures.IdxStallCount, figures.IdxMaxStallMs, figures.IdxActiveGenerationMs, figures.IdxStallThresholdMs, figures.IdxActiveTPS, figures.IdxBurst} {
		assert.False(t, r.Has(i), figures.AttributeNames()[i])
	}
	// The SDK's own measure agrees with the event to a fraction of a millisecond.
	ms, ok := span.Attributes().Get("ai.response.msToFirstChunk")
	require.True(t, ok)
	assert.InDelta(t, ms.Double(), r.Float(figures.IdxTTFTMs), 1)
}

// Marker spans count as enriched; implausible ones as implausible, carried
// inconsistent sets as inconsistent.
func TestMarkerTelemetry(t *testing.T) {
	input, err := golden.ReadTraces(filepath.Join("testdata", "markers_hostile", "input.yaml"))
	require.NoError(t, err)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	proc, err := NewFactory().CreateTraces(context.Background(), metadatatest.NewSettings(tel), createDefaultConfig(), new(consumertest.TracesSink))
	require.NoError(t, err)
	require.NoError(t, proc.ConsumeTraces(context.Background(), input))
	require.NoError(t, proc.Shutdown(context.Background()))

	// Enriched: the forged one, the skewed one and the one with chunk events.
	metadatatest.AssertEqualProcessorStallSpansEnriched(t, tel, []metricdata.DataPoint[int64]{{Value: 3}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorStallSpansImplausible(t, tel, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorStallInconsistentFiguresRemoved(t, tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
}

// A marker span's first chunk takes part in hedge-outcome inference: the
// attempt whose first chunk came first wins.
func TestMarkerHedgeInference(t *testing.T) {
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for i, firstMs := range []int64{900, 300} {
		span := spans.AppendEmpty()
		span.SetName("ai.streamText.doStream")
		span.SetStartTimestamp(1_767_225_600_000_000_000)
		span.SetEndTimestamp(1_767_225_602_000_000_000)
		span.Attributes().PutStr(semconv.AttrHedgeGroupID, "g1")
		span.Attributes().PutInt(semconv.AttrHedgeAttempt, int64(i))
		ev := span.Events().AppendEmpty()
		ev.SetName(semconv.EventVercelFirstChunk)
		ev.SetTimestamp(span.StartTimestamp() + pcommon.Timestamp(firstMs*1_000_000))
	}
	cfg := createDefaultConfig().(*Config)
	cfg.InferHedgeOutcome = true
	out := runProcessor(t, cfg, td).ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	outcome := func(i int) string {
		v, _ := out.At(i).Attributes().Get(semconv.AttrHedgeOutcome)
		return v.Str()
	}
	assert.Equal(t, semconv.HedgeOutcomeLoser, outcome(0))
	assert.Equal(t, semconv.HedgeOutcomeWinner, outcome(1))
}

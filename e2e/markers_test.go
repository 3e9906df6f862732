// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
)

const markersPipelineConfig = `
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${OTLP}
processors:
  stall:
` + sinkAndMetrics + `service:
  pipelines:
    traces:
      receivers: [otlp]
      processors: [stall]
      exporters: [otlp_http, stall_metrics]
    metrics:
      receivers: [stall_metrics]
      exporters: [prometheus]
`

// vercelDoStreamSpan is the ai.streamText.doStream span the Vercel AI SDK's
// experimental_telemetry records for one provider call: no event per
// chunk, an ai.stream.firstChunk event firstMs after its start and an
// ai.stream.finish event finishMs after it, its model and provider under
// ai.model.* only (as SDK versions before the gen_ai.* attributes write it).
func vercelDoStreamSpan(ss ptrace.ScopeSpans, start time.Time, firstMs, finishMs float64) ptrace.Span {
	at := func(ms float64) pcommon.Timestamp {
		return pcommon.NewTimestampFromTime(start.Add(time.Duration(ms * float64(time.Millisecond))))
	}
	sp := ss.Spans().AppendEmpty()
	sp.SetName("ai.streamText.doStream")
	sp.SetTraceID(pcommon.TraceID([16]byte{0xa1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}))
	sp.SetSpanID(pcommon.SpanID([8]byte{0xa1, 2, 3, 4, 5, 6, 7, 8}))
	sp.SetStartTimestamp(at(0))
	sp.SetEndTimestamp(at(finishMs + 1))
	a := sp.Attributes()
	a.PutStr("operation.name", "ai.streamText.doStream chat-route")
	a.PutStr("ai.operationId", "ai.streamText.doStream")
	a.PutStr(semconv.AttrVercelModelID, "gpt-4o-mini")
	a.PutStr(semconv.AttrVercelModelProvider, "openai.chat")
	a.PutDouble("ai.response.msToFirstChunk", firstMs)
	a.PutInt(semconv.AttrVercelPromptTokens, 14)
	a.PutInt(semconv.AttrVercelCompletionTokens, 22)
	first := sp.Events().AppendEmpty()
	first.SetName(semconv.EventVercelFirstChunk)
	first.SetTimestamp(at(firstMs))
	first.Attributes().PutDouble("ai.response.msToFirstChunk", firstMs)
	finish := sp.Events().AppendEmpty()
	finish.SetName(semconv.EventVercelFinish)
	finish.SetTimestamp(at(finishMs))
	return sp
}

// TestVercelAISDKSpan posts a Vercel AI SDK doStream span over OTLP to the
// ocb-built collector: the span leaves stall with its TTFT and wall
// generation from the markers and no stall figure, and stall_metrics' scrape
// has its TTFT under the provider and model read from ai.model.*, and
// nothing interval-based.
func TestVercelAISDKSpan(t *testing.T) {
	sink := startSink(t)
	otlpPort, promPort := freePort(t), freePort(t)
	collector(t, fill(markersPipelineConfig, "OTLP", otlpPort, "SINK", sink.URL, "PROM", promPort))

	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(semconv.AttrServiceName, "e2e-vercel")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("ai")
	vercelDoStreamSpan(ss, time.Now().Add(-time.Minute), 412.5, 4870)

	body, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	status, resp, err := postJSON(ctx, fmt.Sprintf("http://127.0.0.1:%d/v1/traces", otlpPort), body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, resp)

	eventually(t, 20*time.Second, "the doStream span at the sink", func() error {
		if _, ok := sink.Span("ai.streamText.doStream"); !ok {
			return errNotYet
		}
		return nil
	})
	sp, _ := sink.Span("ai.streamText.doStream")
	attrs := sp.Attributes().AsRaw()
	assert.Equal(t, semconv.EvidenceMarkers, attrs[semconv.AttrEvidence])
	assert.InDelta(t, 412.5, attrs[semconv.AttrTTFTMs], 1e-6)
	assert.InDelta(t, 4870-412.5, attrs[semconv.AttrGenerationMs], 1e-6)
	assert.InDelta(t, 0.4125, attrs[semconv.AttrTimeToFirstChunk], 1e-9)
	for _, name := range figures.AttributeNames() {
		switch name {
		case semconv.AttrEvidence, semconv.AttrTTFTMs, semconv.AttrGenerationMs:
		default:
			assert.NotContains(t, attrs, name, "no figure is guessed from markers")
		}
	}
	assert.Equal(t, "openai.chat", attrs[semconv.AttrProviderName])
	assert.Equal(t, "gpt-4o-mini", attrs[semconv.AttrRequestModel])
	assert.EqualValues(t, 22, attrs[semconv.AttrUsageOutputTokens])
	assert.Equal(t, 2, sp.Events().Len(), "the markers stay, no stall event is added")

	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", promPort)
	labels := map[string]string{"service_name": "e2e-vercel", "gen_ai_provider_name": "openai.chat", "gen_ai_request_model": "gpt-4o-mini"}
	var mfs map[string]*dto.MetricFamily
	eventually(t, 30*time.Second, "the scrape has the TTFT", func() error {
		mfs, err = scrape(ctx, url)
		if err == nil {
			if _, ok := series(mfs, "gen_ai_client_operation_time_to_first_chunk_seconds", labels); !ok {
				err = errNotYet
			}
		}
		return err
	})
	m, _ := series(mfs, "gen_ai_client_operation_time_to_first_chunk_seconds", labels)
	h := m.GetHistogram()
	assert.EqualValues(t, 1, h.GetSampleCount())
	assert.InDelta(t, 0.4125, h.GetSampleSum(), 1e-9)
	for _, name := range []string{
		"gen_ai_client_operation_time_per_output_chunk_seconds", "llm_stream_generation_duration_seconds",
		"llm_stream_active_generation_duration_seconds", "llm_stream_stall_duration_seconds", "llm_stream_calls_total",
	} {
		_, ok := series(mfs, name, labels)
		assert.False(t, ok, "%s recorded from a marker span", name)
	}
}

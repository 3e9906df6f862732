// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// The whole path of docs/contract.md section 2: proxy and OTLP in, stall (inferring
// hedge outcomes per trace, hence groupbytrace), Jaeger out.
const jaegerPipelineConfig = `
receivers:
  sse_capture:
    proxy:
      endpoint: 127.0.0.1:${PROXY}
      upstream:
        endpoint: ${FAKELLM}
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${OTLP}
processors:
  groupbytrace:
    wait_duration: 1s
  stall:
    stall_threshold: 500ms
    infer_hedge_outcome: true
exporters:
  otlp_grpc/jaeger:
    endpoint: ${JAEGER}
    tls:
      insecure: true
service:
  pipelines:
    traces:
      receivers: [sse_capture, otlp]
      processors: [groupbytrace, stall]
      exporters: [otlp_grpc/jaeger]
`

func startFakellm(t *testing.T) string {
	t.Helper()
	port := freePort(t)
	p := start(t, "fakellm", binary(t, "STREAMSTALL_FAKELLM", "fakellm"), "-addr", fmt.Sprintf("127.0.0.1:%d", port), "-profile", "steady", "-time-factor", "0.01")
	u := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, p, u+"/_fakellm/requests", http.StatusOK)
	return u
}

// chat streams one OpenAI chat completion through the proxy like `curl -N`,
// with fakellm's timing script and extra headers, and reads it to the end.
func chat(ctx context.Context, t *testing.T, proxy, model, script string, hdr map[string]string) {
	t.Helper()
	require.NoError(t, chatErr(ctx, proxy, model, script, hdr))
}

// chatErr is chat for a goroutine other than the test's, which must not
// stop the test itself: it returns what went wrong.
func chatErr(ctx context.Context, proxy, model, script string, hdr map[string]string) error {
	body := fmt.Sprintf(`{"model":%q,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, model)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxy+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-e2e")
	req.Header.Set(fakellm.HeaderScript, script)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return err
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	case !strings.Contains(string(b), "data: [DONE]"):
		return fmt.Errorf("no data: [DONE] in %q", b)
	}
	return nil
}

// TestJaegerEndToEnd drives streams with stalls through the proxy, a hedged
// pair and an OpenLLMetry span through OTLP, then asks Jaeger's own query
// API for the enriched spans and searches them by tag.
func TestJaegerEndToEnd(t *testing.T) {
	j := startJaeger(t)
	fake := startFakellm(t)
	proxyPort, otlpPort := freePort(t), freePort(t)
	collector(t, fill(jaegerPipelineConfig, "PROXY", proxyPort, "FAKELLM", fake, "OTLP", otlpPort,
		"JAEGER", j.OTLPGRPC))
	proxy := fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Two stalls (800 and 900 ms > 500 ms), keepalives during the second
	// must not split or hide it.
	chat(ctx, t, proxy, "stall-model", `{"ttft_ms":50,"gaps_ms":[10,10,800,10,10,900,10],"keepalive_every_ms":200}`, nil)
	// A steady stream: no stall.
	chat(ctx, t, proxy, "steady-model", `{"ttft_ms":20,"gaps_ms":[10,10,10,10]}`, nil)
	// A hedged pair of one trace, outcome unknown to the client: attempt 0
	// starts first but its first chunk comes after attempt 1's, so the
	// processor judges attempt 1 the winner (FIRST_DELIVERED).
	trace := "4bf92f3577b34da6a3ce929d0e0e4736"
	pair := make(chan error, 1)
	go func() {
		pair <- chatErr(ctx, proxy, "hedge-model", `{"ttft_ms":700,"gaps_ms":[10,10]}`, map[string]string{
			"traceparent": "00-" + trace + "-00f067aa0ba902b7-01",
			"baggage":     "llm.hedge.group_id=e2e-group,llm.hedge.attempt=0",
		})
	}()
	time.Sleep(100 * time.Millisecond)
	chat(ctx, t, proxy, "hedge-model", `{"ttft_ms":50,"gaps_ms":[10,10]}`, map[string]string{
		"traceparent": "00-" + trace + "-00f067aa0ba902b7-01",
		"baggage":     "llm.hedge.group_id=e2e-group,llm.hedge.attempt=1,llm.hedge.trigger=ttft",
	})
	require.NoError(t, <-pair, "attempt 0 of the pair")

	// An OpenLLMetry-shaped span through OTLP.
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(semconv.AttrServiceName, "openllmetry-app")
	ss := rs.ScopeSpans().AppendEmpty()
	streamingSpan(ss, "openai.chat", semconv.EventChunkLegacy, time.Now().Add(-time.Minute), 100, 150, 200, 3200, 3250, 9250, 9300, 9350)
	body, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	status, resp, err := postJSON(ctx, fmt.Sprintf("http://127.0.0.1:%d/v1/traces", otlpPort), body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, resp)

	proxyService := waitService(ctx, t, j, "openllmetry-app")
	assert.Equal(t, "sse_capture", proxyService, "without service_name the proxy's spans are filed under its component ID")

	// Tag search: the two-stall stream, and only it.
	var stalled []harness.JaegerTrace
	eventually(t, 30*time.Second, "jaeger finds llm.stream.stall_count=2", func() error {
		stalled, err = j.FindTraces(ctx, proxyService, map[string]string{semconv.AttrStallCount: "2"})
		if err == nil && len(stalled) == 0 {
			err = errNotYet
		}
		return err
	})
	require.Len(t, stalled, 1)
	sp := stalled[0].Spans[0]
	assert.Equal(t, "chat stall-model", sp.OperationName)
	assertTag(t, sp, semconv.AttrChunkCount, 8.0)
	assertTag(t, sp, semconv.AttrStallThresholdMs, 500.0)
	stallMs, _ := sp.Tag(semconv.AttrStallMs)
	assert.InDelta(t, 1700.0, stallMs, 60, "stall_ms within a few ms of the script's 800 + 900")
	var stallLogs []float64
	for _, l := range sp.Logs {
		fields := map[string]any{}
		for _, f := range l.Fields {
			fields[f.Key] = f.Value
		}
		if fields["event"] == semconv.EventStall {
			stallLogs = append(stallLogs, fields[semconv.AttrStallEventDurationMs].(float64))
			assert.NotNil(t, fields[semconv.AttrStallEventAfterChunk])
		}
	}
	require.Len(t, stallLogs, 2, "one llm.stream.stall event per stall")
	assert.InDelta(t, 800, stallLogs[0], 40)
	assert.InDelta(t, 900, stallLogs[1], 40)

	// Tag search: the hedge loser, judged by inference.
	var losers []harness.JaegerTrace
	eventually(t, 30*time.Second, "jaeger finds llm.hedge.loser=true", func() error {
		losers, err = j.FindTraces(ctx, proxyService, map[string]string{semconv.AttrHedgeLoser: "true"})
		if err == nil && len(losers) == 0 {
			err = errNotYet
		}
		return err
	})
	require.Len(t, losers, 1)
	require.Equal(t, trace, losers[0].TraceID)
	outcomes := map[float64]any{}
	for _, s := range losers[0].Spans {
		attempt, _ := s.Tag(semconv.AttrHedgeAttempt)
		outcome, _ := s.Tag(semconv.AttrHedgeOutcome)
		outcomes[attempt.(float64)] = outcome
		inferred, _ := s.Tag(semconv.AttrHedgeOutcomeInferred)
		assert.Equal(t, true, inferred)
	}
	assert.Equal(t, map[float64]any{0: semconv.HedgeOutcomeLoser, 1: semconv.HedgeOutcomeWinner}, outcomes)

	// The OpenLLMetry span, enriched like docs/contract.md's worked example.
	var ol []harness.JaegerTrace
	eventually(t, 30*time.Second, "jaeger has the OpenLLMetry span", func() error {
		ol, err = j.FindTraces(ctx, "openllmetry-app", map[string]string{semconv.AttrStallMs: "9000"})
		if err == nil && len(ol) == 0 {
			err = errNotYet
		}
		return err
	})
	assertTag(t, ol[0].Spans[0], semconv.AttrActiveGenerationMs, 250.0)
	assertTag(t, ol[0].Spans[0], semconv.AttrMaxStallMs, 6000.0)
}

func assertTag(t *testing.T, sp harness.JaegerSpan, key string, want any) {
	t.Helper()
	got, ok := sp.Tag(key)
	if assert.True(t, ok, "span %s has no tag %s", sp.OperationName, key) {
		assert.Equal(t, want, got, key)
	}
}

// waitService waits until Jaeger lists other (the OTLP app) and returns the
// service the proxy's spans are filed under.
func waitService(ctx context.Context, t *testing.T, j *harness.Jaeger, other string) string {
	t.Helper()
	var proxyService string
	eventually(t, 30*time.Second, "jaeger lists both services", func() error {
		services, err := j.Services(ctx)
		if err != nil {
			return err
		}
		seen := false
		proxyService = ""
		for _, s := range services {
			if s == other {
				seen = true
			} else if s != "jaeger" {
				proxyService = s
			}
		}
		if !seen || proxyService == "" {
			return fmt.Errorf("services %v: %w", services, errNotYet)
		}
		return nil
	})
	return proxyService
}

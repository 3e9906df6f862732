// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// The guarded proxy with fakellm as primary and a second fakellm as its
// alternate; the alternate's client settings script every request it gets
// (confighttp headers replace the client's), the client scripts the
// primary. Spans go to an OTLP sink and, through stall_metrics, to a
// Prometheus endpoint.
const guardConfig = `
receivers:
  sse_capture:
    proxy:
      endpoint: 127.0.0.1:${PROXY}
      upstream:
        endpoint: ${PRIMARY}
      guard:
        stall_timeout: ${STALL}
        hedge:
          delay: ${DELAY}
          max_attempts: 2
          alternates:
            - endpoint: ${ALTERNATE}
              headers:
                X-Fakellm-Script: '${ALTSCRIPT}'
processors:
  stall:
    stall_threshold: 500ms
` + sinkAndMetrics + `service:
  pipelines:
    traces:
      receivers: [sse_capture]
      processors: [stall]
      exporters: [otlp_http, stall_metrics]
    metrics:
      receivers: [stall_metrics]
      exporters: [prometheus]
`

const (
	guardDelay = 200 * time.Millisecond
	guardStall = time.Second
	// altScript: the alternate's first content chunk 40 ms after the request.
	altScript = `{"ttft_ms":40,"gaps_ms":[5,5,5]}`
)

// scriptedTap sends fakellm's script with every request and records the
// response bytes the client read.
type scriptedTap struct {
	script string
	rec    tapTransport
}

func (s *scriptedTap) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set(fakellm.HeaderScript, s.script)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &tapBody{ReadCloser: resp.Body, tt: &s.rec}
	return resp, nil
}

// ended returns fakellm's records of model, once n of them are over.
func ended(ctx context.Context, t *testing.T, fake, model string, n int) []fakellm.Request {
	t.Helper()
	var out []fakellm.Request
	eventually(t, 20*time.Second, fmt.Sprintf("%d finished requests for %s at %s", n, model, fake), func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fake+fakellm.RequestsPath, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		var all []fakellm.Request
		if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
			return err
		}
		out = out[:0]
		for _, r := range all {
			if r.Model == model {
				if r.End.IsZero() {
					return errNotYet
				}
				out = append(out, r)
			}
		}
		if len(out) != n {
			return fmt.Errorf("%d of %d: %w", len(out), n, errNotYet)
		}
		return nil
	})
	return out
}

func sentBody(ctx context.Context, t *testing.T, fake string, seq int) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s%s/%d/body", fake, fakellm.RequestsPath, seq), nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return b
}

// modelSpans waits for n spans of model at the sink and orders them by
// llm.hedge.attempt (0 when absent).
func modelSpans(t *testing.T, s *harness.Sink, model string, n int) []ptrace.Span {
	t.Helper()
	var out []ptrace.Span
	eventually(t, 20*time.Second, fmt.Sprintf("%d spans of %s at the sink", n, model), func() error {
		out = out[:0]
		for _, sp := range s.Spans() {
			if v, ok := sp.Attributes().Get(semconv.AttrRequestModel); ok && v.Str() == model {
				out = append(out, sp.Span)
			}
		}
		if len(out) < n {
			return fmt.Errorf("%d of %d: %w", len(out), n, errNotYet)
		}
		return nil
	})
	require.Len(t, out, n, "no more spans than attempts")
	ordered := make([]ptrace.Span, n)
	for _, sp := range out {
		i := int64(0)
		if v, ok := sp.Attributes().Get(semconv.AttrHedgeAttempt); ok {
			i = v.Int()
		}
		require.Less(t, i, int64(n))
		ordered[i] = sp
	}
	return ordered
}

func strAttr(sp ptrace.Span, key string) string {
	v, ok := sp.Attributes().Get(key)
	if !ok {
		return ""
	}
	return v.AsString()
}

func portOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u.Port()
}

// TestGuardEndToEnd runs the proxy's guard in the ocb-built collector with
// the official SDKs in front and two fakellm processes behind: a slow
// primary loses to the alternate, a 503 fails over at once, a stall after
// commit ends with the SDK's own error, and stall_metrics counts winners.
func TestGuardEndToEnd(t *testing.T) {
	sink := startSink(t)
	primary, alternate := startFakellm(t), startFakellm(t)
	proxyPort, promPort := freePort(t), freePort(t)
	collector(t, fill(guardConfig, "PROXY", proxyPort, "PRIMARY", primary, "ALTERNATE", alternate, "ALTSCRIPT", altScript,
		"STALL", guardStall, "DELAY", guardDelay, "SINK", sink.URL, "PROM", promPort))
	proxy := fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("slow primary loses to the alternate", func(t *testing.T) {
		const model = "e2e-guard-hedge"
		tap := &scriptedTap{script: `{"ttft_ms":3000,"gaps_ms":[5,5]}`}
		client := openai.NewClient(openaioption.WithBaseURL(proxy+"/v1/"), openaioption.WithAPIKey("sk-e2e"),
			openaioption.WithMaxRetries(0), openaioption.WithHTTPClient(&http.Client{Transport: tap}))
		begin := time.Now()
		s := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		require.NoError(t, s.Err())
		took := time.Since(begin)
		t.Logf("the call took %s", took)
		assert.Less(t, took, 2*time.Second, "the alternate answered, not the primary 3 s late")
		assert.GreaterOrEqual(t, took, guardDelay, "the alternate started only at the hedge delay")

		alt := ended(ctx, t, alternate, model, 1)[0]
		assert.Equal(t, sentBody(ctx, t, alternate, alt.Seq), tap.rec.bytes(), "the client read exactly the alternate's bytes")
		require.Len(t, acc.Choices, 1)
		assert.Equal(t, alt.Text, acc.Choices[0].Message.Content)
		prim := ended(ctx, t, primary, model, 1)[0]
		assert.True(t, prim.Disconnected, "the primary's request was cancelled")
		assert.Empty(t, prim.ChunkTimes, "the primary never got to its first chunk")
		t.Logf("the alternate got its request %s after the primary", alt.Start.Sub(prim.Start))
		assert.InDelta(t, guardDelay.Seconds(), alt.Start.Sub(prim.Start).Seconds(), 0.08, "the alternate got its request at the hedge delay")

		sp := modelSpans(t, sink, model, 2)
		loser, winner := sp[0], sp[1]
		assert.Equal(t, winner.TraceID(), loser.TraceID(), "winner and loser in one trace")
		assert.NotEqual(t, winner.SpanID(), loser.SpanID())
		assert.Equal(t, semconv.HedgeOutcomeWinner, strAttr(winner, semconv.AttrHedgeOutcome))
		assert.Equal(t, semconv.HedgeOutcomeLoser, strAttr(loser, semconv.AttrHedgeOutcome))
		assert.Equal(t, semconv.HedgeTriggerTTFT, strAttr(winner, semconv.AttrHedgeTrigger))
		assert.Equal(t, strconv.FormatInt(guardDelay.Milliseconds(), 10), strAttr(winner, semconv.AttrHedgeDelayMs))
		assert.Equal(t, portOf(t, alternate), strAttr(winner, semconv.AttrServerPort))
		assert.Equal(t, portOf(t, primary), strAttr(loser, semconv.AttrServerPort))
		assert.Contains(t, alt.Header.Get("Traceparent"), winner.SpanID().String(), "the alternate's request names the winner's span")
		assert.Contains(t, prim.Header.Get("Traceparent"), loser.SpanID().String(), "the primary's request names the loser's span")

		// stall_metrics counts the call once, by its winner; the loser only
		// as a hedge attempt.
		var mfs map[string]*dto.MetricFamily
		m := map[string]string{"gen_ai_request_model": model}
		attempt := func(outcome string) map[string]string {
			return map[string]string{"gen_ai_request_model": model, "llm_hedge_outcome": outcome}
		}
		// Both spans have reached the connector once both attempts are in
		// the scrape; the figures below are then final.
		eventually(t, 30*time.Second, "the scrape has both attempts of "+model, func() error {
			var err error
			if mfs, err = scrape(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", promPort)); err != nil {
				return err
			}
			for _, o := range []string{semconv.HedgeOutcomeWinner, semconv.HedgeOutcomeLoser} {
				if _, ok := series(mfs, "llm_hedge_attempts_total", attempt(o)); !ok {
					return fmt.Errorf("no %s: %w", o, errNotYet)
				}
			}
			return nil
		})
		value := func(name string, labels map[string]string) *dto.Metric {
			s, ok := series(mfs, name, labels)
			require.True(t, ok, "%s%v not in the scrape", name, labels)
			return s
		}
		assert.Equal(t, 1.0, value("llm_stream_calls_total", m).GetCounter().GetValue(), "one call, the loser not counted")
		ttft := value("gen_ai_client_operation_time_to_first_chunk_seconds", m).GetHistogram()
		assert.EqualValues(t, 1, ttft.GetSampleCount(), "the winner's TTFT only")
		// The winner's TTFT runs from its own attempt's start, as fakellm
		// saw it, not from the call's (which was guardDelay earlier).
		assert.InDelta(t, alt.ChunkOffsetsMillis[0]/1e3, ttft.GetSampleSum(), 0.03)
		for _, o := range []string{semconv.HedgeOutcomeWinner, semconv.HedgeOutcomeLoser} {
			assert.Equal(t, 1.0, value("llm_hedge_attempts_total", attempt(o)).GetCounter().GetValue(), o)
		}
		assert.EqualValues(t, 1, value("llm_hedge_wasted_duration_seconds", m).GetHistogram().GetSampleCount(), "the loser's time is waste")
	})

	t.Run("a 503 is replaced at once", func(t *testing.T) {
		const model = "e2e-guard-failover"
		tap := &scriptedTap{script: `{"status":503}`}
		client := anthropic.NewClient(anthropicoption.WithBaseURL(proxy), anthropicoption.WithAPIKey("sk-ant-e2e"),
			anthropicoption.WithMaxRetries(0), anthropicoption.WithHTTPClient(&http.Client{Transport: tap}))
		s := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model: model, MaxTokens: 64, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
		})
		var msg anthropic.Message
		for s.Next() {
			require.NoError(t, msg.Accumulate(s.Current()))
		}
		require.NoError(t, s.Err(), "the client never sees the 503")

		alt := ended(ctx, t, alternate, model, 1)[0]
		prim := ended(ctx, t, primary, model, 1)[0]
		assert.Equal(t, http.StatusServiceUnavailable, prim.Status)
		assert.Equal(t, sentBody(ctx, t, alternate, alt.Seq), tap.rec.bytes(), "the client read exactly the alternate's bytes")
		require.NotEmpty(t, msg.Content)
		assert.Equal(t, alt.Text, msg.Content[0].Text)
		t.Logf("the alternate got its request %s after the primary", alt.Start.Sub(prim.Start))
		assert.Less(t, alt.Start.Sub(prim.Start), guardDelay/2, "the failover did not wait for the hedge delay")

		sp := modelSpans(t, sink, model, 2)
		assert.Equal(t, sp[0].TraceID(), sp[1].TraceID())
		assert.Equal(t, "503", strAttr(sp[0], semconv.AttrHTTPStatusCode))
		assert.Equal(t, ptrace.StatusCodeError, sp[0].Status().Code())
		assert.Equal(t, semconv.HedgeTriggerError, strAttr(sp[1], semconv.AttrHedgeTrigger))
		assert.Equal(t, semconv.HedgeOutcomeWinner, strAttr(sp[1], semconv.AttrHedgeOutcome))
	})

	// Two content chunks, then a minute of silence with a keepalive every
	// 100 ms: the keepalives must not hold the watchdog off.
	const stallScript = `{"ttft_ms":10,"gaps_ms":[10,60000],"keepalive_every_ms":100}`
	stallCase := func(t *testing.T, model string, run func(hc *http.Client) (chunks int, last time.Time, err error)) {
		t.Helper()
		tap := &scriptedTap{script: stallScript}
		chunks, last, err := run(&http.Client{Transport: tap})
		silence := time.Since(last)
		t.Logf("the error came %s after the last content chunk", silence)
		assert.Equal(t, 2, chunks)
		assert.ErrorContains(t, err, "stream stalled")
		assert.GreaterOrEqual(t, silence, guardStall-50*time.Millisecond, "not before stall_timeout")
		assert.Less(t, silence, guardStall+500*time.Millisecond, "at stall_timeout, keepalives notwithstanding")

		prim := ended(ctx, t, primary, model, 1)[0]
		assert.True(t, prim.Disconnected, "the upstream request was closed")
		t.Logf("%d keepalives during the silence", len(prim.KeepaliveTimes))
		assert.GreaterOrEqual(t, len(prim.KeepaliveTimes), 5, "keepalives flowed during the silence")
		sp := modelSpans(t, sink, model, 1)[0]
		assert.Equal(t, "stall_timeout", strAttr(sp, semconv.AttrErrorType))
		fr, ok := sp.Attributes().Get(semconv.AttrResponseFinishReasons)
		require.True(t, ok)
		assert.Equal(t, "error", fr.Slice().At(fr.Slice().Len()-1).Str())
		assert.Equal(t, strconv.FormatInt(guardStall.Milliseconds(), 10), strAttr(sp, semconv.AttrStallTimeoutMs))
		// A stall the guard cut is a stall: the silence it ended is the
		// last one, at least stall_timeout long.
		assert.Equal(t, "1", strAttr(sp, semconv.AttrStallCount), "the cut silence is a stall")
		cut, ok := sp.Attributes().Get(semconv.AttrStallCutMs)
		require.True(t, ok, "the cut silence is a figure")
		assert.GreaterOrEqual(t, cut.Double(), float64((guardStall - 50*time.Millisecond).Milliseconds()))
	}
	t.Run("a stall after commit ends with openai-go's stream error", func(t *testing.T) {
		const model = "e2e-guard-stall-openai"
		stallCase(t, model, func(hc *http.Client) (int, time.Time, error) {
			client := openai.NewClient(openaioption.WithBaseURL(proxy+"/v1/"), openaioption.WithAPIKey("sk-e2e"),
				openaioption.WithMaxRetries(0), openaioption.WithHTTPClient(hc))
			s := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
				Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			n, last := 0, time.Time{}
			for s.Next() {
				if c := s.Current(); len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
					n, last = n+1, time.Now()
				}
			}
			_, ok := errors.AsType[*ssestream.StreamError](s.Err())
			assert.True(t, ok, "%T %v", s.Err(), s.Err())
			return n, last, s.Err()
		})
	})
	t.Run("a stall after commit ends with anthropic-sdk-go's error", func(t *testing.T) {
		const model = "e2e-guard-stall-anthropic"
		stallCase(t, model, func(hc *http.Client) (int, time.Time, error) {
			client := anthropic.NewClient(anthropicoption.WithBaseURL(proxy), anthropicoption.WithAPIKey("sk-ant-e2e"),
				anthropicoption.WithMaxRetries(0), anthropicoption.WithHTTPClient(hc))
			s := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
				Model: model, MaxTokens: 64, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
			})
			n, last := 0, time.Time{}
			for s.Next() {
				if s.Current().Type == "content_block_delta" {
					n, last = n+1, time.Now()
				}
			}
			ae, ok := errors.AsType[*anthropic.Error](s.Err())
			if assert.True(t, ok, "%T %v", s.Err(), s.Err()) {
				assert.Contains(t, ae.RawJSON(), "timeout_error")
			}
			return n, last, s.Err()
		})
	})
}

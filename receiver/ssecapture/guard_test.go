// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadatatest"
)

// guardFixture is a guarded proxy in front of two fakellm servers, the
// primary and an alternate, each answering every request with its own
// script.
type guardFixture struct {
	primary, alternate       *fakellm.Server
	primaryURL, alternateURL string
	rcv                      *sseCaptureReceiver
	sink                     *consumertest.TracesSink
	tel                      *componenttest.Telemetry
	proxyURL                 string
}

func scriptJSON(t *testing.T, s fakellm.Script) string {
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}

func newGuardFixture(t *testing.T, primary, alternate fakellm.Script, g func(*GuardConfig)) *guardFixture {
	t.Helper()
	f := &guardFixture{sink: new(consumertest.TracesSink), tel: componenttest.NewTelemetry()}
	t.Cleanup(func() { require.NoError(t, f.tel.Shutdown(context.Background())) })
	var err error
	f.primary, err = fakellm.New(fakellm.Config{Profile: scriptJSON(t, primary), Seed: 1})
	require.NoError(t, err)
	f.alternate, err = fakellm.New(fakellm.Config{Profile: scriptJSON(t, alternate), Seed: 2})
	require.NoError(t, err)
	p, a := httptest.NewServer(f.primary), httptest.NewServer(f.alternate)
	t.Cleanup(p.Close)
	t.Cleanup(a.Close)
	f.primaryURL, f.alternateURL = p.URL, a.URL

	cfg := NewFactory().CreateDefaultConfig().(*Config)
	pc := cfg.Proxy.GetOrInsertDefault()
	pc.NetAddr.Endpoint = "127.0.0.1:0"
	pc.Upstream.Endpoint = p.URL
	gc := pc.Guard.GetOrInsertDefault()
	alt := confighttp.NewDefaultClientConfig()
	alt.Endpoint = a.URL
	gc.Hedge.Alternates = []AlternateConfig{{ClientConfig: alt}}
	g(gc)
	require.NoError(t, cfg.Validate())
	f.rcv = startReceiver(t, cfg, f.sink, componenttest.NewNopHost(), f.tel)
	f.proxyURL = "http://" + f.rcv.addrs["proxy"].String()
	return f
}

func (f *guardFixture) spans(t *testing.T, n int) []ptrace.Span {
	t.Helper()
	return (&fixture{sink: f.sink}).spans(t, n)
}

// byAttempt orders the spans of one call by llm.hedge.attempt.
func byAttempt(t *testing.T, spans []ptrace.Span) []ptrace.Span {
	t.Helper()
	out := make([]ptrace.Span, len(spans))
	for _, s := range spans {
		out[attr(t, s, semconv.AttrHedgeAttempt).Int()] = s
	}
	return out
}

func TestGuardSlowPrimaryLosesToTheAlternate(t *testing.T) {
	f := newGuardFixture(t,
		fakellm.Script{TTFTMillis: 3000, GapsMillis: []float64{5, 5}},
		fakellm.Script{TTFTMillis: 30, GapsMillis: []float64{5, 5, 5}},
		func(g *GuardConfig) { g.Hedge.Delay = AutoDuration(150 * time.Millisecond) })
	start := time.Now()
	run := openAIChat(t, f.proxyURL, "")
	assert.Less(t, time.Since(start), 2*time.Second, "the hedge answered, not the slow primary")

	assert.Equal(t, sentWhole(t, f.alternate), run.wire, "the client got the alternate's bytes exactly")
	reqs, err := f.primary.WaitFor(testContext(t), 1)
	require.NoError(t, err)
	assert.True(t, reqs[0].Disconnected, "the primary's request was cancelled")

	spans := byAttempt(t, f.spans(t, 2))
	winner, loser := spans[1], spans[0]
	assert.Equal(t, winner.TraceID(), loser.TraceID(), "one trace")
	assert.Equal(t, winner.ParentSpanID(), loser.ParentSpanID(), "siblings")
	assert.NotEqual(t, winner.SpanID(), loser.SpanID())
	assert.Equal(t, semconv.HedgeOutcomeWinner, attr(t, winner, semconv.AttrHedgeOutcome).Str())
	assert.Equal(t, semconv.HedgeOutcomeLoser, attr(t, loser, semconv.AttrHedgeOutcome).Str())
	assert.Equal(t, semconv.HedgeTriggerTTFT, attr(t, winner, semconv.AttrHedgeTrigger).Str())
	assert.InDelta(t, 150.0, attr(t, winner, semconv.AttrHedgeDelayMs).Double(), 0.001)
	assert.Equal(t, "fallback", attr(t, winner, semconv.AttrHedgeDelaySource).Str())
	assert.Equal(t, attr(t, winner, semconv.AttrHedgeGroupID).Str(), attr(t, loser, semconv.AttrHedgeGroupID).Str())
	assert.Equal(t, portOf(t, f.alternateURL), attr(t, winner, semconv.AttrServerPort).Int())
	assert.Equal(t, portOf(t, f.primaryURL), attr(t, loser, semconv.AttrServerPort).Int())
	assert.Len(t, chunkTimes(winner), 4)
	assert.Empty(t, chunkTimes(loser))
	_, hasErr := loser.Attributes().Get(semconv.AttrErrorType)
	assert.False(t, hasErr, "a dropped loser did nothing wrong")
	assert.Greater(t, winner.StartTimestamp(), loser.StartTimestamp(), "the winner's span starts with its attempt")
	tr := f.alternate.Requests()[0].Header.Get("Traceparent")
	assert.Contains(t, tr, winner.SpanID().String(), "the alternate's request names the winner's span")

	metadatatest.AssertEqualReceiverSseCaptureHedgesStarted(t, f.tel, []metricdata.DataPoint[int64]{{Value: 1}},
		metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualReceiverSseCaptureHedgesWon(t, f.tel, []metricdata.DataPoint[int64]{{Value: 1}},
		metricdatatest.IgnoreTimestamp())
}

func TestGuardReplaces503AtOnce(t *testing.T) {
	f := newGuardFixture(t,
		fakellm.Script{Status: http.StatusServiceUnavailable},
		fakellm.Script{TTFTMillis: 10, GapsMillis: []float64{5}},
		func(*GuardConfig) {}) // no hedge delay: failover only
	start := time.Now()
	run := anthropicMessages(t, f.proxyURL, "")
	assert.Less(t, time.Since(start), time.Second)
	assert.Equal(t, sentWhole(t, f.alternate), run.wire)
	spans := byAttempt(t, f.spans(t, 2))
	assert.Equal(t, int64(http.StatusServiceUnavailable), attr(t, spans[0], semconv.AttrHTTPStatusCode).Int())
	assert.Equal(t, ptrace.StatusCodeError, spans[0].Status().Code())
	assert.Equal(t, semconv.HedgeTriggerError, attr(t, spans[1], semconv.AttrHedgeTrigger).Str())
	assert.Equal(t, ptrace.StatusCodeUnset, spans[1].Status().Code())
}

func TestGuardStallEndsWithTheSDKsError(t *testing.T) {
	const timeout = 400 * time.Millisecond
	stall := fakellm.Script{TTFTMillis: 10, GapsMillis: []float64{10, 60000}, KeepaliveEveryMillis: 50}
	for _, sdk := range []string{"openai", "anthropic"} {
		t.Run(sdk, func(t *testing.T) {
			f := newGuardFixture(t, stall, stall, func(g *GuardConfig) { g.StallTimeout = AutoDuration(timeout) })
			hc, _ := tappedClient(t)
			var err error
			var chunks int
			var lastChunk time.Time
			switch sdk {
			case "openai":
				client := openai.NewClient(openaioption.WithBaseURL(f.proxyURL+"/v1/"), openaioption.WithAPIKey("k"),
					openaioption.WithMaxRetries(0), openaioption.WithHTTPClient(hc))
				s := client.Chat.Completions.NewStreaming(testContext(t), openai.ChatCompletionNewParams{
					Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
				})
				for s.Next() {
					if len(s.Current().Choices) > 0 && s.Current().Choices[0].Delta.Content != "" {
						chunks, lastChunk = chunks+1, time.Now()
					}
				}
				err = s.Err()
				_, ok := errors.AsType[*ssestream.StreamError](err)
				assert.True(t, ok, "%T %v", err, err)
			case "anthropic":
				client := anthropic.NewClient(anthropicoption.WithBaseURL(f.proxyURL), anthropicoption.WithAPIKey("k"),
					anthropicoption.WithMaxRetries(0), anthropicoption.WithHTTPClient(hc))
				s := client.Messages.NewStreaming(testContext(t), anthropic.MessageNewParams{
					Model: "claude-x", MaxTokens: 64,
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
				})
				for s.Next() {
					if s.Current().Type == "content_block_delta" {
						chunks, lastChunk = chunks+1, time.Now()
					}
				}
				err = s.Err()
				_, ok := errors.AsType[*anthropic.Error](err)
				assert.True(t, ok, "%T %v", err, err)
			}
			silence := time.Since(lastChunk)
			assert.Equal(t, 2, chunks)
			assert.ErrorContains(t, err, "stream stalled")
			assert.GreaterOrEqual(t, silence, timeout-20*time.Millisecond, "not before the timeout")
			assert.Less(t, silence, timeout+time.Second, "keepalives every 50 ms did not delay it")

			reqs, werr := f.primary.WaitFor(testContext(t), 1)
			require.NoError(t, werr)
			assert.True(t, reqs[0].Disconnected, "the upstream request was closed")
			assert.NotEmpty(t, reqs[0].KeepaliveTimes, "keepalives flowed during the silence")
			span := f.spans(t, 1)[0]
			assert.Equal(t, "stall_timeout", attr(t, span, semconv.AttrErrorType).Str())
			fr := attr(t, span, semconv.AttrResponseFinishReasons).Slice()
			assert.Equal(t, "error", fr.At(fr.Len()-1).Str())
			assert.InDelta(t, float64(timeout.Milliseconds()), attr(t, span, semconv.AttrStallTimeoutMs).Double(), 0.001)
			assert.Len(t, chunkTimes(span), 2)
		})
	}
}

// TestGuardWithoutHedgingPassesStreamsThrough: a guard that only watches
// for stalls hands the client the upstream's bytes unchanged.
func TestGuardWithoutHedgingPassesStreamsThrough(t *testing.T) {
	f := newGuardFixture(t, fakellm.Script{TTFTMillis: 10, GapsMillis: []float64{5, 5, 5}, KeepaliveEveryMillis: 2},
		fakellm.Script{}, func(g *GuardConfig) { g.StallTimeout = AutoDuration(10 * time.Second) })
	for _, run := range []func(t *testing.T, baseURL, profile string) sdkRun{openAIChat, openAIResponses, anthropicMessages} {
		f.primary.Reset()
		got := run(t, f.proxyURL, "")
		_, err := f.primary.WaitFor(testContext(t), 1) // its handler has recorded every byte
		require.NoError(t, err)
		assert.Equal(t, sentWhole(t, f.primary), got.wire)
	}
}

func portOf(t *testing.T, raw string) int64 {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	port, err := strconv.ParseInt(u.Port(), 10, 64)
	require.NoError(t, err)
	return port
}

// TestGuardCallThatNeverReachesTheTransport: ReverseProxy answers some
// requests itself, before any attempt (an Upgrade header it refuses); the
// guarded call still ends cleanly, with its span, and the proxy serves on.
func TestGuardCallThatNeverReachesTheTransport(t *testing.T) {
	f := newGuardFixture(t,
		fakellm.Script{TTFTMillis: 10, GapsMillis: []float64{5}},
		fakellm.Script{TTFTMillis: 10, GapsMillis: []float64{5}},
		func(g *GuardConfig) { g.Hedge.Delay = AutoDuration(time.Second) })
	body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	conn, err := net.Dial("tcp", f.rcv.addrs["proxy"].String())
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	_, err = fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"Connection: Upgrade\r\nUpgrade: \xe9\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "the proxy answered")
	_ = resp.Body.Close()
	assert.GreaterOrEqual(t, resp.StatusCode, 400)
	f.spans(t, 1)

	run := openAIChat(t, f.proxyURL, "")
	assert.NotEmpty(t, run.wire, "the proxy serves on")
}

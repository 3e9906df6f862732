// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/ingest"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadatatest"
)

// shapes are request bodies for the four APIs the proxy understands.
var shapes = []struct {
	name, path, body, op, provider string
}{
	{"chat", "/v1/chat/completions", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"secret prompt text"}]}`, "chat", "openai"},
	{"completions", "/v1/completions", `{"model":"gpt-3.5-turbo-instruct","stream":true,"stream_options":{"include_usage":true},"prompt":"secret prompt text"}`, "text_completion", "openai"},
	{"responses", "/v1/responses", `{"model":"gpt-4.1","stream":true,"input":"secret prompt text"}`, "chat", "openai"},
	{"messages", "/v1/messages", `{"model":"claude-sonnet-4-5","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"secret prompt text"}]}`, "chat", "anthropic"},
}

func scriptHeader(t *testing.T, s fakellm.Script) http.Header {
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return http.Header{fakellm.HeaderScript: {string(b)}}
}

// TestProxySpanMatchesScript streams a scripted timing with two stalls in
// each API shape: the span has exactly one chunk event per content chunk,
// and the figures derived from it place the stalls after the same chunks,
// with the same lengths within a few milliseconds, as what fakellm sent.
func TestProxySpanMatchesScript(t *testing.T) {
	// The threshold sits far from both the short gaps and the stalls, so
	// that a loaded CI machine stretching a 5 ms gap cannot turn it into a
	// stall (fakellm's timers, not the proxy, are what a load delays).
	const threshold = 200 * time.Millisecond
	script := fakellm.Script{TTFTMillis: 20, GapsMillis: []float64{5, 5, 400, 5, 5, 5, 600, 5}}
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			// The proxy stamps a chunk when its read returns: on a loaded
			// machine (the race detector, test packages in parallel) its
			// goroutine can wait a scheduler slice of several ms first. A
			// stamp that is off is retried on a fresh stream, up to three
			// times; what is wrong every time fails.
			var (
				span ptrace.Span
				rec  fakellm.Request
			)
			for attempt := 1; ; attempt++ {
				f := newFixture(t, nil)
				resp, body := post(t, testClient(t), f.proxyURL+sh.path, sh.body, scriptHeader(t, script))
				require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
				rec = f.waitRequest(t, 0)
				assert.Equal(t, sentWhole(t, f.fake), body)
				span = f.spans(t, 1)[0]

				chunks := chunkTimes(span)
				require.Len(t, chunks, len(script.GapsMillis)+1, "chunk count exact")
				got := figures.Derive(int64(span.StartTimestamp()), figures.PrepareChunkTimes(chunks), int64(threshold), nil)
				want := deriveUpstream(span, rec, threshold)
				require.Equal(t, 2, want.StallCount)
				require.Equal(t, want.StallCount, got.StallCount)
				assert.Equal(t, []int{3, 7}, []int{got.Stalls[0].AfterChunk, got.Stalls[1].AfterChunk})
				// fakellm's own timers drift from the script on a loaded machine;
				// the precise comparison is with what it actually sent, below.
				assert.InDelta(t, 400, figures.Millis(got.Stalls[0].Duration), 150)
				assert.InDelta(t, 600, figures.Millis(got.Stalls[1].Duration), 150)

				off := offBy(want, got, 5)
				if len(off) == 0 {
					break
				}
				if attempt == 3 {
					t.Errorf("the span's chunk times differ from fakellm's sends in %d attempts; the last: %s", attempt, strings.Join(off, "; "))
					break
				}
				t.Logf("attempt %d: %s; trying a fresh stream", attempt, strings.Join(off, "; "))
			}

			assert.Equal(t, sh.op, attr(t, span, semconv.AttrOperationName).Str())
			assert.Equal(t, sh.provider, attr(t, span, semconv.AttrProviderName).Str())
			assert.Equal(t, rec.Model, attr(t, span, semconv.AttrRequestModel).Str())
			assert.Equal(t, rec.ResponseID, attr(t, span, semconv.AttrResponseID).Str())
			assert.Equal(t, int64(rec.OutputTokens), attr(t, span, semconv.AttrUsageOutputTokens).Int())
			assert.Positive(t, attr(t, span, semconv.AttrResponseFinishReasons).Slice().Len())
			assert.Equal(t, ptrace.StatusCodeUnset, span.Status().Code())
			for i := range span.Events().Len() {
				kind, ok := span.Events().At(i).Attributes().Get(semconv.AttrChunkKind)
				require.True(t, ok)
				assert.Equal(t, semconv.ChunkKindText, kind.Str())
			}
			assertNoSecrets(t, span, rec.Text, "secret prompt text")
		})
	}
}

// offBy lists how the proxy's figures differ from those of fakellm's own
// send times by more than tolerance milliseconds: TTFT, and each stall's
// position and length.
func offBy(want, got figures.Figures, tolerance float64) []string {
	var off []string
	if d := figures.Millis(got.TTFT) - figures.Millis(want.TTFT); math.Abs(d) > tolerance {
		off = append(off, fmt.Sprintf("ttft %.1f ms, sent %.1f", figures.Millis(got.TTFT), figures.Millis(want.TTFT)))
	}
	for i := range want.Stalls {
		w, g := want.Stalls[i], got.Stalls[i]
		if w.AfterChunk != g.AfterChunk {
			off = append(off, fmt.Sprintf("stall %d after chunk %d, sent after %d", i, g.AfterChunk, w.AfterChunk))
		}
		if d := figures.Millis(g.Duration) - figures.Millis(w.Duration); math.Abs(d) > tolerance {
			off = append(off, fmt.Sprintf("stall %d %.1f ms, sent %.1f", i, figures.Millis(g.Duration), figures.Millis(w.Duration)))
		}
	}
	return off
}

// assertDropped waits until the receiver has counted n dropped spans, all
// for reason, in its component telemetry.
func assertDropped(t *testing.T, f *fixture, n int64, reason string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := f.tel.GetMetric("otelcol_receiver_sse_capture_spans.dropped")
		require.NoError(c, err)
		sum := got.Data.(metricdata.Sum[int64])
		require.Len(c, sum.DataPoints, 1)
		assert.Equal(c, n, sum.DataPoints[0].Value)
	}, 5*time.Second, 5*time.Millisecond)
	metadatatest.AssertEqualReceiverSseCaptureSpansDropped(t, f.tel, []metricdata.DataPoint[int64]{
		{Value: n, Attributes: attribute.NewSet(attribute.String("reason", reason))},
	}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

// TestProxyChunkKinds: tool-call and reasoning deltas are chunks of their kind.
func TestProxyChunkKinds(t *testing.T) {
	for _, content := range []string{fakellm.ContentToolCall, fakellm.ContentReasoning} {
		for _, sh := range shapes {
			if sh.name == "completions" {
				continue // the legacy API only has text
			}
			t.Run(content+"/"+sh.name, func(t *testing.T) {
				f := newFixture(t, nil)
				resp, _ := post(t, testClient(t), f.proxyURL+sh.path, sh.body, http.Header{fakellm.HeaderContent: {content}})
				require.Equal(t, http.StatusOK, resp.StatusCode)
				rec := f.waitRequest(t, 0)
				span := f.spans(t, 1)[0]
				require.Equal(t, len(rec.ChunkTimes), span.Events().Len(), "chunk count exact")
				// fakellm's reasoning answers think for the first half of
				// the chunks, then answer in text.
				for i := range span.Events().Len() {
					want := content
					if content == fakellm.ContentReasoning && i >= span.Events().Len()/2 {
						want = semconv.ChunkKindText
					}
					k, _ := span.Events().At(i).Attributes().Get(semconv.AttrChunkKind)
					assert.Equal(t, want, k.Str(), "chunk %d", i)
				}
			})
		}
	}
}

// TestProxyKeepalives: keepalives never count as chunks; with
// record_keepalives they become llm.stream.keepalive events.
func TestProxyKeepalives(t *testing.T) {
	script := fakellm.Script{TTFTMillis: 5, GapsMillis: []float64{5, 120, 5}, KeepaliveEveryMillis: 30}
	for _, record := range []bool{false, true} {
		for _, sh := range []int{0, 3} {
			t.Run(fmt.Sprintf("%s/record=%v", shapes[sh].name, record), func(t *testing.T) {
				f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.RecordKeepalives = record }))
				resp, _ := post(t, testClient(t), f.proxyURL+shapes[sh].path, shapes[sh].body, scriptHeader(t, script))
				require.Equal(t, http.StatusOK, resp.StatusCode)
				rec := f.waitRequest(t, 0)
				require.Positive(t, rec.Keepalives())
				span := f.spans(t, 1)[0]
				assert.Len(t, chunkTimes(span), 4)
				kinds := map[string]int{}
				for i := range span.Events().Len() {
					if ev := span.Events().At(i); ev.Name() == semconv.EventKeepalive {
						k, _ := ev.Attributes().Get(semconv.AttrFrameKind)
						kinds[k.Str()]++
					}
				}
				if !record {
					assert.Empty(t, kinds)
					return
				}
				assert.Equal(t, rec.Keepalives(), kinds["keepalive"], "every keepalive frame recorded: %v", kinds)
				assert.Equal(t, 1, kinds["done"], "%v", kinds)
				assert.Positive(t, kinds["meta"], "%v", kinds)
			})
		}
	}
}

func TestProxyNonStreaming(t *testing.T) {
	f := newFixture(t, nil)
	body := strings.Replace(shapes[0].body, `"stream":true`, `"stream":false`, 1)
	resp, got := post(t, testClient(t), f.proxyURL+shapes[0].path, body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	rec := f.waitRequest(t, 0)
	assert.Equal(t, sentWhole(t, f.fake), got)
	span := f.spans(t, 1)[0]
	assert.Zero(t, span.Events().Len(), "a non-streaming call has no chunk events")
	assert.False(t, attr(t, span, semconv.AttrRequestStream).Bool())
	assert.Equal(t, rec.ResponseID, attr(t, span, semconv.AttrResponseID).Str())
	assert.Equal(t, int64(rec.OutputTokens), attr(t, span, semconv.AttrUsageOutputTokens).Int())
	assert.Equal(t, "stop", attr(t, span, semconv.AttrResponseFinishReasons).Slice().At(0).Str())
	assert.Equal(t, ptrace.StatusCodeUnset, span.Status().Code())
}

func TestProxyUpstreamErrorStatus(t *testing.T) {
	for _, tc := range []struct{ profile, errType string }{
		{fakellm.ProfileHTTP429, "rate_limit_error"}, {fakellm.ProfileHTTP500, "api_error"},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			f := newFixture(t, nil)
			resp, got := post(t, testClient(t), f.proxyURL+shapes[3].path, shapes[3].body, http.Header{fakellm.HeaderProfile: {tc.profile}})
			rec := f.waitRequest(t, 0)
			assert.Equal(t, rec.Status, resp.StatusCode)
			assert.Equal(t, sentWhole(t, f.fake), got, "the error body reaches the client unchanged")
			span := f.spans(t, 1)[0]
			assert.Equal(t, ptrace.StatusCodeError, span.Status().Code())
			assert.Equal(t, int64(rec.Status), attr(t, span, semconv.AttrHTTPStatusCode).Int())
			assert.Equal(t, tc.errType, attr(t, span, semconv.AttrErrorType).Str(), "the provider's error type: %s", got)
		})
	}
}

// TestProxyEarlyClose: an upstream that drops the connection mid-stream
// gives the client the same truncated stream, and the span an error.
func TestProxyEarlyClose(t *testing.T) {
	for _, sh := range []int{0, 3} {
		t.Run(shapes[sh].name, func(t *testing.T) {
			f := newFixture(t, nil)
			script := fakellm.Script{TTFTMillis: 5, GapsMillis: []float64{5, 5, 5, 5, 5}, CloseAfterChunk: 3}
			req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, f.proxyURL+shapes[sh].path, strings.NewReader(shapes[sh].body))
			require.NoError(t, err)
			req.Header = scriptHeader(t, script)
			resp, err := testClient(t).Do(req)
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the client sees the stream break, as it would directly")
			rec := f.waitRequest(t, 0)
			assert.True(t, rec.Aborted)
			assert.Equal(t, sentWhole(t, f.fake), got)
			span := f.spans(t, 1)[0]
			assert.Len(t, chunkTimes(span), 3)
			assert.Equal(t, ptrace.StatusCodeError, span.Status().Code())
			assert.Equal(t, "stream_truncated", attr(t, span, semconv.AttrErrorType).Str())
		})
	}
}

// TestProxyClientDisconnect: a client leaving mid-stall cancels the upstream
// request at once, and the span ends as cancelled.
func TestProxyClientDisconnect(t *testing.T) {
	f := newFixture(t, nil)
	script := fakellm.Script{TTFTMillis: 5, GapsMillis: []float64{5, 60000, 5}}
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.proxyURL+shapes[0].path, strings.NewReader(shapes[0].body))
	require.NoError(t, err)
	req.Header = scriptHeader(t, script)
	resp, err := testClient(t).Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	// Read until the second content chunk has arrived: the stall follows.
	r := bufio.NewReader(resp.Body)
	contents := 0
	for contents < 2 {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		if strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`) {
			contents++
		}
	}
	cancelled := time.Now()
	cancel()
	rec := f.waitRequest(t, 0)
	require.True(t, rec.Disconnected, "fakellm saw the upstream request cancelled")
	assert.Less(t, rec.DisconnectedAt.Sub(cancelled), 500*time.Millisecond, "promptly")
	assert.False(t, rec.Completed)
	span := f.spans(t, 1)[0]
	assert.Equal(t, "cancelled", attr(t, span, semconv.AttrErrorType).Str())
	assert.Equal(t, ptrace.StatusCodeError, span.Status().Code())
	assert.Len(t, chunkTimes(span), 2)
}

func TestProxyUnreachableUpstream(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = closed }))
	resp, body := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, nil)
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var e struct {
		Error struct{ Type, Message string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body, &e), string(body))
	assert.Equal(t, "upstream_unreachable", e.Error.Type)
	span := f.spans(t, 1)[0]
	assert.Equal(t, "upstream_unreachable", attr(t, span, semconv.AttrErrorType).Str())
	assert.Equal(t, int64(http.StatusBadGateway), attr(t, span, semconv.AttrHTTPStatusCode).Int())
	assert.Equal(t, ptrace.StatusCodeError, span.Status().Code())
}

// TestProxyHungTLSHandshakeTimesOut: without upstream.timeout, an https
// upstream that accepts the connection and never answers the TLS handshake
// is given up after Go's 10 s handshake bound (the README's figure): 504
// upstream_timeout, not a client held for as long as the upstream likes.
func TestProxyHungTLSHandshakeTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() }) // held open, never a byte
		}
	}()
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
		p.Upstream.Endpoint = "https://" + ln.Addr().String()
		p.Upstream.TLS.InsecureSkipVerify = true
	}))
	start := time.Now()
	resp, body := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, nil)
	took := time.Since(start)
	assert.Equal(t, http.StatusGatewayTimeout, resp.StatusCode, string(body))
	assert.Contains(t, string(body), `"upstream_timeout"`)
	assert.GreaterOrEqual(t, took, 9*time.Second)
	assert.Less(t, took, 20*time.Second)
	span := f.spans(t, 1)[0]
	assert.Equal(t, "upstream_timeout", attr(t, span, semconv.AttrErrorType).Str())
}

// TestProxyUpstreamHeaderTimeout: upstream.timeout bounds the wait for
// response headers (504), never a stream that already started.
func TestProxyUpstreamHeaderTimeout(t *testing.T) {
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Timeout = 100 * time.Millisecond }))
	// fakellm sends headers at once, then stalls 300 ms: longer than the timeout.
	resp, body := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body,
		scriptHeader(t, fakellm.Script{TTFTMillis: 5, GapsMillis: []float64{300, 5}}))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, sentWhole(t, f.fake), body)
	assert.Len(t, chunkTimes(f.spans(t, 1)[0]), 3)

	// A non-streaming answer sends its headers only at the end: 504.
	f.fake.Reset()
	slow := strings.Replace(shapes[0].body, `"stream":true`, `"stream":false`, 1)
	resp, body = post(t, testClient(t), f.proxyURL+shapes[0].path, slow,
		scriptHeader(t, fakellm.Script{TTFTMillis: 400}))
	assert.Equal(t, http.StatusGatewayTimeout, resp.StatusCode, string(body))
	spans := f.spans(t, 2)
	assert.Equal(t, "upstream_timeout", attr(t, spans[1], semconv.AttrErrorType).Str())
}

// TestProxyNoWriteTimeout: a stream longer than the server's write timeout
// still reaches the client whole.
func TestProxyNoWriteTimeout(t *testing.T) {
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.WriteTimeout = 100 * time.Millisecond }))
	resp, body := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body,
		scriptHeader(t, fakellm.Script{TTFTMillis: 5, GapsMillis: []float64{150, 150}}))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, sentWhole(t, f.fake), body)
	assert.True(t, f.waitRequest(t, 0).Completed)
}

func TestProxyTraceContextAndBaggage(t *testing.T) {
	f := newFixture(t, nil)
	const inTrace, inSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	resp, _ := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, http.Header{
		"Traceparent": {"00-" + inTrace + "-" + inSpan + "-01"},
		"Tracestate":  {"vendor=opaque"},
		"Baggage":     {"llm.hedge.group_id=g-42,llm.hedge.attempt=2,llm.hedge.trigger=stall", "user.id=alice,llm.hedge.attempt_note=x%20y"},
	})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	span := f.spans(t, 1)[0]
	assert.Equal(t, inTrace, span.TraceID().String(), "the span joins the inbound trace")
	assert.Equal(t, inSpan, span.ParentSpanID().String(), "as a child of the caller's span")
	assert.Equal(t, "vendor=opaque", span.TraceState().AsRaw())

	up, _ := f.log.last(t)
	assert.Equal(t, "00-"+inTrace+"-"+span.SpanID().String()+"-01", up.Get("Traceparent"), "upstream sees our span as its parent")
	assert.Equal(t, "vendor=opaque", up.Get("Tracestate"))

	assert.Equal(t, "g-42", attr(t, span, semconv.AttrHedgeGroupID).Str())
	assert.Equal(t, pcommon.ValueTypeInt, attr(t, span, semconv.AttrHedgeAttempt).Type())
	assert.Equal(t, int64(2), attr(t, span, semconv.AttrHedgeAttempt).Int())
	assert.Equal(t, "stall", attr(t, span, semconv.AttrHedgeTrigger).Str())
	assert.Equal(t, "x y", attr(t, span, "llm.hedge.attempt_note").Str())
	_, leaked := span.Attributes().Get("user.id")
	assert.False(t, leaked, "only llm.hedge.* baggage is recorded")

	// An unsampled caller stays unsampled upstream; the span is still recorded.
	f.fake.Reset()
	resp, _ = post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, http.Header{
		"Traceparent": {"00-" + inTrace + "-" + inSpan + "-00"},
	})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	unsampled := f.spans(t, 2)[1]
	up, _ = f.log.last(t)
	assert.Equal(t, "00-"+inTrace+"-"+unsampled.SpanID().String()+"-00", up.Get("Traceparent"))

	// Without an inbound traceparent, the span starts a trace and upstream
	// sees it.
	f.fake.Reset()
	resp, _ = post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	root := f.spans(t, 3)[2]
	assert.True(t, root.ParentSpanID().IsEmpty())
	up, _ = f.log.last(t)
	assert.Equal(t, "00-"+root.TraceID().String()+"-"+root.SpanID().String()+"-01", up.Get("Traceparent"))
}

// TestProxySecurity: credentials reach the upstream (they are the caller's
// business) but never the span; the upstream cannot be changed by a
// request; hop-by-hop headers are dropped both ways; no X-Forwarded-* goes
// to the provider; an oversized body gets 413 and never leaves.
func TestProxySecurity(t *testing.T) {
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("a request reached the server named by the client")
		w.WriteHeader(http.StatusTeapot)
	}))
	defer evil.Close()
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.MaxRequestBody = 4096 }))
	f.log.respHeaders = http.Header{"Connection": {"X-Upstream-Hop"}, "X-Upstream-Hop": {"1"}, "Keep-Alive": {"timeout=5"}}

	secrets := http.Header{
		"Authorization":       {"Bearer sk-proj-SECRETSECRET"},
		"X-Api-Key":           {"sk-ant-SECRETSECRET"},
		"Api-Key":             {"azure-SECRETSECRET"},
		"Cookie":              {"session=COOKIESECRET"},
		"Connection":          {"X-Client-Hop, keep-alive"},
		"X-Client-Hop":        {"1"},
		"Proxy-Authorization": {"Basic UFJPWFlTRUNSRVQ="},
		"X-Forwarded-For":     {"10.9.8.7"},
		"X-Forwarded-Host":    {"evil.example"},
		"Forwarded":           {"for=10.9.8.7"},
		"Upgrade":             {"h2c"},
	}
	resp, body := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, secrets)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	assert.Empty(t, resp.Header.Get("X-Upstream-Hop"), "hop-by-hop response headers are dropped")
	assert.Empty(t, resp.Header.Get("Keep-Alive"))
	up, host := f.log.last(t)
	assert.Equal(t, "Bearer sk-proj-SECRETSECRET", up.Get("Authorization"), "credentials are forwarded")
	assert.Equal(t, "sk-ant-SECRETSECRET", up.Get("X-Api-Key"))
	assert.Equal(t, "session=COOKIESECRET", up.Get("Cookie"))
	for _, h := range []string{"X-Client-Hop", "Proxy-Authorization", "Upgrade", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded"} {
		assert.Empty(t, up.Get(h), "%s must not reach the upstream", h)
	}
	assert.Equal(t, strings.TrimPrefix(f.upstream.URL, "http://"), host)
	rec := f.waitRequest(t, 0)
	span := f.spans(t, 1)[0]
	assertNoSecrets(t, span, rec.Text, "SECRETSECRET", "COOKIESECRET", "UFJPWFlTRUNSRVQ=", "secret prompt text", "10.9.8.7")

	// An absolute-form request URI and a Host header naming another server.
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.proxyURL, "http://"))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	evilHost := strings.TrimPrefix(evil.URL, "http://")
	_, err = fmt.Fprintf(conn, "POST %s/v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		evil.URL, evilHost, len(shapes[0].body), shapes[0].body)
	require.NoError(t, err)
	resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	_, host = f.log.last(t)
	assert.Equal(t, strings.TrimPrefix(f.upstream.URL, "http://"), host, "the configured upstream answered")
	assert.Equal(t, 2, f.log.count())

	// 413 for a body over max_request_body; the upstream never sees it.
	big := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`
	resp, body = post(t, testClient(t), f.proxyURL+shapes[0].path, big, nil)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Contains(t, string(body), "request_too_large")
	assert.Equal(t, 2, f.log.count())
}

// blockingSink blocks every ConsumeTraces until released or its context ends.
type blockingSink struct {
	consumertest.TracesSink
	release chan struct{}
	entered chan struct{}
	once    sync.Once
}

func (b *blockingSink) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	b.once.Do(func() { close(b.entered) })
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.TracesSink.ConsumeTraces(ctx, td)
}

// TestProxyPipelineTrouble: a failing or blocked pipeline never touches the
// stream; lost spans are counted.
func TestProxyPipelineTrouble(t *testing.T) {
	t.Run("error", func(t *testing.T) {
		f := newFixture(t, consumertest.NewErr(errors.New("pipeline refused")))
		for i := range 3 {
			resp, body := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			f.waitRequest(t, i)
			assert.Equal(t, f.fake.Sent(i), body)
		}
		assertDropped(t, f, 3, "consumer_error")
	})
	t.Run("blocked", func(t *testing.T) {
		sink := &blockingSink{release: make(chan struct{}), entered: make(chan struct{})}
		f := newFixture(t, sink, withProxy(func(p *ProxyConfig) { p.QueueSize = 1 }))
		for i := range 4 {
			start := time.Now()
			resp, body := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body,
				scriptHeader(t, fakellm.Script{TTFTMillis: 1, GapsMillis: []float64{1, 1, 1}}))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			f.waitRequest(t, i)
			assert.Equal(t, f.fake.Sent(i), body, "the stream is untouched")
			assert.Less(t, time.Since(start), 2*time.Second)
			if i == 0 {
				<-sink.entered // the drainer now holds span 0, blocked
			}
		}
		// Span 0 is held by the blocked consumer, span 1 waits in the queue
		// of one, spans 2 and 3 found it full.
		assertDropped(t, f, 2, "queue_full")
		close(sink.release)
		require.Eventually(t, func() bool { return sink.SpanCount() == 2 }, 5*time.Second, 5*time.Millisecond)
	})
}

// TestProxyServiceName: the proxy's spans name a service, the receiver's
// component ID unless service_name says otherwise, so that backends such as
// Jaeger file them under something a user recognises.
func TestProxyServiceName(t *testing.T) {
	for _, tc := range []struct{ configured, want string }{
		{"", metadata.Type.String()},
		{"checkout-chat", "checkout-chat"},
	} {
		f := newFixture(t, nil, withProxy(func(c *ProxyConfig) { c.ServiceName = tc.configured }))
		resp, body := post(t, testClient(t), f.proxyURL+"/v1/chat/completions", shapes[0].body, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		f.spans(t, 1)
		svc, ok := f.sink.AllTraces()[0].ResourceSpans().At(0).Resource().Attributes().Get(semconv.AttrServiceName)
		require.True(t, ok)
		if tc.configured == "" {
			// The test settings name the component sse_capture/<uuid>.
			assert.True(t, strings.HasPrefix(svc.Str(), tc.want+"/"), svc.Str())
		} else {
			assert.Equal(t, tc.want, svc.Str())
		}
	}
}

// TestProxyListenerUninstrumented: the collector's HTTP server
// instrumentation stays off the proxy listener (it would wrap every write of
// every stream) and on the ingest listener, where requests are short.
func TestProxyListenerUninstrumented(t *testing.T) {
	f := newFixture(t, nil, func(c *Config, _ *fakellm.Config) {
		c.Ingest.GetOrInsertDefault().NetAddr.Endpoint = "127.0.0.1:0"
	})
	serverSpans := func() (n int) {
		for _, s := range f.tel.SpanRecorder.Ended() {
			if s.SpanKind() == trace.SpanKindServer {
				n++
			}
		}
		return n
	}
	resp, body := post(t, testClient(t), f.proxyURL+"/v1/chat/completions", shapes[0].body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	f.spans(t, 1)
	assert.Zero(t, serverSpans(), "a server span for a proxied request")

	resp, reply := postIngest(t, "http://"+f.rcv.addrs["ingest"].String()+ingest.Path, "application/json", []byte(okRecord), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, reply.Error)
	assert.Eventually(t, func() bool { return serverSpans() == 1 }, testTimeout, 10*time.Millisecond,
		"the ingest listener keeps the collector's server instrumentation")
}

// TestProxyDropsHopByHopHeaders: no hop-by-hop header reaches the upstream,
// as httputil.ReverseProxy's list has them, also the ones it puts back on
// its own (TE: trailers, and Upgrade with Connection: Upgrade), and every
// header Connection names.
func TestProxyDropsHopByHopHeaders(t *testing.T) {
	f := newFixture(t, nil)
	addr := strings.TrimPrefix(f.proxyURL, "http://")
	for _, tc := range []struct {
		name    string
		headers string
		gone    []string
	}{
		{"Upgrade", "Connection: Upgrade\r\nUpgrade: websocket\r\n", []string{"Upgrade", "Connection"}},
		{"Upgrade to h2c", "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n", []string{"Upgrade", "Connection", "Http2-Settings"}},
		{"TE trailers", "TE: trailers\r\n", []string{"Te"}},
		{"TE", "TE: gzip, trailers;q=0.5\r\n", []string{"Te"}},
		{"named by Connection", "Connection: X-Hop-A, x-hop-b\r\nX-Hop-A: 1\r\nX-Hop-B: 2\r\n", []string{"X-Hop-A", "X-Hop-B", "Connection"}},
		{"Keep-Alive", "Connection: keep-alive\r\nKeep-Alive: timeout=5\r\n", []string{"Keep-Alive", "Connection"}},
		{"Proxy-Connection", "Proxy-Connection: keep-alive\r\n", []string{"Proxy-Connection"}},
		{"Proxy-Authorization", "Proxy-Authorization: Basic UFJPWFlTRUNSRVQ=\r\n", []string{"Proxy-Authorization"}},
		{"Trailer", "Trailer: X-Checksum\r\n", []string{"Trailer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.log.count()
			status, body := rawRequestWith(t, addr, shapes[0].path, tc.headers+"X-Kept: yes\r\n", shapes[0].body)
			require.Equal(t, http.StatusOK, status, body)
			require.Equal(t, before+1, f.log.count())
			up, _ := f.log.last(t)
			for _, h := range tc.gone {
				assert.Empty(t, up.Values(h), "%s must not reach the upstream", h)
			}
			assert.Equal(t, "yes", up.Get("X-Kept"), "end-to-end headers are forwarded")
		})
	}
}

// rawRequestWith posts body to path with the given header lines (each
// ending in CRLF), exactly as written, and returns the status and body.
func rawRequestWith(t *testing.T, addr, path, headers, body string) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, testTimeout)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	require.NoError(t, conn.SetDeadline(time.Now().Add(testTimeout)))
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s",
		path, addr, len(body), headers, body)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

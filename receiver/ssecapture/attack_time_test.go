// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/proxy"
)

// TestShutdownDuringTheHedgeRace: calls whose primary and hedge both wait
// for response headers when the collector shuts down. Every attempt has
// its span, the call's says shutdown, every upstream connection is closed
// and no goroutine of the calls is left.
func TestShutdownDuringTheHedgeRace(t *testing.T) {
	noLeaks(t)
	const calls = 5
	primary, alternate := newHangingUpstream(t), newHangingUpstream(t)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	pc := cfg.Proxy.GetOrInsertDefault()
	pc.NetAddr.Endpoint = "127.0.0.1:0"
	pc.Upstream.Endpoint = primary.url()
	pc.ShutdownTimeout = 100 * time.Millisecond
	gc := pc.Guard.GetOrInsertDefault()
	alt := confighttp.NewDefaultClientConfig()
	alt.Endpoint = alternate.url()
	gc.Hedge.Alternates = []AlternateConfig{{ClientConfig: alt}}
	gc.Hedge.Delay = AutoDuration(20 * time.Millisecond)
	require.NoError(t, cfg.Validate())
	sink := new(consumertest.TracesSink)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	r, err := NewFactory().CreateTraces(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	rcv := r.(*sseCaptureReceiver)
	require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))
	proxyURL := "http://" + rcv.addrs["proxy"].String()

	client := &http.Client{Transport: &http.Transport{}}
	var wg sync.WaitGroup
	statuses := make(chan int, calls)
	for range calls {
		wg.Go(func() {
			body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`
			req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, proxyURL+"/v1/chat/completions", strings.NewReader(body))
			if !assert.NoError(t, err) {
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				return // the connection closed before the answer was read
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			statuses <- resp.StatusCode
		})
	}
	require.Eventually(t, func() bool {
		return primary.requests.Load() == calls && alternate.requests.Load() == calls
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, rcv.Shutdown(context.Background()))
	wg.Wait()
	close(statuses)
	for s := range statuses {
		assert.Equal(t, http.StatusServiceUnavailable, s)
	}
	client.CloseIdleConnections()
	require.Eventually(t, func() bool { return primary.open.Load() == 0 && alternate.open.Load() == 0 },
		10*time.Second, 5*time.Millisecond, "every upstream connection is closed")
	spans := (&fixture{sink: sink}).spans(t, 2*calls)
	for _, s := range spans {
		if attr(t, s, semconv.AttrHedgeOutcome).Str() == semconv.HedgeOutcomeWinner {
			assert.Equal(t, "shutdown", attr(t, s, semconv.AttrErrorType).Str())
		}
	}
	assert.Equal(t, map[string]int64{"shutdown": calls}, cutsByReason(t, tel))
}

// cutsByReason reads otelcol_receiver_sse_capture_streams.cut by reason.
func cutsByReason(t *testing.T, tel *componenttest.Telemetry) map[string]int64 {
	t.Helper()
	return sumByAttribute(t, tel, "otelcol_receiver_sse_capture_streams.cut", "reason")
}

// sumByAttribute reads a counter of the receiver's telemetry, its points
// added up by the value of one attribute.
func sumByAttribute(t *testing.T, tel *componenttest.Telemetry, metric, key string) map[string]int64 {
	t.Helper()
	got, err := tel.GetMetric(metric)
	require.NoError(t, err, "the receiver counts %s", metric)
	sum, ok := got.Data.(metricdata.Sum[int64])
	require.True(t, ok)
	by := map[string]int64{}
	for _, dp := range sum.DataPoints {
		v, _ := dp.Attributes.Value(attribute.Key(key))
		by[v.AsString()] += dp.Value
	}
	return by
}

// noLeaks checks, once the test and its cleanups are done, that no
// goroutine it started is left.
func noLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// lateHeaders is an upstream transport whose response headers come just as
// the request's context ends (net/http returns a response it has read even
// when the context ends the same moment); its body then fails, as a body
// read after the end of its request's context does.
type lateHeaders struct {
	mu     sync.Mutex
	closed bool
}

func (l *lateHeaders) RoundTrip(req *http.Request) (*http.Response, error) {
	<-req.Context().Done()
	return &http.Response{
		StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: &lateBody{l: l, ctx: req.Context()}, Request: req,
	}, nil
}

type lateBody struct {
	l   *lateHeaders
	ctx context.Context
}

func (b *lateBody) Read([]byte) (int, error) { return 0, context.Cause(b.ctx) }

func (b *lateBody) Close() error {
	b.l.mu.Lock()
	defer b.l.mu.Unlock()
	b.l.closed = true
	return nil
}

// TestHeaderTimeoutAtTheDeadlineIsATimeout: response headers that come as
// upstream.timeout runs out. The timeout has cancelled the request, so the
// stream could only break after its 200: the client would get a status
// that promises a stream and a body cut at once, and the span a
// stream_truncated that the upstream never did. Past its deadline the wait
// is a timeout (the proxy's 504, the guard's next attempt), and the
// response is closed.
func TestHeaderTimeoutAtTheDeadlineIsATimeout(t *testing.T) {
	up := &lateHeaders{}
	rt := proxy.HeaderTimeout(up, 20*time.Millisecond)
	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, "http://upstream.invalid/v1/chat/completions", http.NoBody)
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	if resp != nil {
		_, readErr := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		t.Logf("a %d came back, its body failed: %v", resp.StatusCode, readErr)
	}
	require.Error(t, err, "headers that came at the deadline are a timeout")
	assert.Nil(t, resp)
	up.mu.Lock()
	defer up.mu.Unlock()
	assert.True(t, up.closed, "the late response is closed")
}

// TestGuardHedgeDelayPastTheTTFTTimeoutIsRefused: a hedge delay at or past
// ttft_timeout validates, yet never starts a hedge: each attempt is given
// up at ttft_timeout, which starts the next one and arms the delay again
// from there. The operator who asked for a race gets serial failover. The
// configuration says so instead, for the top level, a learned delay's
// fallback, and a model entry whose ttft_timeout undercuts the top level's
// delay.
func TestGuardHedgeDelayPastTheTTFTTimeoutIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*GuardConfig)
		want string
	}{
		{"fixed", func(g *GuardConfig) {
			g.TTFTTimeout, g.Hedge.Delay = 2*time.Second, AutoDuration(2*time.Second)
		}, "proxy: guard: hedge.delay 2s must be shorter than ttft_timeout 2s"},
		{"fallback", func(g *GuardConfig) {
			g.TTFTTimeout, g.Hedge.Delay = time.Second, autoDuration
		}, "proxy: guard: hedge.fallback_delay 2s must be shorter than ttft_timeout 1s"},
		{"model", func(g *GuardConfig) {
			ttft := 500 * time.Millisecond
			g.TTFTTimeout, g.Hedge.Delay = 30*time.Second, AutoDuration(time.Second)
			g.Models = []ModelGuardConfig{{Model: "fast*", TTFTTimeout: &ttft}}
		}, "proxy: guard: models[0]: hedge.delay 1s must be shorter than ttft_timeout 500ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			pc := cfg.Proxy.GetOrInsertDefault()
			pc.Upstream.Endpoint = "http://127.0.0.1:1"
			tc.set(pc.Guard.GetOrInsertDefault())
			assert.ErrorContains(t, cfg.Validate(), tc.want)
		})
	}
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	pc := cfg.Proxy.GetOrInsertDefault()
	pc.Upstream.Endpoint = "http://127.0.0.1:1"
	g := pc.Guard.GetOrInsertDefault()
	g.TTFTTimeout, g.Hedge.Delay = 30*time.Second, AutoDuration(29*time.Second)
	assert.NoError(t, cfg.Validate(), "a delay under ttft_timeout is fine")
}

// TestGuardCutsAreCounted: the streams the proxy ends itself (a stall, a
// ttft_timeout) are what an on-call engineer alerts on, and the spans that
// say so may be dropped (a full queue, a failing exporter) or sampled away
// downstream. The receiver counts them in its own telemetry, by reason.
func TestGuardCutsAreCounted(t *testing.T) {
	stall := fakellm.Script{TTFTMillis: 5, GapsMillis: []float64{5, 60000}}
	silent := fakellm.Script{TTFTMillis: 60000}
	f := newGuardFixture(t, stall, silent, func(g *GuardConfig) {
		g.StallTimeout = AutoDuration(100 * time.Millisecond)
		g.TTFTTimeout = 150 * time.Millisecond
		g.Hedge.MaxAttempts = 1
	})
	client := testClient(t)
	resp, body := post(t, client, f.proxyURL+"/v1/chat/completions", shapes[0].body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "stall_timeout")
	resp, _ = post(t, client, f.proxyURL+"/v1/chat/completions", shapes[0].body, scriptHeader(t, silent))
	require.Equal(t, http.StatusGatewayTimeout, resp.StatusCode)
	f.spans(t, 2)

	assert.Equal(t, map[string]int64{"stall_timeout": 1, "ttft_timeout": 1}, cutsByReason(t, f.tel))
}

// holdingUpstream answers every request with a stream of role-only deltas
// (frames without content) of about size bytes, then holds the stream open
// without content until its request ends; it counts the requests still
// open.
type holdingUpstream struct {
	size int
	open atomic.Int64
	seen atomic.Int64
}

func (u *holdingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.open.Add(1)
	defer u.open.Add(-1)
	u.seen.Add(1)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	frame := `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant"}}]}` + "\n\n"
	for n := 0; n < u.size; n += len(frame) {
		_, _ = io.WriteString(w, frame)
	}
	_ = http.NewResponseController(w).Flush()
	<-r.Context().Done()
}

// TestClientGoneWhileAttemptsHold: a client leaves while both attempts of
// its call hold frames without content (past the free 64 KiB, so they
// draw on frame_buffer_bytes). Both upstream requests end, the budget is
// all given back, both attempts have their span and the call's says
// cancelled, and no goroutine is left.
func TestClientGoneWhileAttemptsHold(t *testing.T) {
	noLeaks(t)
	const calls = 4
	primary, alternate := &holdingUpstream{size: 300 << 10}, &holdingUpstream{size: 300 << 10}
	pURL, aURL := newTestServer(t, primary), newTestServer(t, alternate)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	pc := cfg.Proxy.GetOrInsertDefault()
	pc.NetAddr.Endpoint = "127.0.0.1:0"
	pc.Upstream.Endpoint = pURL
	gc := pc.Guard.GetOrInsertDefault()
	alt := confighttp.NewDefaultClientConfig()
	alt.Endpoint = aURL
	gc.Hedge.Alternates = []AlternateConfig{{ClientConfig: alt}}
	gc.Hedge.Delay = AutoDuration(20 * time.Millisecond)
	require.NoError(t, cfg.Validate())
	sink := new(consumertest.TracesSink)
	rcv := startReceiver(t, cfg, sink, componenttest.NewNopHost(), nil)
	proxyURL := "http://" + rcv.addrs["proxy"].String()

	ctx, cancel := context.WithCancel(testContext(t))
	client := testClient(t)
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxyURL+"/v1/chat/completions", strings.NewReader(shapes[0].body))
			if !assert.NoError(t, err) {
				return
			}
			req.Header.Set("Content-Type", "application/json")
			if resp, err := client.Do(req); err == nil {
				_ = resp.Body.Close()
				t.Errorf("a call was answered: %d", resp.StatusCode)
			}
		})
	}
	require.Eventually(t, func() bool {
		return primary.seen.Load() == calls && alternate.seen.Load() == calls && rcv.proxy.FrameBufferBytes() > 0
	}, 10*time.Second, 5*time.Millisecond, "both attempts of every call hold bytes")
	cancel()
	wg.Wait()
	require.Eventually(t, func() bool { return primary.open.Load() == 0 && alternate.open.Load() == 0 },
		10*time.Second, 5*time.Millisecond, "every upstream request ended")
	spans := (&fixture{sink: sink}).spans(t, 2*calls)
	assert.Zero(t, rcv.proxy.FrameBufferBytes(), "every attempt gave its budget back")
	for _, s := range spans {
		if attr(t, s, semconv.AttrHedgeOutcome).Str() == semconv.HedgeOutcomeWinner {
			assert.Equal(t, "cancelled", attr(t, s, semconv.AttrErrorType).Str())
		}
	}
}

// advisedInterval is how often startAdvisedReceiver's guard fetches.
const advisedInterval = 20 * time.Millisecond

// startAdvisedReceiver starts a receiver whose guard fetches its advice
// from advisor every advisedInterval (its primary unreachable: no call is made);
// configure, when set, adjusts the advisor's settings.
func startAdvisedReceiver(t *testing.T, set receiver.Settings, advisor string, configure func(*AdvisorConfig)) {
	t.Helper()
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	pc := cfg.Proxy.GetOrInsertDefault()
	pc.NetAddr.Endpoint = "127.0.0.1:0"
	pc.Upstream.Endpoint = "http://127.0.0.1:1"
	a := pc.Guard.GetOrInsertDefault().Advisor.GetOrInsertDefault()
	a.Endpoint, a.Interval, a.MaxAge = advisor, advisedInterval, time.Second
	if configure != nil {
		configure(a)
	}
	require.NoError(t, cfg.Validate())
	r, err := NewFactory().CreateTraces(context.Background(), set, cfg, new(consumertest.TracesSink))
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, r.Shutdown(context.Background())) })
}

// TestAdvisorOutageIsLogged: a guard that takes its auto values from a
// hedge_advisor that stops answering falls back to its own learning, then
// the floor, once the last advice is older than max_age. That changes
// every client's hedge delay and stall timeout, and was logged at debug
// level alone. The first failed fetch is a warning, the advisor answering
// again is said once too, and the failures in between are not repeated.
func TestAdvisorOutageIsLogged(t *testing.T) {
	var failing atomic.Bool
	advisor := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if failing.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"window_s":60,"advice":[]}`)
	}))
	core, logs := observer.New(zapcore.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	startAdvisedReceiver(t, set, advisor, nil)

	advisorLines := func() []observer.LoggedEntry {
		return logs.FilterMessageSnippet("hedge advice").All()
	}
	failing.Store(true)
	require.Eventually(t, func() bool { return len(advisorLines()) > 0 }, 5*time.Second, 5*time.Millisecond,
		"the advisor's outage is logged above debug level")
	time.Sleep(10 * advisedInterval)
	lines := advisorLines()
	require.Len(t, lines, 1, "once, not at every fetch")
	assert.Equal(t, zapcore.WarnLevel, lines[0].Level)
	assert.NotContains(t, fmt.Sprint(lines[0].ContextMap()), advisor, "no URL, whose query may carry a credential, is logged")

	failing.Store(false)
	require.Eventually(t, func() bool { return len(advisorLines()) == 2 }, 5*time.Second, 5*time.Millisecond,
		"its recovery is logged")
	time.Sleep(5 * advisedInterval)
	lines = advisorLines()
	require.Len(t, lines, 2)
	assert.Equal(t, zapcore.InfoLevel, lines[1].Level)
}

// TestBudgetRefusalsSayWhichBucket: a refusal by one client's own bucket
// is the budget working (that client's calls keep failing, the others
// keep their failover); a refusal by the shared bucket means hedging and
// failover are off for every client. An on-call engineer must tell them
// apart: hedges.refused says which bucket refused, in its bucket attribute.
func TestBudgetRefusalsSayWhichBucket(t *testing.T) {
	f := newGuardFixture(t,
		fakellm.Script{Status: http.StatusInternalServerError},
		fakellm.Script{Status: http.StatusInternalServerError},
		func(g *GuardConfig) {
			// Each bucket allows a hedge above half its tokens: 4 > 3 > 2.
			g.Hedge.Budget = BudgetConfig{MaxTokens: 4, TokenRatio: 0.1, SharedMaxTokens: 4}
		})
	call := func(hc *http.Client) {
		defer hc.CloseIdleConnections()
		resp, _ := post(t, hc, f.proxyURL+"/v1/chat/completions", shapes[0].body, nil)
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	}
	// Client a fails over once (its bucket 4 -> 1, the shared one 4 -> 2),
	// then its own bucket refuses.
	call(clientFrom("127.0.0.21"))
	call(clientFrom("127.0.0.21"))
	// Client b's own bucket is full; the shared one refuses.
	call(clientFrom("127.0.0.22"))
	f.spans(t, 4)

	assert.Equal(t, map[string]int64{"client": 1, "shared": 1},
		sumByAttribute(t, f.tel, "otelcol_receiver_sse_capture_hedges.refused", "bucket"))
}

// TestGuardHonoursRetryAfter: a source that answers 429 with a Retry-After
// gets no second attempt of the same call before then. With the primary
// alone the client gets its 429, Retry-After included, for its SDK to wait,
// instead of the retries at once the source refused in advance; with an
// alternate, the alternate serves and the primary is asked once.
func TestGuardHonoursRetryAfter(t *testing.T) {
	limited := fakellm.Script{Status: http.StatusTooManyRequests, RetryAfterMillis: 2000}
	t.Run("alone", func(t *testing.T) {
		f := newGuardFixture(t, limited, fakellm.Script{}, func(g *GuardConfig) {
			g.Hedge.Alternates = nil
			g.Hedge.MaxAttempts = 3
		})
		body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, f.proxyURL+"/v1/chat/completions", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, "2", resp.Header.Get("Retry-After"), "the source's own Retry-After reaches the client")
		assert.Equal(t, "2000", resp.Header.Get("Retry-After-Ms"))
		spans := f.spans(t, 1)
		assert.Equal(t, int64(http.StatusTooManyRequests), attr(t, spans[0], semconv.AttrHTTPStatusCode).Int())
		assert.Len(t, f.primary.Requests(), 1, "the source that asked to wait was not called again")
	})
	t.Run("with an alternate", func(t *testing.T) {
		f := newGuardFixture(t, limited, fakellm.Script{TTFTMillis: 10, GapsMillis: []float64{5}}, func(g *GuardConfig) {
			g.Hedge.MaxAttempts = 3
		})
		run := openAIChat(t, f.proxyURL, "")
		assert.Equal(t, sentWhole(t, f.alternate), run.wire)
		spans := byAttempt(t, f.spans(t, 2))
		assert.Equal(t, portOf(t, f.alternateURL), attr(t, spans[1], semconv.AttrServerPort).Int())
		assert.Len(t, f.primary.Requests(), 1)
	})
}

// TestGuardTruncatedStreamCostsTheBudget: a committed stream whose body
// ends whole but before the API's end of stream (no [DONE], no finish
// reason) is cut, as its span says: it costs the budget as a broken stream
// does instead of refunding it as a complete one, so that an upstream that
// cuts its streams cannot keep the hedges it triggers paid for.
func TestGuardTruncatedStreamCostsTheBudget(t *testing.T) {
	// Content after 150 ms, past the 50 ms hedge delay: every call hedges
	// to the alternate, which never answers, and the primary wins.
	cut := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(150 * time.Millisecond):
		}
		_, _ = io.WriteString(w, chatEvent) // and the body ends, without [DONE]
	}
	hang := func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	h := newHostileGuard(t, cut, hang, func(g *GuardConfig) {
		g.Hedge.Delay = AutoDuration(50 * time.Millisecond)
		// A hedge is allowed above 2 tokens. A complete stream refunds
		// the hedge's token whole (ratio 1): only a stream that costs the
		// budget can bring the bucket down to where it refuses.
		g.Hedge.Budget = BudgetConfig{MaxTokens: 4, TokenRatio: 1, SharedMaxTokens: 100}
	})
	f := &fixture{sink: h.sink}
	// The first call hedges (4 -> 3) and its cut stream costs a token
	// (3 -> 2); the second's hedge is refused. Each call's budget is
	// settled before its spans go out: the next call starts after them.
	for _, spansSoFar := range []int{2, 3} { // the first call's loser has a span too
		resp, body := post(t, http.DefaultClient, h.proxyURL+"/v1/chat/completions", shapes[0].body, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		assert.Equal(t, chatEvent, string(body))
		f.spans(t, spansSoFar)
	}
	spans := f.spans(t, 3)
	require.Len(t, spans, 3)
	truncated := 0
	for _, s := range spans {
		if v, ok := s.Attributes().Get(semconv.AttrErrorType); ok && v.Str() == "stream_truncated" {
			truncated++
		}
	}
	assert.Equal(t, 2, truncated, "both streams the client got were cut")
	assert.Equal(t, map[string]int64{"client": 1},
		sumByAttribute(t, h.tel, "otelcol_receiver_sse_capture_hedges.refused", "bucket"))
}

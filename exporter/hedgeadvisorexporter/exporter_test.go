// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgeadvisorexporter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/streamstall/streamstall/exporter/hedgeadvisorexporter/internal/metadata"
	"github.com/streamstall/streamstall/exporter/hedgeadvisorexporter/internal/metadatatest"
	"github.com/streamstall/streamstall/internal/advice"
	"github.com/streamstall/streamstall/internal/dimension"
	"github.com/streamstall/streamstall/internal/semconv"
)

var t0 = time.Unix(1_700_000_000, 0)

func testConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.MinSamples = 10
	return cfg
}

// attemptSpec is one attempt span: a TTFT with content, or a loser
// cancelled after ran without content.
type attemptSpec struct {
	provider, model string
	ttft            time.Duration // 0: no content
	ran             time.Duration // run time of a loser
	gaps            []time.Duration
	service         string
}

func traces(specs ...attemptSpec) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, s := range specs {
		rs := td.ResourceSpans().AppendEmpty()
		if s.service != "" {
			rs.Resource().Attributes().PutStr(semconv.AttrServiceName, s.service)
		}
		span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		span.Attributes().PutStr(semconv.AttrProviderName, s.provider)
		span.Attributes().PutStr(semconv.AttrRequestModel, s.model)
		start := t0.Add(-time.Minute)
		span.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		if s.ttft == 0 {
			span.Attributes().PutStr(semconv.AttrHedgeOutcome, semconv.HedgeOutcomeLoser)
			span.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(s.ran)))
			continue
		}
		at := start.Add(s.ttft)
		for i := 0; i <= len(s.gaps); i++ {
			if i > 0 {
				at = at.Add(s.gaps[i-1])
			}
			ev := span.Events().AppendEmpty()
			ev.SetName(semconv.EventChunk)
			ev.SetTimestamp(pcommon.NewTimestampFromTime(at))
		}
		span.SetEndTimestamp(pcommon.NewTimestampFromTime(at))
	}
	return td
}

func newTestAdvisor(tb testing.TB, cfg *Config) (*advisor, *clockwork.FakeClock) {
	tb.Helper()
	require.NoError(tb, cfg.Validate())
	clock := clockwork.NewFakeClockAt(t0)
	a, err := newAdvisor(exportertest.NewNopSettings(metadata.Type), cfg, clock)
	require.NoError(tb, err)
	return a, clock
}

func get(t *testing.T, a *advisor, query string) (int, advice.Response) {
	t.Helper()
	rec := httptest.NewRecorder()
	a.serveAdvice(rec, httptest.NewRequest(http.MethodGet, AdvicePath+query, http.NoBody))
	var resp advice.Response
	if rec.Code == http.StatusOK {
		assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
	}
	return rec.Code, resp
}

func TestAdviceFromWinnersAndLosers(t *testing.T) {
	a, _ := newTestAdvisor(t, testConfig())
	var specs []attemptSpec
	for i := range 18 {
		specs = append(specs, attemptSpec{
			provider: "openai", model: "gpt-4o", ttft: time.Duration(i+1) * 100 * time.Millisecond,
			gaps: []time.Duration{20 * time.Millisecond, 30 * time.Millisecond},
		})
	}
	// Two losers cancelled at 5 s: their TTFT exceeds 5 s.
	specs = append(specs, attemptSpec{provider: "openai", model: "gpt-4o", ran: 5 * time.Second},
		attemptSpec{provider: "openai", model: "gpt-4o", ran: 5 * time.Second})
	require.NoError(t, a.consumeTraces(context.Background(), traces(specs...)))

	code, resp := get(t, a, "")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, 600.0, resp.WindowS)
	require.Len(t, resp.Advice, 1)
	e := resp.Advice[0]
	assert.Equal(t, "openai", e.Provider)
	assert.Equal(t, "gpt-4o", e.Model)
	assert.Equal(t, int64(20), e.Samples)
	assert.Equal(t, int64(2), e.Censored)
	assert.InEpsilon(t, 1000, e.TTFTMs["p50"], 0.02)
	assert.InEpsilon(t, 1800, e.TTFTMs["p90"], 0.02, "the losers count: 18 of 20 is p90")
	assert.NotContains(t, e.TTFTMs, "p95", "above the last event only censored samples: unknown")
	assert.Nil(t, e.HedgeDelayMs, "p95 not identified: no recommendation")
	require.NotNil(t, e.StallAfterMs)
	assert.InEpsilon(t, 30, *e.StallAfterMs, 0.02)
}

func TestAdviceMinSamples(t *testing.T) {
	a, clock := newTestAdvisor(t, testConfig())
	spec := attemptSpec{provider: "openai", model: "gpt-4o", ttft: time.Second, gaps: []time.Duration{time.Millisecond}}
	for i := range 10 {
		require.NoError(t, a.consumeTraces(context.Background(), traces(spec)))
		clock.Advance(answerTTL) // a fresh answer
		_, resp := get(t, a, "")
		require.Len(t, resp.Advice, 1)
		if i < 9 {
			assert.Nil(t, resp.Advice[0].HedgeDelayMs, "%d samples", i+1)
			assert.Contains(t, resp.Advice[0].TTFTMs, "p95", "quantiles are shown below min_samples")
		} else {
			require.NotNil(t, resp.Advice[0].HedgeDelayMs)
			assert.InEpsilon(t, 1000, *resp.Advice[0].HedgeDelayMs, 0.02)
		}
	}
}

func TestAdviceFilters(t *testing.T) {
	a, _ := newTestAdvisor(t, testConfig())
	require.NoError(t, a.consumeTraces(context.Background(), traces(
		attemptSpec{provider: "openai", model: "gpt-4o", ttft: time.Second},
		attemptSpec{provider: "openai", model: "gpt-4.1", ttft: time.Second},
		attemptSpec{provider: "anthropic", model: "claude-sonnet-4-5", ttft: time.Second},
	)))
	for query, want := range map[string][]string{
		"":                                 {"anthropic/claude-sonnet-4-5", "openai/gpt-4.1", "openai/gpt-4o"},
		"?provider=openai":                 {"openai/gpt-4.1", "openai/gpt-4o"},
		"?model=claude-sonnet-4-5":         {"anthropic/claude-sonnet-4-5"},
		"?provider=openai&model=gpt-4o":    {"openai/gpt-4o"},
		"?provider=anthropic&model=gpt-4o": nil,
	} {
		code, resp := get(t, a, query)
		require.Equal(t, http.StatusOK, code)
		var got []string
		for _, e := range resp.Advice {
			got = append(got, e.Provider+"/"+e.Model)
		}
		assert.Equal(t, want, got, query)
	}
}

func TestAdviceRefusals(t *testing.T) {
	a, _ := newTestAdvisor(t, testConfig())
	rec := httptest.NewRecorder()
	a.serveAdvice(rec, httptest.NewRequest(http.MethodPost, AdvicePath, strings.NewReader("{}")))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	assert.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))

	code, _ := get(t, a, "?model="+strings.Repeat("x", 2000))
	assert.Equal(t, http.StatusBadRequest, code)
}

func TestAdviceSeriesBound(t *testing.T) {
	cfg := testConfig()
	cfg.MaxSeries = 2
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	clock := clockwork.NewFakeClockAt(t0)
	a, err := newAdvisor(metadatatest.NewSettings(tel), cfg, clock)
	require.NoError(t, err)
	for _, m := range []string{"a", "b", "c"} {
		require.NoError(t, a.consumeTraces(context.Background(), traces(attemptSpec{provider: "p", model: m, ttft: time.Second})))
	}
	_, resp := get(t, a, "")
	assert.Len(t, resp.Advice, 2)
	assert.Equal(t, int64(1), a.store.Dropped())
	metadatatest.AssertEqualExporterHedgeAdvisorAttemptsRecorded(t, tel, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualExporterHedgeAdvisorAttemptsDropped(t, tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())

	clock.Advance(cfg.Window)
	require.NoError(t, a.consumeTraces(context.Background(), traces(attemptSpec{provider: "p", model: "c", ttft: time.Second})))
	_, resp = get(t, a, "")
	require.Len(t, resp.Advice, 1, "idle series free their place after a window")
	assert.Equal(t, "c", resp.Advice[0].Model)
}

func TestAdviceWindowRotation(t *testing.T) {
	a, clock := newTestAdvisor(t, testConfig())
	spec := attemptSpec{provider: "openai", model: "gpt-4o", ttft: time.Second}
	require.NoError(t, a.consumeTraces(context.Background(), traces(spec, spec)))
	clock.Advance(5 * time.Minute)
	spec.ttft = 3 * time.Second
	require.NoError(t, a.consumeTraces(context.Background(), traces(spec)))
	_, resp := get(t, a, "")
	assert.Equal(t, int64(3), resp.Advice[0].Samples)

	clock.Advance(5 * time.Minute) // the first samples are a window old
	_, resp = get(t, a, "")
	require.Len(t, resp.Advice, 1)
	assert.Equal(t, int64(1), resp.Advice[0].Samples)
	assert.InEpsilon(t, 3000, resp.Advice[0].TTFTMs["p50"], 0.02)

	clock.Advance(10 * time.Minute)
	_, resp = get(t, a, "")
	assert.Empty(t, resp.Advice, "a series idle for a window is not advised")
}

func TestAdviceDimensions(t *testing.T) {
	cfg := testConfig()
	none := "none"
	cfg.Dimensions = []dimension.Dimension{{Name: semconv.AttrServiceName, Default: &none}}
	a, _ := newTestAdvisor(t, cfg)
	require.NoError(t, a.consumeTraces(context.Background(), traces(
		attemptSpec{provider: "openai", model: "gpt-4o", ttft: time.Second, service: "checkout"},
		attemptSpec{provider: "openai", model: "gpt-4o", ttft: time.Second},
	)))
	_, resp := get(t, a, "")
	require.Len(t, resp.Advice, 2)
	assert.Equal(t, map[string]string{"service.name": "checkout"}, resp.Advice[0].Attributes)
	assert.Equal(t, map[string]string{"service.name": "none"}, resp.Advice[1].Attributes)
}

// TestAdviceCensoringOnHedgedTraffic feeds spans of a hedged fleet (delay at
// the p75, so a quarter of the calls hedge) and checks the served p95
// against the true one, which the winners alone would underestimate.
func TestAdviceCensoringOnHedgedTraffic(t *testing.T) {
	a, _ := newTestAdvisor(t, testConfig())
	rng := rand.New(rand.NewPCG(1, 2))
	draw := func() time.Duration { return time.Duration(rng.ExpFloat64() * float64(time.Second)) }
	delay := time.Duration(1.3863 * float64(time.Second)) // p75 of an exponential of mean 1 s
	var specs []attemptSpec
	for range 20000 {
		primary := draw()
		if primary <= delay {
			specs = append(specs, attemptSpec{provider: "p", model: "m", ttft: primary})
			continue
		}
		hedge := draw()
		if delay+hedge < primary {
			specs = append(specs, attemptSpec{provider: "p", model: "m", ran: delay + hedge},
				attemptSpec{provider: "p", model: "m", ttft: hedge})
		} else {
			specs = append(specs, attemptSpec{provider: "p", model: "m", ttft: primary},
				attemptSpec{provider: "p", model: "m", ran: primary - delay})
		}
	}
	require.NoError(t, a.consumeTraces(context.Background(), traces(specs...)))
	_, resp := get(t, a, "")
	require.Len(t, resp.Advice, 1)
	require.NotNil(t, resp.Advice[0].HedgeDelayMs)
	assert.InEpsilon(t, 2995.7, *resp.Advice[0].HedgeDelayMs, 0.05, "the true p95 is ln 20 s")
	assert.Positive(t, resp.Advice[0].Censored)
}

// TestServeOverHTTP starts the exporter from its factory on a loopback port
// and fetches the advice over the network.
func TestServeOverHTTP(t *testing.T) {
	endpoint := freeEndpoint(t)
	cfg := testConfig()
	cfg.ServerConfig.NetAddr.Endpoint = endpoint
	ctx := clockwork.AddToContext(context.Background(), clockwork.NewFakeClockAt(t0))
	exp, err := NewFactory().CreateTraces(ctx, exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, exp.Shutdown(context.Background())) }()

	var specs []attemptSpec
	for range 10 {
		specs = append(specs, attemptSpec{provider: "openai", model: "gpt-4o", ttft: 800 * time.Millisecond})
	}
	require.NoError(t, exp.ConsumeTraces(context.Background(), traces(specs...)))

	resp, err := http.Get(fmt.Sprintf("http://%s%s?provider=openai", endpoint, AdvicePath))
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var got advice.Response
	require.NoError(t, json.Unmarshal(body, &got))
	require.Len(t, got.Advice, 1)
	require.NotNil(t, got.Advice[0].HedgeDelayMs)
	assert.InEpsilon(t, 800, *got.Advice[0].HedgeDelayMs, 0.02)
	assert.Contains(t, string(body), `"hedge_delay_ms":`)

	// Shutdown twice and shutdown without start are fine.
	require.NoError(t, exp.Shutdown(context.Background()))
}

func TestStartFailsOnBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	cfg := testConfig()
	cfg.ServerConfig.NetAddr.Endpoint = ln.Addr().String()
	exp, err := NewFactory().CreateTraces(context.Background(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	require.Error(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, exp.Shutdown(context.Background()))
}

func TestAttemptsThatTellNothingMakeNoSeries(t *testing.T) {
	a, _ := newTestAdvisor(t, testConfig())
	td := traces(attemptSpec{provider: "openai", model: "gpt-4o", ttft: time.Second})
	span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	span.Events().RemoveIf(func(ptrace.SpanEvent) bool { return true })
	span.Status().SetCode(ptrace.StatusCodeError) // failed before any content
	require.NoError(t, a.consumeTraces(context.Background(), td))
	assert.Zero(t, a.store.Len())
}

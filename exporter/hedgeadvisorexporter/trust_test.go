// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgeadvisorexporter

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/streamstall/streamstall/exporter/hedgeadvisorexporter/internal/metadatatest"
	"github.com/streamstall/streamstall/internal/semconv"
)

// telemetryAdvisor is an advisor whose telemetry the test reads.
func telemetryAdvisor(t *testing.T, cfg *Config) (*advisor, *componenttest.Telemetry, *clockwork.FakeClock) {
	t.Helper()
	require.NoError(t, cfg.Validate())
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	clock := clockwork.NewFakeClockAt(t0)
	a, err := newAdvisor(metadatatest.NewSettings(tel), cfg, clock)
	require.NoError(t, err)
	return a, tel, clock
}

func assertCounts(t *testing.T, tel *componenttest.Telemetry, recorded, untrusted, capped int64) {
	t.Helper()
	for _, m := range []struct {
		name string
		want int64
	}{
		{"otelcol_exporter_hedge_advisor_attempts.recorded", recorded},
		{"otelcol_exporter_hedge_advisor_attempts.untrusted", untrusted},
		{"otelcol_exporter_hedge_advisor_attempts.capped", capped},
	} {
		got, err := tel.GetMetric(m.name)
		if m.want == 0 {
			assert.Error(t, err, "%s: nothing counted", m.name)
			continue
		}
		require.NoError(t, err, m.name)
		metricdatatest.AssertAggregationsEqual(t, metricdata.Sum[int64]{
			Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[int64]{{Value: m.want}},
		}, got.Data, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	}
}

// mark sets an attribute on every span of td.
func mark(td ptrace.Traces, key, value string) ptrace.Traces {
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				s.Attributes().PutStr(key, value)
			}
		}
	}
	return td
}

// withResource sets a resource attribute on every resource of td.
func withResource(td ptrace.Traces, key, value string) ptrace.Traces {
	for _, rs := range td.ResourceSpans().All() {
		rs.Resource().Attributes().PutStr(key, value)
	}
	return td
}

func fleet(n int, ttft time.Duration) []attemptSpec {
	specs := make([]attemptSpec, n)
	for i := range specs {
		specs[i] = attemptSpec{provider: "openai", model: "gpt-4o", ttft: ttft, gaps: []time.Duration{50 * time.Millisecond}}
	}
	return specs
}

func TestIngestSpansAreNotTrustedByDefault(t *testing.T) {
	a, tel, _ := telemetryAdvisor(t, testConfig())
	ctx := context.Background()
	require.NoError(t, a.consumeTraces(ctx, mark(traces(fleet(10, time.Hour)...), semconv.AttrCapture, semconv.CaptureIngest)))
	require.NoError(t, a.consumeTraces(ctx, mark(traces(fleet(10, 400*time.Millisecond)...), semconv.AttrCapture, semconv.CaptureProxy)))
	_, resp := get(t, a, "")
	require.Len(t, resp.Advice, 1)
	assert.Equal(t, int64(10), resp.Advice[0].Samples, "only the proxy's spans count")
	require.NotNil(t, resp.Advice[0].HedgeDelayMs)
	assert.InEpsilon(t, 400, *resp.Advice[0].HedgeDelayMs, 0.02)
	assertCounts(t, tel, 10, 10, 0)

	cfg := testConfig()
	cfg.Trust.Ingest = true
	a, tel, _ = telemetryAdvisor(t, cfg)
	require.NoError(t, a.consumeTraces(ctx, mark(traces(fleet(10, time.Second)...), semconv.AttrCapture, semconv.CaptureIngest)))
	assertCounts(t, tel, 10, 0, 0)
}

func TestRequireAuth(t *testing.T) {
	cfg := testConfig()
	cfg.Trust.RequireAuth = true
	a, tel, _ := telemetryAdvisor(t, cfg)
	require.NoError(t, a.consumeTraces(context.Background(), traces(fleet(5, time.Second)...)))
	authed := client.NewContext(context.Background(), client.Info{Auth: authData{}})
	require.NoError(t, a.consumeTraces(authed, traces(fleet(3, time.Second)...)))
	assertCounts(t, tel, 3, 5, 0)
}

// authData is what an authenticator puts in client.Info.
type authData struct{}

func (authData) GetAttribute(string) any     { return nil }
func (authData) GetAttributeNames() []string { return nil }

// TestClientInfoReachesTheExporter: the exporter built by the factory (with
// exporterhelper around it) sees the request's client.Info, as the
// receivers' pipelines hand it on.
func TestClientInfoReachesTheExporter(t *testing.T) {
	cfg := testConfig()
	cfg.Trust.RequireAuth = true
	cfg.ServerConfig.NetAddr.Endpoint = freeEndpoint(t)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	exp, err := NewFactory().CreateTraces(context.Background(), metadatatest.NewSettings(tel), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, exp.Shutdown(context.Background())) }()
	require.NoError(t, exp.ConsumeTraces(context.Background(), traces(fleet(2, time.Second)...)))
	require.NoError(t, exp.ConsumeTraces(client.NewContext(context.Background(), client.Info{Auth: authData{}}), traces(fleet(1, time.Second)...)))
	assertCounts(t, tel, 1, 2, 0)
}

func TestTrustedResourceAttributes(t *testing.T) {
	cfg := testConfig()
	cfg.Trust.ResourceAttributes = map[string][]string{"deployment.environment.name": {"production", "staging"}}
	a, tel, _ := telemetryAdvisor(t, cfg)
	ctx := context.Background()
	require.NoError(t, a.consumeTraces(ctx, withResource(traces(fleet(2, time.Second)...), "deployment.environment.name", "production")))
	require.NoError(t, a.consumeTraces(ctx, withResource(traces(fleet(3, time.Second)...), "deployment.environment.name", "staging")))
	require.NoError(t, a.consumeTraces(ctx, withResource(traces(fleet(4, time.Second)...), "deployment.environment.name", "dev")))
	require.NoError(t, a.consumeTraces(ctx, traces(fleet(5, time.Second)...)))
	assertCounts(t, tel, 5, 9, 0)
}

func TestClientKey(t *testing.T) {
	td := traces(attemptSpec{provider: "p", model: "m", ttft: time.Second})
	res := td.ResourceSpans().At(0).Resource().Attributes()
	assert.Equal(t, "unknown", clientKey(res, ""))
	assert.Equal(t, "addr:10.0.0.1:5000", clientKey(res, "10.0.0.1:5000"))
	res.PutStr(semconv.AttrServiceInstanceID, "")
	assert.Equal(t, "addr:10.0.0.1:5000", clientKey(res, "10.0.0.1:5000"), "an empty id is no id")
	res.PutStr(semconv.AttrServiceInstanceID, "pod-7")
	assert.Equal(t, "id:pod-7", clientKey(res, "10.0.0.1:5000"))
}

// TestShareCapPerClient: a fleet of 50 instances, then one instance sending
// 25 attempts of 50 min (plausible: under chunk_events::max_duration, so only
// the cap stands in their way). The cap holds the advice and counts the
// refusals.
func TestShareCapPerClient(t *testing.T) {
	cfg := testConfig()
	cfg.MinSamples = 20
	a, tel, clock := telemetryAdvisor(t, cfg)
	ctx := context.Background()
	for i := range 200 {
		td := withResource(traces(fleet(1, 400*time.Millisecond)...), semconv.AttrServiceInstanceID, fmt.Sprintf("honest-%d", i%50))
		require.NoError(t, a.consumeTraces(ctx, td))
	}
	_, before := get(t, a, "")
	require.NotNil(t, before.Advice[0].HedgeDelayMs)

	forged := withResource(traces(fleet(25, 50*time.Minute)...), semconv.AttrServiceInstanceID, "mallory")
	require.NoError(t, a.consumeTraces(ctx, forged))
	clock.Advance(answerTTL)
	_, after := get(t, a, "")
	require.NotNil(t, after.Advice[0].HedgeDelayMs)
	assert.InEpsilon(t, *before.Advice[0].HedgeDelayMs, *after.Advice[0].HedgeDelayMs, 0.10)
	assert.Equal(t, int64(209), after.Advice[0].Samples, "mallory holds 9 samples: under 4 %% of 209")
	assertCounts(t, tel, 209, 0, 16)

	// Without an instance id, the connection's address tells clients apart.
	peer := client.NewContext(ctx, client.Info{Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 4000}})
	require.NoError(t, a.consumeTraces(peer, traces(fleet(25, 50*time.Minute)...)))
	assertCounts(t, tel, 209+9, 0, 16+16)
}

// TestAnswerIsComputedOncePerSecond: polls within a second get the same
// answer; the next second's poll sees what came in.
func TestAnswerIsComputedOncePerSecond(t *testing.T) {
	a, clock := newTestAdvisor(t, testConfig())
	ctx := context.Background()
	require.NoError(t, a.consumeTraces(ctx, traces(fleet(10, time.Second)...)))
	_, first := get(t, a, "")
	require.Len(t, first.Advice, 1)
	assert.Equal(t, int64(10), first.Advice[0].Samples)

	require.NoError(t, a.consumeTraces(ctx, traces(fleet(10, time.Second)...)))
	clock.Advance(answerTTL - time.Millisecond)
	_, cached := get(t, a, "")
	assert.Equal(t, int64(10), cached.Advice[0].Samples, "served from the answer of a moment ago")
	_, filtered := get(t, a, "?provider=openai")
	assert.Equal(t, int64(10), filtered.Advice[0].Samples, "every filter reads the same answer")

	clock.Advance(time.Millisecond)
	_, fresh := get(t, a, "")
	assert.Equal(t, int64(20), fresh.Advice[0].Samples)
	_, filtered = get(t, a, "?provider=openai")
	assert.Equal(t, int64(20), filtered.Advice[0].Samples, "the filters' bodies are encoded anew")
	_, none := get(t, a, "?provider=anthropic")
	assert.Empty(t, none.Advice)

	// Bodies are kept for a bounded number of filters.
	for i := range 2 * maxCachedBodies {
		code, _ := get(t, a, fmt.Sprintf("?model=m%d", i))
		require.Equal(t, 200, code)
	}
	assert.Len(t, a.bodies, maxCachedBodies)
}

// TestOwnProxyIsNotCapped: the spans this collector's own proxy measured
// (llm.stream.capture = proxy, brought by no connection) are measurements,
// not a client's claims: no share caps them, while the same spans arriving
// over a connection are one client's, capped as any other.
func TestOwnProxyIsNotCapped(t *testing.T) {
	cfg := testConfig()
	cfg.MinSamples = 20
	a, tel, _ := telemetryAdvisor(t, cfg)
	ctx := context.Background()
	for i := range 20 {
		td := withResource(traces(fleet(1, 400*time.Millisecond)...), semconv.AttrServiceInstanceID, fmt.Sprintf("honest-%d", i))
		require.NoError(t, a.consumeTraces(ctx, td))
	}
	own := mark(traces(fleet(300, 400*time.Millisecond)...), semconv.AttrCapture, semconv.CaptureProxy)
	require.NoError(t, a.consumeTraces(ctx, own))
	assertCounts(t, tel, 320, 0, 0)

	a, tel, _ = telemetryAdvisor(t, cfg)
	for i := range 20 {
		td := withResource(traces(fleet(1, 400*time.Millisecond)...), semconv.AttrServiceInstanceID, fmt.Sprintf("honest-%d", i))
		require.NoError(t, a.consumeTraces(ctx, td))
	}
	peer := client.NewContext(ctx, client.Info{Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 4000}})
	forged := mark(traces(fleet(300, 400*time.Millisecond)...), semconv.AttrCapture, semconv.CaptureProxy)
	require.NoError(t, a.consumeTraces(peer, forged))
	assert.Less(t, counted(t, tel, "recorded"), int64(40), "a connection's spans are one client's, whatever they say of themselves")
	assert.Positive(t, counted(t, tel, "capped"))
}

// counted is the value of the exporter's attempts.<what> counter.
func counted(t *testing.T, tel *componenttest.Telemetry, what string) int64 {
	t.Helper()
	m, err := tel.GetMetric("otelcol_exporter_hedge_advisor_attempts." + what)
	require.NoError(t, err, what)
	return m.Data.(metricdata.Sum[int64]).DataPoints[0].Value
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/advice"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// A fleet of guarded proxies learning from one hedge_advisor: three proxy
// collectors send their spans to a fourth collector whose hedge_advisor
// serves the fleet's gaps and delays; each proxy's guard takes its auto
// values from that advice first, its own learning next, the floor last.

// fleetAdvisorConfig is the advisor's collector: OTLP in, stall, the advisor.
const fleetAdvisorConfig = `
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${OTLP}
processors:
  stall:
exporters:
  hedge_advisor:
    endpoint: 127.0.0.1:${ADVISOR}
    min_samples: ${MIN}
service:
  pipelines:
    traces:
      receivers: [otlp]
      processors: [stall]
      exporters: [hedge_advisor]
`

// fleetProxyConfig is one proxy of the fleet: stall_timeout and the hedge
// delay learned, from the advisor first, its spans sent to the advisor and
// to the test's sink. A fleet of real proxies batches its spans; these send
// each at once so that the test need not wait for a batch.
const fleetProxyConfig = `
receivers:
  sse_capture:
    proxy:
      endpoint: 127.0.0.1:${PROXY}
      upstream:
        endpoint: ${PRIMARY}
      guard:
        stall_timeout: auto
        auto_stall:
          multiple: ${MULTIPLE}
          floor: ${FLOOR}
          min_samples: ${MIN}
        hedge:
          delay: auto
          fallback_delay: 5s
          min_samples: ${MIN}
          max_attempts: 1
        advisor:
          endpoint: http://127.0.0.1:${ADVISOR}
          interval: 200ms
          max_age: ${MAXAGE}
exporters:
  otlp_http/advisor:
    endpoint: http://127.0.0.1:${OTLP}
    retry_on_failure:
      enabled: false
    sending_queue:
      enabled: false
` + sinkExporter + `service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [sse_capture]
      exporters: [otlp_http/advisor, otlp_http]
`

const (
	// fleetMultiple times the fleet's p99.9 gap of about 50 ms is about
	// 200 ms: twice the floor, so that a cut at the fleet's deadline cannot
	// be the floor's.
	fleetMultiple = 4
	fleetFloor    = 100 * time.Millisecond
	// fleetMinSamples: attempts an advice entry needs, and gaps the proxy's
	// own learner needs.
	fleetMinSamples = 5
	fleetMaxAge     = 2 * time.Second
	fleetModel      = "e2e-fleet"
)

type fleetProxy struct {
	url  string
	port int
	proc *harness.Process
}

func startFleetProxy(t *testing.T, port int, primary, sink string, otlp, adv int) *fleetProxy {
	t.Helper()
	p := &fleetProxy{url: fmt.Sprintf("http://127.0.0.1:%d", port), port: port}
	p.proc = collector(t, fill(fleetProxyConfig, "PROXY", port, "PRIMARY", primary, "SINK", sink, "OTLP", otlp, "ADVISOR", adv,
		"MULTIPLE", fleetMultiple, "FLOOR", fleetFloor, "MIN", fleetMinSamples, "MAXAGE", fleetMaxAge))
	return p
}

// fleetAdvice is the advisor's entry for the fleet's model, once it has
// enough attempts and a p99.9 gap.
func fleetAdvice(ctx context.Context, t *testing.T, adv int) advice.Entry {
	t.Helper()
	var entry advice.Entry
	eventually(t, 20*time.Second, "the advisor's advice for "+fleetModel, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet,
			fmt.Sprintf("http://127.0.0.1:%d%s?provider=openai&model=%s", adv, advice.Path, fleetModel), http.NoBody)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		var a advice.Response
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			return err
		}
		for _, e := range a.Advice {
			if _, ok := e.GapMs["p999"]; ok && e.Samples >= fleetMinSamples && e.HedgeDelayMs != nil {
				entry = e
				return nil
			}
		}
		return fmt.Errorf("%+v: %w", a.Advice, errNotYet)
	})
	return entry
}

// cutStream streams a stall through proxy and returns its span: two
// chunks, then a silence the guard must cut.
func cutStream(ctx context.Context, t *testing.T, sink *harness.Sink, proxy string, n int) ptrace.Span {
	t.Helper()
	content, errorAt, body := autoStream(ctx, t, proxy, fleetModel, autoStallScript)
	require.Len(t, content, 2, body)
	require.False(t, errorAt.IsZero(), "the silence was cut with the guard's error frame: %s", body)
	sp := spansByStart(t, sink, fleetModel, n)[n-1]
	require.Equal(t, "stall_timeout", strAttr(sp, semconv.AttrErrorType))
	return sp
}

func TestFleetOfProxiesLearnsFromOneAdvisor(t *testing.T) {
	sink := startSink(t)
	primary := startFakellm(t)
	otlp, adv := freePort(t), freePort(t)
	advisor := collector(t, fill(fleetAdvisorConfig, "OTLP", otlp, "ADVISOR", adv, "MIN", fleetMinSamples))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Proxies 1 and 2 serve the model; proxy 3 never has.
	p1 := startFleetProxy(t, freePort(t), primary, sink.URL, otlp, adv)
	p2 := startFleetProxy(t, freePort(t), primary, sink.URL, otlp, adv)
	const learning = 6
	for i := range learning {
		p := []*fleetProxy{p1, p2}[i%2]
		_, errorAt, body := autoStream(ctx, t, p.url, fleetModel, autoLearnScript)
		require.True(t, errorAt.IsZero(), "learning stream %d was not cut: %s", i, body)
	}
	spansByStart(t, sink, fleetModel, learning)
	entry := fleetAdvice(ctx, t, adv)
	fleetGap := entry.GapMs["p999"]
	want := max(fleetMultiple*fleetGap, float64(fleetFloor.Milliseconds()))
	t.Logf("the fleet's p99.9 gap %.1f ms over %d attempts: a stall deadline of %.0f ms; hedge delay %.1f ms",
		fleetGap, entry.Samples, want, *entry.HedgeDelayMs)
	require.Greater(t, want, float64(fleetFloor.Milliseconds())+50, "the fleet's deadline is above the floor, or the test tells nothing")

	// Proxy 3's first call of the model has the fleet's deadline and delay.
	p3port := freePort(t)
	p3 := startFleetProxy(t, p3port, primary, sink.URL, otlp, adv)
	n := learning + 1
	sp := cutStream(ctx, t, sink, p3.url, n)
	assert.Equal(t, semconv.StallTimeoutSourceAdvisor, strAttr(sp, semconv.AttrStallTimeoutSource))
	assert.InEpsilon(t, want, floatAttr(t, sp, semconv.AttrStallTimeoutMs), 0.02, "the fleet's deadline")
	assert.Equal(t, semconv.HedgeDelaySourceFleet, strAttr(sp, semconv.AttrHedgeDelaySource))
	assert.InEpsilon(t, *entry.HedgeDelayMs, floatAttr(t, sp, semconv.AttrHedgeDelayMs), 0.05, "the fleet's hedge delay")

	// A restarted proxy has the fleet's values on its first call again.
	p3.proc.Stop(10 * time.Second)
	p3 = startFleetProxy(t, p3port, primary, sink.URL, otlp, adv)
	n++
	sp = cutStream(ctx, t, sink, p3.url, n)
	assert.Equal(t, semconv.StallTimeoutSourceAdvisor, strAttr(sp, semconv.AttrStallTimeoutSource), "restarted")
	assert.Equal(t, semconv.HedgeDelaySourceFleet, strAttr(sp, semconv.AttrHedgeDelaySource), "restarted")

	// The advisor goes away: once its last advice is max_age old, proxy 3
	// has learned too little itself and watches at the floor...
	advisor.Stop(10 * time.Second)
	time.Sleep(fleetMaxAge + 500*time.Millisecond)
	n++
	sp = cutStream(ctx, t, sink, p3.url, n)
	assert.Equal(t, semconv.StallTimeoutSourceFloor, strAttr(sp, semconv.AttrStallTimeoutSource))
	assert.Equal(t, float64(fleetFloor.Milliseconds()), floatAttr(t, sp, semconv.AttrStallTimeoutMs))
	assert.Equal(t, semconv.HedgeDelaySourceFallback, strAttr(sp, semconv.AttrHedgeDelaySource))

	// ...then, once it has min_samples gaps of its own, at its own deadline.
	for i := range 2 {
		_, errorAt, body := autoStream(ctx, t, p3.url, fleetModel, autoLearnScript)
		require.True(t, errorAt.IsZero(), "local learning stream %d was not cut: %s", i, body)
		n++
		spansByStart(t, sink, fleetModel, n)
	}
	n++
	sp = cutStream(ctx, t, sink, p3.url, n)
	assert.Equal(t, semconv.StallTimeoutSourceLocal, strAttr(sp, semconv.AttrStallTimeoutSource))
	assert.Greater(t, floatAttr(t, sp, semconv.AttrStallTimeoutMs), float64(fleetFloor.Milliseconds()), "its own learned deadline")
}

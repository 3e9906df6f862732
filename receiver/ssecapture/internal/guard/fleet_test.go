// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/advice"
	"github.com/streamstall/streamstall/internal/hedgecore"
)

const fleetBody = `{"window_s": 600, "advice": [
  {"provider": "openai", "model": "gpt-x", "samples": 300, "censored": 20,
   "ttft_ms": {"p95": 400}, "gap_ms": {"p99": 30, "p999": 80}, "hedge_delay_ms": 400, "stall_after_ms": 80},
  {"provider": "OpenAI", "model": "gpt-x", "samples": 100, "ttft_ms": {}, "gap_ms": {"p999": 160}},
  {"provider": "anthropic", "model": "cold", "samples": 3, "ttft_ms": {"p50": 20}, "gap_ms": {}}]}`

// advisorStub answers the advice it holds, or 503 when it holds none.
type advisorStub struct {
	body    atomic.Value // string
	fetches atomic.Int64
}

func (a *advisorStub) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	a.fetches.Add(1)
	if b, _ := a.body.Load().(string); b != "" {
		_, _ = w.Write([]byte(b))
		return
	}
	http.Error(w, "down", http.StatusServiceUnavailable)
}

func newFleetFixture(tb testing.TB, body string) (*Fleet, *advisorStub, *clockwork.FakeClock) {
	tb.Helper()
	stub := &advisorStub{}
	stub.body.Store(body)
	srv := httptest.NewServer(stub)
	tb.Cleanup(srv.Close)
	clock := clockwork.NewFakeClockAt(time.Unix(1_700_000_000, 0))
	f := NewFleet(FleetSettings{
		URL: srv.URL + advice.Path, Client: srv.Client(), Interval: 30 * time.Second, Timeout: time.Second,
		MaxAge: 2 * time.Minute, Clock: clock,
	})
	f.Start()
	tb.Cleanup(f.Shutdown)
	return f, stub, clock
}

func TestFleetHasTheAdviceOnTheFirstCall(t *testing.T) {
	f, _, clock := newFleetFixture(t, fleetBody)
	now := clock.Now().UnixNano()
	d, ok := f.HedgeDelay(now, "openai", "gpt-x")
	require.True(t, ok)
	assert.Equal(t, advice.Weighted{Nanos: int64(400 * time.Millisecond), Samples: 300}, d)
	g, ok := f.Gap(now, "OPENAI", "gpt-x")
	require.True(t, ok, "providers match without case")
	assert.Equal(t, advice.Weighted{Nanos: int64(100 * time.Millisecond), Samples: 400}, g, "both entries of the key, weighted")
	_, ok = f.Gap(now, "anthropic", "cold")
	assert.False(t, ok, "an entry without the quantile recommends nothing")
	_, ok = f.HedgeDelay(now, "openai", "unknown")
	assert.False(t, ok)
}

func TestFleetKeepsTheLastGoodAdviceUntilMaxAge(t *testing.T) {
	f, stub, clock := newFleetFixture(t, fleetBody)
	stub.body.Store("") // the advisor goes down
	for range 3 {
		n := stub.fetches.Load()
		clock.Advance(30 * time.Second)
		require.Eventually(t, func() bool { return stub.fetches.Load() > n }, 5*time.Second, time.Millisecond)
	}
	_, ok := f.HedgeDelay(clock.Now().UnixNano(), "openai", "gpt-x")
	assert.True(t, ok, "90 s after the last good fetch: still used")
	clock.Advance(31 * time.Second)
	_, ok = f.HedgeDelay(clock.Now().UnixNano(), "openai", "gpt-x")
	assert.False(t, ok, "past max_age the advice is stale")
}

func TestFleetWithoutAnAdvisorRecommendsNothing(t *testing.T) {
	f := NewFleet(FleetSettings{URL: "http://127.0.0.1:1" + advice.Path, Interval: time.Minute, Timeout: 100 * time.Millisecond, MaxAge: time.Minute})
	f.Start()
	defer f.Shutdown()
	_, ok := f.Gap(time.Now().UnixNano(), "openai", "gpt-x")
	assert.False(t, ok)
	var none *Fleet
	_, ok = none.HedgeDelay(0, "openai", "gpt-x")
	assert.False(t, ok, "a guard without an advisor asks a nil fleet")
	(&Fleet{}).Shutdown() // without Start
}

// fleetGuard is a guard whose default rule learns its stall timeout and
// hedge delay, asking fleet first.
func fleetGuard(f *Fleet, clock clockwork.Clock) *Guard {
	return New(Settings{
		Default: Rule{
			StallTimeout: AutoTimeout, AutoStall: true,
			AutoDelay: true, Quantile: 0.95, FallbackDelay: 2 * time.Second, MinSamples: 20, MaxAttempts: 2,
		},
		AutoStall: AutoStall{Multiple: 3, Floor: 50 * time.Millisecond, MinSamples: 20},
		Clock:     clock,
		Fleet:     f,
	})
}

func TestFallbackOrderAdvisorLocalFloor(t *testing.T) {
	f, stub, clock := newFleetFixture(t, fleetBody)
	g := fleetGuard(f, clock)
	pol := g.For("openai", "gpt-x")
	now := clock.Now().UnixNano()

	// Advisor: three times the fleet's p99.9 gap (100 ms over both entries).
	assert.Equal(t, StallAdvisor, pol.StallTimeoutSource(true))
	assert.Equal(t, 300*time.Millisecond, pol.StallTimeout(true))
	pol.takeFleetDelay(now)
	d, src := pol.hp.DelayFrom(0)
	assert.Equal(t, hedgecore.DelayFleet, src)
	assert.Equal(t, int64(400*time.Millisecond), d)

	// A model the fleet has too few attempts of: the floor until the proxy
	// learns it itself.
	cold := g.For("anthropic", "cold")
	assert.Equal(t, StallFloor, cold.StallTimeoutSource(true))
	assert.Equal(t, 50*time.Millisecond, cold.StallTimeout(true))

	// The advisor goes away: past max_age the proxy's own learning, then
	// (for what it has not learned) the floor.
	stub.body.Store("")
	clock.Advance(2*time.Minute + time.Second)
	now = clock.Now().UnixNano()
	assert.Equal(t, StallFloor, pol.StallTimeoutSource(true), "stale advice is not used; nothing learned here yet")
	pol.takeFleetDelay(now)
	_, src = pol.hp.DelayFrom(0)
	assert.Equal(t, hedgecore.DelayFallback, src)
	gaps := make([]Gap, 40)
	for i := range gaps {
		gaps[i] = Gap{Length: 30 * time.Millisecond}
	}
	pol.ObserveGaps(now, gaps)
	assert.Equal(t, StallLocal, pol.StallTimeoutSource(true))
	assert.InDelta(t, float64(90*time.Millisecond), float64(pol.StallTimeout(true)), float64(2*time.Millisecond),
		"three times its own p99.9 gap")
}

func TestFleetAdviceIsPerProviderAndModel(t *testing.T) {
	f, _, clock := newFleetFixture(t, fleetBody)
	g := fleetGuard(f, clock)
	assert.Equal(t, StallAdvisor, g.For("openai", "gpt-x").StallTimeoutSource(true))
	assert.Equal(t, StallFloor, g.For("azure.ai.openai", "gpt-x").StallTimeoutSource(true), "another provider's model is another series")
	assert.NotSame(t, g.For("openai", "gpt-x"), g.For("azure.ai.openai", "gpt-x"))
}

func TestFixedValuesIgnoreTheFleet(t *testing.T) {
	f, _, clock := newFleetFixture(t, fleetBody)
	g := New(Settings{
		Default: Rule{StallTimeout: time.Second, Delay: 700 * time.Millisecond, MaxAttempts: 2},
		Clock:   clock, Fleet: f,
	})
	pol := g.For("openai", "gpt-x")
	pol.takeFleetDelay(clock.Now().UnixNano())
	d, src := pol.hp.DelayFrom(0)
	assert.Equal(t, hedgecore.DelayFallback, src, "a configured delay stays configured")
	assert.Equal(t, int64(700*time.Millisecond), d)
	assert.Equal(t, StallConfigured, pol.StallTimeoutSource(true))
	assert.Equal(t, time.Second, pol.StallTimeout(true))
}

// TestLearnedStallTimeoutHasACeiling: an advice whose gaps run to hours (a
// broken or hostile advisor, or a model that calls slow tools) would make
// the learned timeout that multiple of them, the watchdog off in effect:
// auto_stall.ceiling bounds it, from the fleet's gaps and from the proxy's
// own alike.
func TestLearnedStallTimeoutHasACeiling(t *testing.T) {
	const hours = `{"window_s": 600, "advice": [{"provider": "openai", "model": "gpt-x", "samples": 300, "gap_ms": {"p999": 7200000}}]}`
	f, stub, clock := newFleetFixture(t, hours)
	g := New(Settings{
		Default:   Rule{StallTimeout: AutoTimeout, AutoStall: true, MaxAttempts: 1},
		AutoStall: AutoStall{Multiple: 10, Floor: time.Second, Ceiling: 10 * time.Minute, MinSamples: 20},
		Clock:     clock,
		Fleet:     f,
	})
	pol := g.For("openai", "gpt-x")
	assert.Equal(t, StallAdvisor, pol.StallTimeoutSource(true))
	assert.Equal(t, 10*time.Minute, pol.StallTimeout(true), "ten times two hours, held at the ceiling")

	stub.body.Store("")
	clock.Advance(3 * time.Minute) // the advice is stale: the proxy's own
	gaps := make([]Gap, 40)
	for i := range gaps {
		gaps[i] = Gap{Length: time.Hour}
	}
	pol.ObserveGaps(clock.Now().UnixNano(), gaps)
	assert.Equal(t, StallLocal, pol.StallTimeoutSource(true))
	assert.Equal(t, 10*time.Minute, pol.StallTimeout(true))
}

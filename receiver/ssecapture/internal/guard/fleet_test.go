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

func newFleetFixture(t *testing.T, body string) (*Fleet, *advisorStub, *clockwork.FakeClock) {
	t.Helper()
	stub := &advisorStub{}
	stub.body.Store(body)
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	clock := clockwork.NewFakeClockAt(time.Unix(1_700_000_000, 0))
	f := NewFleet(FleetSettings{
		URL: srv.URL + advice.Path, Client: srv.Client(), Interval: 30 * time.Second, Timeout: time.Second,
		MaxAge: 2 * time.Minute, Clock: clock,
	})
	f.Start()
	t.Cleanup(f.Shutdown)
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

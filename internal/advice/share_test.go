// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package advice

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	ms400 = int64(400 * time.Millisecond)
	ms50  = int64(50 * time.Millisecond)
)

func cappedConfig() Config {
	cfg := testConfig()
	cfg.MinSamples = 20
	cfg.MaxClientShare = 0.04
	cfg.MaxClients = 128
	return cfg
}

var key = Key{Provider: "openai", Model: "gpt-4o"}

// honestFleet records 200 attempts of TTFT 400 ms with four gaps of 50 ms,
// from 50 clients of four attempts each, in round robin.
func honestFleet(t *testing.T, s *Store) {
	t.Helper()
	for i := range 200 {
		smp := Sample{TTFT: ms400, Gaps: []int64{ms50, ms50, ms50, ms50}, Client: fmt.Sprintf("honest-%d", i%50)}
		require.Equal(t, Recorded, record(s, t0, key, smp), "attempt %d: clients of equal rates are never refused", i)
	}
}

func advised(t *testing.T, s *Store) (delay, stall float64) {
	t.Helper()
	resp := s.Advice(t0, "", "")
	require.Len(t, resp.Advice, 1)
	e := resp.Advice[0]
	require.NotNil(t, e.HedgeDelayMs, "advice removed: %+v", e)
	require.NotNil(t, e.StallAfterMs, "advice removed: %+v", e)
	return *e.HedgeDelayMs, *e.StallAfterMs
}

// TestShareCapHoldsTheAdvice: one client of a fleet of 50 forging attempts
// (slow, fast, censored) cannot move the advice by more than 10 %.
func TestShareCapHoldsTheAdvice(t *testing.T) {
	for _, tt := range []struct {
		name  string
		n     int
		forge Sample
	}{
		{"25 of 10 h", 25, Sample{TTFT: int64(10 * time.Hour)}},
		{"5000 of 1 us", 5000, Sample{TTFT: int64(time.Microsecond)}},
		{"300 censored losers of 1 h", 300, Sample{TTFT: int64(time.Hour), Censored: true}},
		{"gaps of 1 us", 1000, Sample{TTFT: ms400, Gaps: []int64{1000, 1000, 1000, 1000, 1000}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore(cappedConfig(), nil)
			honestFleet(t, s)
			delay, stall := advised(t, s)
			assert.InEpsilon(t, 400, delay, 0.02)
			assert.InEpsilon(t, 50, stall, 0.02)

			capped := 0
			for range tt.n {
				smp := tt.forge
				smp.Client = "mallory"
				if record(s, t0, key, smp) == Capped {
					capped++
				}
			}
			assert.Positive(t, capped, "the forger is capped")
			d, st := advised(t, s)
			assert.InEpsilon(t, delay, d, 0.10, "hedge_delay_ms")
			assert.InEpsilon(t, stall, st, 0.10, "stall_after_ms")
			e := s.Advice(t0, "", "").Advice[0]
			assert.LessOrEqual(t, e.Samples, int64(200+9), "mallory holds at most 4 %% of the TTFT samples")
		})
	}
}

func TestShareCapLoneClientAndEvenShares(t *testing.T) {
	s := NewStore(cappedConfig(), nil)
	for i := range 1000 {
		require.Equal(t, Recorded, record(s, t0, key, Sample{TTFT: ms400, Client: "alone"}), "a lone client holds the whole window (%d)", i)
	}

	// A second client may come up to an even share, no further.
	s = NewStore(cappedConfig(), nil)
	for range 100 {
		record(s, t0, key, Sample{TTFT: ms400, Client: "a"})
	}
	admitted := 0
	for range 1000 {
		if record(s, t0, key, Sample{TTFT: int64(time.Second), Client: "b"}) == Recorded {
			admitted++
		}
	}
	assert.Equal(t, 101, admitted, "b holds at most half of the window, counting its own sample")
	assert.Equal(t, Recorded, record(s, t0, key, Sample{TTFT: ms400, Client: "a"}), "and a is not locked out")
}

func TestShareCapCountsGapsApart(t *testing.T) {
	s := NewStore(cappedConfig(), nil)
	honestFleet(t, s) // 800 gaps
	gaps := make([]int64, 100)
	for i := range gaps {
		gaps[i] = int64(time.Second)
	}
	assert.Equal(t, Capped, record(s, t0, key, Sample{TTFT: ms400, Gaps: gaps, Client: "mallory"}),
		"the TTFT is admitted, most gaps are not")
	var m Merged
	m.TTFT, m.Gap = NewCensored(), NewSketch()
	s.Lock()
	require.True(t, s.Read(t0, key, &m))
	s.Unlock()
	assert.Equal(t, 201.0, m.TTFT.Count())
	assert.Equal(t, 800.0+34, m.Gap.GetCount(), "4 %% of the gaps: 34 of 834")
}

func TestShareCapOverflowBucket(t *testing.T) {
	cfg := cappedConfig()
	cfg.MaxClients = 2
	s := NewStore(cfg, nil)
	for range 10 {
		record(s, t0, key, Sample{TTFT: ms400, Client: "a"})
		record(s, t0, key, Sample{TTFT: ms400, Client: "b"})
	}
	// Past MaxClients every new client is one bucket, capped as one client:
	// a third of the window with a and b, counting its own sample.
	admitted := 0
	for i := range 100 {
		if record(s, t0, key, Sample{TTFT: ms400, Client: fmt.Sprintf("sybil-%d", i)}) == Recorded {
			admitted++
		}
	}
	assert.Equal(t, 11, admitted)
	s.Lock()
	assert.Equal(t, 3, s.series[string(s.appendKey(key))].w.Clients())
	s.Unlock()
}

func TestShareCapRotatesWithTheWindow(t *testing.T) {
	s := NewStore(cappedConfig(), nil)
	for range 10 {
		record(s, t0, key, Sample{TTFT: ms400, Client: "a"})
	}
	for range 20 {
		record(s, t0, key, Sample{TTFT: ms400, Client: "b"})
	}
	assert.Equal(t, Capped, record(s, t0, key, Sample{TTFT: ms400, Client: "b"}))
	sr := func() *series {
		s.Lock()
		defer s.Unlock()
		return s.series[string(s.appendKey(key))]
	}()
	assert.Equal(t, 2, sr.w.Clients())

	// A window later the slots that held a and b are cleared, and so are
	// their tallies: b is alone and may fill the window.
	later := t0 + int64(10*time.Minute)
	for range 50 {
		require.Equal(t, Recorded, record(s, later, key, Sample{TTFT: ms400, Client: "b"}))
	}
	assert.Equal(t, 1, sr.w.Clients())
}

func TestShareCapOff(t *testing.T) {
	for _, share := range []float64{0, 1} {
		cfg := cappedConfig()
		cfg.MaxClientShare = share
		s := NewStore(cfg, nil)
		record(s, t0, key, Sample{TTFT: ms400, Client: "a"})
		for range 100 {
			require.Equal(t, Recorded, record(s, t0, key, Sample{TTFT: ms400, Client: "b"}), "share %v: no cap", share)
		}
	}
}

func TestClamp(t *testing.T) {
	cfg := testConfig()
	cfg.HedgeDelay = Range{Min: 10 * time.Millisecond, Max: 2 * time.Minute}
	cfg.StallAfter = Range{Min: 10 * time.Millisecond, Max: time.Minute}
	for _, tt := range []struct {
		name              string
		ttft, gap         int64
		wantDelay, wantSt float64
	}{
		{"inside", ms400, ms50, 400, 50},
		{"below", int64(time.Microsecond), int64(time.Microsecond), 10, 10},
		{"above", int64(10 * time.Hour), int64(10 * time.Hour), 120_000, 60_000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore(cfg, nil)
			for range 10 {
				record(s, t0, key, Sample{TTFT: tt.ttft, Gaps: []int64{tt.gap}})
			}
			e := s.Advice(t0, "", "").Advice[0]
			require.NotNil(t, e.HedgeDelayMs)
			require.NotNil(t, e.StallAfterMs)
			assert.InEpsilon(t, tt.wantDelay, *e.HedgeDelayMs, 0.02)
			assert.InEpsilon(t, tt.wantSt, *e.StallAfterMs, 0.02)
			p95 := e.TTFTMs["p95"]
			assert.InEpsilon(t, float64(tt.ttft)/1e6, p95, 0.02, "the quantiles themselves are not clamped")
		})
	}

	r := Range{}
	assert.Equal(t, 0.001, r.clampMs(0.001), "a zero range clamps nothing")
}

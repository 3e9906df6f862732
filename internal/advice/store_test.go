// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package advice

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testConfig() Config {
	return Config{
		Window: 10 * time.Minute, Slots: 4, TTFTQuantile: 0.95, GapQuantile: 0.999,
		MinSamples: 10, MaxSeries: 3, MaxLabelLength: 16,
	}
}

const t0 = int64(1_700_000_000) * int64(time.Second)

func record(s *Store, now int64, k Key, smp Sample) Outcome {
	s.Lock()
	defer s.Unlock()
	return s.Record(now, k, smp)
}

func TestStoreAdviceAndMinSamples(t *testing.T) {
	s := NewStore(testConfig(), nil)
	k := Key{Provider: "openai", Model: "gpt-4o"}
	for i := range 9 {
		record(s, t0, k, Sample{TTFT: int64(i+1) * int64(time.Millisecond*100), Gaps: []int64{int64(20 * time.Millisecond)}})
	}
	resp := s.Advice(t0, "", "")
	require.Len(t, resp.Advice, 1)
	e := resp.Advice[0]
	assert.Equal(t, 600.0, resp.WindowS)
	assert.Equal(t, int64(9), e.Samples)
	assert.Nil(t, e.HedgeDelayMs, "below min_samples: no recommendation")
	assert.Nil(t, e.StallAfterMs)
	assert.Contains(t, e.TTFTMs, "p50", "quantiles are still shown")
	assert.InEpsilon(t, 500, e.TTFTMs["p50"], 0.02)

	record(s, t0, k, Sample{TTFT: int64(2 * time.Second), Censored: true, Gaps: []int64{int64(20 * time.Millisecond)}})
	e = s.Advice(t0, "", "").Advice[0]
	assert.Equal(t, int64(10), e.Samples)
	assert.Equal(t, int64(1), e.Censored)
	assert.Nil(t, e.HedgeDelayMs, "the censored sample above every event hides the p95 (F tops out at 0.9)")
	assert.InEpsilon(t, 900, e.TTFTMs["p90"], 0.02)
	assert.NotContains(t, e.TTFTMs, "p95")

	for range 10 {
		record(s, t0, k, Sample{TTFT: int64(3 * time.Second)})
	}
	e = s.Advice(t0, "", "").Advice[0]
	require.NotNil(t, e.HedgeDelayMs)
	assert.InEpsilon(t, 3000, *e.HedgeDelayMs, 0.02)
	require.NotNil(t, e.StallAfterMs)
	assert.InEpsilon(t, 20, *e.StallAfterMs, 0.02)
	assert.InEpsilon(t, 20, e.GapMs["p999"], 0.02)
	assert.Contains(t, e.GapMs, "p99")
}

func TestStoreJSONShape(t *testing.T) {
	s := NewStore(testConfig(), nil)
	k := Key{Provider: "openai", Model: "gpt-4o"}
	for range 10 {
		record(s, t0, k, Sample{TTFT: int64(time.Second), Gaps: []int64{int64(time.Millisecond)}})
	}
	b, err := json.Marshal(s.Advice(t0, "", ""))
	require.NoError(t, err)
	assert.JSONEq(t, `{"window_s":600,"advice":[{"provider":"openai","model":"gpt-4o","samples":10,"censored":0,
		"ttft_ms":{"p50":1007.402,"p90":1007.402,"p95":1007.402,"p99":1007.402},"gap_ms":{"p99":0.995,"p999":0.995},
		"hedge_delay_ms":1007.402,"stall_after_ms":0.995}]}`, string(b), "values are the sketch's bin values (1 %% relative accuracy)")
}

func TestStoreFilters(t *testing.T) {
	s := NewStore(testConfig(), nil)
	record(s, t0, Key{Provider: "openai", Model: "gpt-4o"}, Sample{TTFT: 1e9})
	record(s, t0, Key{Provider: "openai", Model: "gpt-4.1"}, Sample{TTFT: 1e9})
	record(s, t0, Key{Provider: "anthropic", Model: "claude"}, Sample{TTFT: 1e9})
	models := func(r Response) []string {
		var out []string
		for _, e := range r.Advice {
			out = append(out, e.Provider+"/"+e.Model)
		}
		return out
	}
	assert.Equal(t, []string{"anthropic/claude", "openai/gpt-4.1", "openai/gpt-4o"}, models(s.Advice(t0, "", "")))
	assert.Equal(t, []string{"openai/gpt-4.1", "openai/gpt-4o"}, models(s.Advice(t0, "openai", "")))
	assert.Equal(t, []string{"openai/gpt-4o"}, models(s.Advice(t0, "openai", "gpt-4o")))
	assert.Empty(t, models(s.Advice(t0, "", "nope")))
	assert.NotNil(t, s.Advice(t0, "", "nope").Advice, "an empty list, not null")
}

func TestStoreSeriesBoundAndEviction(t *testing.T) {
	s := NewStore(testConfig(), nil)
	for i := range 3 {
		assert.Equal(t, Recorded, record(s, t0, Key{Provider: "p", Model: string(rune('a' + i))}, Sample{TTFT: 1e9}))
	}
	assert.Equal(t, Dropped, record(s, t0, Key{Provider: "p", Model: "d"}, Sample{TTFT: 1e9}))
	assert.Equal(t, int64(1), s.Dropped())
	assert.Equal(t, 3, s.Len())
	assert.Equal(t, Recorded, record(s, t0+1, Key{Provider: "p", Model: "a"}, Sample{TTFT: 1e9}), "known series still record")

	// A whole window later, idle series make room.
	later := t0 + int64(10*time.Minute)
	assert.Equal(t, Recorded, record(s, later, Key{Provider: "p", Model: "d"}, Sample{TTFT: 1e9}))
	assert.Equal(t, 2, s.Len(), "b and c were idle for a window; a was not")
}

func TestStoreDimensionsAndLabelLength(t *testing.T) {
	s := NewStore(testConfig(), []string{"service.name"})
	long := strings.Repeat("é", 20) // 40 bytes
	record(s, t0, Key{Provider: "openai", Model: long, Dims: []string{"checkout"}}, Sample{TTFT: 1e9})
	record(s, t0, Key{Provider: "openai", Model: long + "x", Dims: []string{"checkout"}}, Sample{TTFT: 1e9})
	record(s, t0, Key{Provider: "openai", Model: long, Dims: []string{"search"}}, Sample{TTFT: 1e9})
	resp := s.Advice(t0, "", "")
	require.Len(t, resp.Advice, 2, "names cut to 16 bytes collapse into one series per service")
	assert.Equal(t, strings.Repeat("é", 8), resp.Advice[0].Model)
	assert.Equal(t, int64(2), resp.Advice[0].Samples)
	assert.Equal(t, map[string]string{"service.name": "checkout"}, resp.Advice[0].Attributes)
	assert.Equal(t, map[string]string{"service.name": "search"}, resp.Advice[1].Attributes)
}

func TestTruncate(t *testing.T) {
	assert.Equal(t, "abc", truncate("abc", 3))
	assert.Equal(t, "ab", truncate("abc", 2))
	assert.Equal(t, "abc", truncate("abc", 0))
	assert.Equal(t, "a", truncate("aé", 2), "never half a rune")
}

func TestQuantileName(t *testing.T) {
	for q, want := range map[float64]string{0.5: "p50", 0.9: "p90", 0.95: "p95", 0.99: "p99", 0.999: "p999"} {
		assert.Equal(t, want, quantileName(q))
	}
}

// The window forgets: after a slot's length the oldest slot is cleared, and
// after a whole window everything is.
func TestWindowRotation(t *testing.T) {
	w := NewWindow(int64(4*time.Minute), 4)
	m := NewMerged()
	w.ObserveTTFT(t0, int64(time.Second))
	w.ObserveCensored(t0+int64(time.Minute), int64(2*time.Second))
	w.ObserveGap(t0+int64(2*time.Minute), int64(time.Millisecond))
	w.Merged(t0+int64(3*time.Minute), m)
	assert.Equal(t, 2.0, m.TTFT.Count())
	assert.Equal(t, 1.0, m.Gap.GetCount())

	w.Merged(t0+int64(4*time.Minute), m) // the first slot rotates out
	assert.Equal(t, 1.0, m.TTFT.Count())
	assert.Equal(t, 1.0, m.TTFT.Censored())

	w.Merged(t0+int64(5*time.Minute), m)
	assert.Zero(t, m.TTFT.Count())
	assert.Equal(t, 1.0, m.Gap.GetCount())

	w.ObserveTTFT(t0+int64(time.Hour), int64(time.Second)) // idle for more than a window
	w.Merged(t0+int64(time.Hour), m)
	assert.Equal(t, 1.0, m.TTFT.Count())
	assert.Zero(t, m.Gap.GetCount())

	w.ObserveTTFT(t0, int64(time.Second)) // time going backwards stays in the current slot
	w.Merged(t0+int64(time.Hour), m)
	assert.Equal(t, 2.0, m.TTFT.Count())
}

func TestStoreRead(t *testing.T) {
	s := NewStore(testConfig(), nil)
	k := Key{Provider: "openai", Model: "gpt-4o"}
	record(s, t0, k, Sample{TTFT: 1e9})
	record(s, t0, k, Sample{TTFT: 2e9, Censored: true})
	m := NewMerged()
	s.Lock()
	defer s.Unlock()
	require.True(t, s.Read(t0, k, m))
	assert.Equal(t, 1.0, m.TTFT.Events())
	assert.Equal(t, 1.0, m.TTFT.Censored())
	assert.False(t, s.Read(t0, Key{Provider: "x", Model: "y"}, m))
}

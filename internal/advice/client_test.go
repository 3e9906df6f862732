// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package advice

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const clientBody = `{"window_s": 600, "advice": [
  {"provider": "openai", "model": "a-model", "samples": 900, "censored": 120,
   "ttft_ms": {"p50": 20, "p90": 35, "p95": 40, "p99": 80}, "gap_ms": {"p99": 5, "p999": 50},
   "hedge_delay_ms": 40, "stall_after_ms": 50},
  {"provider": "openai", "model": "b-model", "samples": 12, "censored": 0, "ttft_ms": {"p50": 20}, "gap_ms": {}}]}`

func TestHedgeDelayWeightsEntriesBySamples(t *testing.T) {
	d := func(v float64) *float64 { return &v }
	entries := []Entry{
		{Provider: "openai", Model: "m", Samples: 300, HedgeDelayMs: d(100)},
		{Provider: "OpenAI", Model: "m", Samples: 100, HedgeDelayMs: d(200)},
		{Provider: "openai", Model: "m", Samples: 50},                          // no recommendation
		{Provider: "openai", Model: "other", Samples: 50, HedgeDelayMs: d(1)},  // another model
		{Provider: "openai", Model: "m", Samples: 50, HedgeDelayMs: d(-5)},     // hostile
		{Provider: "openai", Model: "m", Samples: 1 << 50, HedgeDelayMs: d(9)}, // a weight past any fleet
	}
	got, ok := HedgeDelay(entries, "openai", "m")
	require.True(t, ok)
	assert.Equal(t, Weighted{Nanos: int64(125 * time.Millisecond), Samples: 400}, got)
	_, ok = HedgeDelay(entries, "anthropic", "m")
	assert.False(t, ok)
}

func TestGapReadsTheNamedQuantile(t *testing.T) {
	resp, err := Decode(strings.NewReader(clientBody))
	require.NoError(t, err)
	got, ok := Gap(resp.Advice, "openai", "a-model", "p999")
	require.True(t, ok)
	assert.Equal(t, Weighted{Nanos: int64(50 * time.Millisecond), Samples: 900}, got)
	_, ok = Gap(resp.Advice, "openai", "b-model", "p999")
	assert.False(t, ok, "an entry without the quantile recommends nothing")
	_, ok = Gap(resp.Advice, "openai", "a-model", "p50")
	assert.False(t, ok)
}

func TestFetchRefusesWhatIsNotAdvice(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"status":  func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusServiceUnavailable) },
		"garbage": func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>")) },
		"too large": func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"advice": [` + strings.Repeat(`{"provider":"p","model":"m"},`, MaxBody/28)))
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			_, err := Fetch(context.Background(), srv.Client(), srv.URL+Path)
			assert.Error(t, err)
		})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "application/json", r.Header.Get("Accept"))
		_, _ = w.Write([]byte(clientBody))
	}))
	defer srv.Close()
	resp, err := Fetch(context.Background(), srv.Client(), srv.URL+Path)
	require.NoError(t, err)
	assert.Len(t, resp.Advice, 2)
}

// FuzzDecode: whatever an advisor answers, decoding and combining never
// panic, and a figure is positive and under a day with positive samples.
func FuzzDecode(f *testing.F) {
	f.Add(clientBody, "openai", "a-model")
	f.Add(`{"window_s": 600, "advice": []}`, "openai", "m")
	f.Add(`{"advice": [{"provider": "p", "model": "m", "samples": 9223372036854775807, "hedge_delay_ms": 1e308}]}`, "p", "m")
	f.Add(`{"advice": [{"provider": "p", "model": "m", "samples": 3, "hedge_delay_ms": -1, "gap_ms": {"p999": "x"}}]}`, "p", "m")
	f.Add(`{"advice": null}`, "", "")
	f.Add(`[1, 2]`, "p", "m")
	f.Fuzz(func(t *testing.T, body, provider, model string) {
		resp, err := Decode(strings.NewReader(body))
		if err != nil {
			return
		}
		for _, w := range []func() (Weighted, bool){
			func() (Weighted, bool) { return HedgeDelay(resp.Advice, provider, model) },
			func() (Weighted, bool) { return Gap(resp.Advice, provider, model, "p999") },
		} {
			got, ok := w()
			if ok && (got.Nanos <= 0 || got.Nanos > maxFigureMs*1_000_000 || got.Samples <= 0) {
				t.Fatalf("combined %+v", got)
			}
		}
	})
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedge

import (
	"strings"
	"testing"
)

// FuzzDecodeAdvice: whatever an advisor answers, decoding and matching never
// panic, and a match is a positive delay under a day with positive samples.
func FuzzDecodeAdvice(f *testing.F) {
	f.Add(fleetBody, "openai", "a-model")
	f.Add(`{"window_s": 600, "advice": []}`, "openai", "m")
	f.Add(`{"advice": [{"provider": "p", "model": "m", "samples": 9223372036854775807, "hedge_delay_ms": 1e308}]}`, "p", "m")
	f.Add(`{"advice": [{"provider": "p", "model": "m", "samples": 3, "hedge_delay_ms": -1}]}`, "p", "m")
	f.Add(`{"advice": null}`, "", "")
	f.Add(`[1, 2]`, "p", "m")
	f.Fuzz(func(t *testing.T, body, provider, model string) {
		resp, err := decodeAdvice(strings.NewReader(body))
		if err != nil {
			return
		}
		fa := match(resp.Advice, provider, model)
		if fa == nil {
			return
		}
		if fa.Delay <= 0 || fa.Delay > 86_400_000*1_000_000 || fa.Samples <= 0 {
			t.Fatalf("match gave %+v", *fa)
		}
	})
}

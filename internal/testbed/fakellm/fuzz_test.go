// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"net/http"
	"testing"
)

// FuzzSteering feeds arbitrary steering headers and scripts: they are either rejected with an
// error or resolve to a plan the stream loop can follow.
func FuzzSteering(f *testing.F) {
	f.Add(`{"ttft_ms":100,"gaps_ms":[10,10,3000,10],"keepalive_every_ms":500}`, "stall", "7", "20", "text")
	f.Add(`{"status":429,"retry_after_ms":5}`, "", "", "", "")
	f.Add(`{"close_after_chunk":99,"burst":true,"content":"tool_call"}`, "early_close", "18446744073709551615", "1", "reasoning")
	f.Add(`{"gaps_ms":[]}`, `{"ttft_ms":1}`, "x", "-1", "image")
	srv, err := New(Config{TimeFactor: 0.001})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, script, profile, seed, chunks, content string) {
		h := http.Header{}
		for k, v := range map[string]string{
			HeaderScript: script, HeaderProfile: profile, HeaderSeed: seed,
			HeaderChunks: chunks, HeaderContent: content,
		} {
			if v != "" {
				h.Set(k, v)
			}
		}
		st, err := srv.steering(h, "")
		if err != nil {
			return
		}
		if st.chunks < 1 || st.chunks > MaxChunks {
			t.Fatalf("accepted chunk count %d", st.chunks)
		}
		p := st.profile.plan(newRequestRand(st.seed, 0), st.chunks, srv.cfg.TimeFactor)
		if p.Status != 0 {
			return
		}
		offsets := p.Offsets()
		if len(offsets) != p.Chunks() || len(offsets) < 1 {
			t.Fatalf("plan has %d offsets for %d chunks", len(offsets), p.Chunks())
		}
		for i, o := range offsets {
			if o < 0 || (i > 0 && o < offsets[i-1]) {
				t.Fatalf("offsets not ascending from 0: %v", offsets)
			}
		}
		for _, after := range p.StallAfter {
			if after < 1 || after >= p.Chunks() {
				t.Fatalf("stall after chunk %d of %d", after, p.Chunks())
			}
		}
	})
}

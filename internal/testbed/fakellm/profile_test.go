// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"io"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func plans(t *testing.T, profile string, n, chunks int, factor float64) []Plan {
	t.Helper()
	spec, err := parseProfile(profile)
	require.NoError(t, err)
	out := make([]Plan, n)
	for i := range out {
		out[i] = spec.plan(newRequestRand(1, i), chunks, factor)
	}
	return out
}

func TestSteadyProfileFollowsTheFieldFigures(t *testing.T) {
	ps := plans(t, ProfileSteady, 4000, 20, 1)
	var ttfts, gaps []time.Duration
	for _, p := range ps {
		require.Equal(t, 20, p.Chunks())
		assert.Empty(t, p.StallAfter)
		assert.Zero(t, p.KeepaliveEvery)
		ttfts = append(ttfts, p.TTFT)
		gaps = append(gaps, p.Gaps...)
	}
	assert.InEpsilon(t, float64(1600*time.Millisecond), float64(median(ttfts)), 0.05)
	assert.InEpsilon(t, float64(25*time.Millisecond), float64(median(gaps)), 0.03)
	assert.Less(t, slices.Max(gaps), time.Second, "no stall in steady")
}

func TestStallProfileSilences(t *testing.T) {
	ps := plans(t, ProfileStallKeepalive, 4000, 40, 1)
	var stalls []time.Duration
	multi := 0
	for _, p := range ps {
		require.NotEmpty(t, p.StallAfter)
		require.LessOrEqual(t, len(p.StallAfter), maxStalls)
		assert.True(t, slices.IsSorted(p.StallAfter))
		assert.Len(t, slices.Compact(slices.Clone(p.StallAfter)), len(p.StallAfter), "positions are distinct")
		for _, after := range p.StallAfter {
			require.GreaterOrEqual(t, after, 1)
			require.Less(t, after, p.Chunks(), "a stall sits between two chunks")
			stalls = append(stalls, p.Gaps[after-1])
		}
		if len(p.StallAfter) > 1 {
			multi++
		}
		assert.Equal(t, 5*time.Second, p.KeepaliveEvery)
	}
	assert.InEpsilon(t, float64(55*time.Second), float64(median(stalls)), 0.06)
	assert.InDelta(t, extraStallProb, float64(multi)/float64(len(ps)), 0.03)

	// A single chunk leaves no gap to stall in.
	one := plans(t, ProfileStall, 10, 1, 1)
	for _, p := range one {
		assert.Empty(t, p.StallAfter)
		assert.Empty(t, p.Gaps)
	}
}

func TestTimeFactorScalesNamedProfiles(t *testing.T) {
	full := plans(t, ProfileStall, 50, 20, 1)
	fast := plans(t, ProfileStall, 50, 20, 0.001)
	for i := range full {
		assert.InDelta(t, float64(full[i].TTFT)/1000, float64(fast[i].TTFT), 1)
		for j := range full[i].Gaps {
			assert.InDelta(t, float64(full[i].Gaps[j])/1000, float64(fast[i].Gaps[j]), 1)
		}
		assert.Equal(t, full[i].StallAfter, fast[i].StallAfter)
	}
	// Scripts are exact and never scaled.
	scripted := plans(t, `{"ttft_ms":100,"gaps_ms":[10,3000.5]}`, 1, 20, 0.001)[0]
	assert.Equal(t, 100*time.Millisecond, scripted.TTFT)
	assert.Equal(t, []time.Duration{10 * time.Millisecond, 3000500 * time.Microsecond}, scripted.Gaps)
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 110 * time.Millisecond, 3110500 * time.Microsecond}, scripted.Offsets())
}

func TestOtherProfiles(t *testing.T) {
	for _, p := range plans(t, ProfileSlowFirst, 2000, 5, 1) {
		assert.Greater(t, p.TTFT, 2*time.Second)
	}
	for _, p := range plans(t, ProfileBurst, 10, 5, 1) {
		assert.True(t, p.Burst)
	}
	closes := map[int]bool{}
	for _, p := range plans(t, ProfileEarlyClose, 500, 6, 1) {
		require.GreaterOrEqual(t, p.CloseAfterChunk, 1)
		require.LessOrEqual(t, p.CloseAfterChunk, 5, "at least one chunk is never sent")
		closes[p.CloseAfterChunk] = true
	}
	assert.Len(t, closes, 5, "every position is drawn")
	p429 := plans(t, ProfileHTTP429, 1, 5, 0.5)[0]
	assert.Equal(t, 429, p429.Status)
	assert.Equal(t, time.Second, p429.RetryAfter)
	assert.Equal(t, 500, plans(t, ProfileHTTP500, 1, 5, 1)[0].Status)
	assert.Equal(t, ContentReasoning, plans(t, ProfileReasoning, 1, 5, 1)[0].Content)
	assert.Equal(t, ContentToolCall, plans(t, ProfileToolCall, 1, 5, 1)[0].Content)
}

func TestParseScript(t *testing.T) {
	s, err := ParseScript([]byte(`{"ttft_ms":1.5,"gaps_ms":[0,2],"keepalive_every_ms":3,"burst":true,
		"close_after_chunk":2,"status":503,"retry_after_ms":10,"content":"tool_call"}`))
	require.NoError(t, err)
	assert.Equal(t, Script{
		TTFTMillis: 1.5, GapsMillis: []float64{0, 2}, KeepaliveEveryMillis: 3, Burst: true,
		CloseAfterChunk: 2, Status: 503, RetryAfterMillis: 10, Content: ContentToolCall,
	}, s)

	for _, bad := range []struct{ in, want string }{
		{`{"ttft_ms":1} {}`, "trailing data"},
		{`{"gaps_ms":[1,-2]}`, "gaps_ms[1] must be between"},
		{`{"keepalive_every_ms":0.5}`, "keepalive_every_ms must be 0 or at least 1"},
		{`{"close_after_chunk":-1}`, "close_after_chunk must not be negative"},
		{`{"status":302}`, "status must be an HTTP error status"},
		{`{"content":"audio"}`, "content must be one of"},
		{`{"ttft_ms":1e12}`, "ttft_ms must be between"},
		{`[1,2]`, "invalid script"},
	} {
		_, err := ParseScript([]byte(bad.in))
		require.Error(t, err, bad.in)
		assert.Contains(t, err.Error(), bad.want)
	}
	// Every problem is reported at once.
	_, err = ParseScript([]byte(`{"ttft_ms":-1,"status":1}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ttft_ms")
	assert.Contains(t, err.Error(), "status")
}

func TestScriptedErrorStatusAndChunks(t *testing.T) {
	srv, hs := startServer(t, Config{Chunks: 4})
	resp := postJSON(testContext(t), t, hs.URL+"/v1/messages", chatStreamBody,
		map[string]string{HeaderScript: `{"status":529,"retry_after_ms":1500}`})
	assert.Equal(t, 529, resp.StatusCode)
	assert.Equal(t, "2", resp.Header.Get("Retry-After"))
	assert.Equal(t, "1500", resp.Header.Get("Retry-After-Ms"))
	rec := waitOne(t, srv)
	assert.Contains(t, string(srv.Sent(0)), `"type":"overloaded_error"`)
	assert.Equal(t, 529, rec.Status)

	srv.Reset()
	resp = postJSON(testContext(t), t, hs.URL+"/v1/chat/completions", chatStreamBody,
		map[string]string{HeaderProfile: `{"ttft_ms":0}`, HeaderChunks: "3"})
	frames, err := readFrames(t, resp.Body, nil)
	require.ErrorIs(t, err, io.EOF)
	contents := 0
	for _, f := range frames {
		if f.isContent() {
			contents++
		}
	}
	assert.Equal(t, 3, contents, "a script without gaps takes the chunk count of the request")
}

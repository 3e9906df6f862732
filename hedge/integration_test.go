// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedge

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

// The tests below run the Hedger against fakellm on real loopback sockets,
// with explicit scripts so that every timing is known.

func startFakeLLM(t *testing.T) (*fakellm.Server, string) {
	t.Helper()
	srv, err := fakellm.New(fakellm.Config{})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return srv, ts.URL + "/v1"
}

func script(t *testing.T, s fakellm.Script) http.Header {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return http.Header{fakellm.HeaderScript: []string{string(b)}}
}

// gaps returns n-1 gaps of d milliseconds (n chunks).
func gaps(n int, d float64) []float64 {
	g := make([]float64, n-1)
	for i := range g {
		g[i] = d
	}
	return g
}

func openAISource(name, url string, h http.Header) Source {
	return NewOpenAIChatSource(Endpoint{Name: name, BaseURL: url, Model: "gpt-test", Header: h, APIKey: "sk-test"})
}

func anthropicSource(name, url string, h http.Header) Source {
	return NewAnthropicSource(Endpoint{Name: name, BaseURL: url, Model: "claude-test", Header: h, APIKey: "sk-test"})
}

var hello = Request{Messages: []Message{{Role: "user", Content: "hello"}}}

// waitRecords waits until fakellm has finished n requests.
func waitRecords(t *testing.T, srv *fakellm.Server, n int) []fakellm.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	recs, err := srv.WaitFor(ctx, n)
	require.NoError(t, err)
	return recs
}

func recordOf(recs []fakellm.Request, model string) fakellm.Request {
	for _, r := range recs {
		if r.Model == model {
			return r
		}
	}
	return fakellm.Request{}
}

func TestIntegrationStalledPrimaryLosesToHedge(t *testing.T) {
	srv, url := startFakeLLM(t)
	slow := NewOpenAIChatSource(Endpoint{
		Name: "slow", BaseURL: url, Model: "slow-model",
		Header: script(t, fakellm.Script{TTFTMillis: 3000, GapsMillis: gaps(5, 1)}),
	})
	fast := NewAnthropicSource(Endpoint{
		Name: "fast", BaseURL: url, Model: "fast-model",
		Header: script(t, fakellm.Script{TTFTMillis: 5, GapsMillis: gaps(5, 2)}),
	})
	h, err := New([]Source{slow, fast}, Delay(50*time.Millisecond))
	require.NoError(t, err)

	call, err := h.Stream(context.Background(), hello)
	require.NoError(t, err)
	var got strings.Builder
	n := 0
	for call.Next() {
		got.WriteString(call.Chunk().Text)
		n++
	}
	require.NoError(t, call.Err())
	call.Close()
	res := call.Result()
	assert.Equal(t, "fast", res.Source)
	assert.Equal(t, 2, res.Attempts)
	assert.Equal(t, 5, n)

	recs := waitRecords(t, srv, 2)
	loser, winner := recordOf(recs, "slow-model"), recordOf(recs, "fast-model")
	assert.True(t, loser.Disconnected, "the loser's connection is closed on the server side")
	assert.Zero(t, loser.Chunks(), "the loser never sent content")
	assert.True(t, winner.Completed)
	assert.Equal(t, winner.Text, got.String())
	assert.Equal(t, winner.Text, res.Text)
	assert.Equal(t, int64(winner.OutputTokens), res.Usage.OutputTokens)
}

func TestIntegrationKeepaliveOnlyStallTripsWatchdog(t *testing.T) {
	srv, url := startFakeLLM(t)
	// Three chunks, then 2 s of silence filled with keepalives every 20 ms.
	src := anthropicSource("a", url, script(t, fakellm.Script{
		TTFTMillis: 5, GapsMillis: []float64{5, 5, 2000, 5}, KeepaliveEveryMillis: 20,
	}))
	h, err := New([]Source{src}, StallTimeout(300*time.Millisecond))
	require.NoError(t, err)
	call, err := h.Stream(context.Background(), hello)
	require.NoError(t, err)
	var partial strings.Builder
	for call.Next() {
		partial.WriteString(call.Chunk().Text)
	}
	call.Close()

	var stall *StallError
	require.ErrorAs(t, call.Err(), &stall)
	assert.Equal(t, "a", stall.Source)
	assert.Equal(t, "claude-test", stall.Model)
	assert.Equal(t, 3, stall.Chunks)
	assert.Equal(t, partial.String(), stall.Partial)
	assert.True(t, stall.Timeout())

	rec := waitRecords(t, srv, 1)[0]
	assert.Greater(t, rec.Keepalives(), 5, "keepalives flowed during the stall and did not reset the watchdog")
	assert.True(t, rec.Disconnected)
}

func TestIntegrationRetryableStatusStartsNextAtOnce(t *testing.T) {
	srv, url := startFakeLLM(t)
	limited := openAISource("limited", url, script(t, fakellm.Script{Status: 429}))
	ok := openAISource("ok", url, script(t, fakellm.Script{TTFTMillis: 5, GapsMillis: gaps(3, 1)}))
	h, err := New([]Source{limited, ok}, Delay(time.Hour))
	require.NoError(t, err)
	start := time.Now()
	res, err := h.Complete(context.Background(), hello)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second, "the hour-long hedge delay was not waited for")
	assert.Equal(t, "ok", res.Source)
	assert.Equal(t, 2, res.Attempts)
	assert.Len(t, waitRecords(t, srv, 2), 2)
}

func TestIntegrationFatalStatusEndsCall(t *testing.T) {
	srv, url := startFakeLLM(t)
	bad := openAISource("bad", url, script(t, fakellm.Script{Status: 400}))
	ok := openAISource("ok", url, script(t, fakellm.Script{TTFTMillis: 5}))
	h, err := New([]Source{bad, ok}, Delay(time.Hour))
	require.NoError(t, err)
	_, err = h.Complete(context.Background(), hello)
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 400, se.StatusCode)
	assert.True(t, se.Fatal())
	assert.Len(t, waitRecords(t, srv, 1), 1, "no other source was asked")
}

func TestIntegrationBudgetStopsHedgeStorm(t *testing.T) {
	srv, url := startFakeLLM(t)
	slowScript := script(t, fakellm.Script{TTFTMillis: 60, GapsMillis: gaps(2, 1)})
	a, b := openAISource("a", url, slowScript), openAISource("b", url, slowScript)
	// Every source is slower than the 10 ms delay: without a budget every
	// call would hedge. Tokens 4, threshold 2: two hedges, then none, since
	// the successes refund nothing.
	h, err := New([]Source{a, b}, Delay(10*time.Millisecond), Budget(4, 0), MaxAttempts(2))
	require.NoError(t, err)
	attempts := 0
	for range 6 {
		res, err := h.Complete(context.Background(), hello)
		require.NoError(t, err)
		attempts += res.Attempts
	}
	assert.Equal(t, 8, attempts)
	assert.Len(t, waitRecords(t, srv, 8), 8)
}

func TestIntegrationBufferedMidStreamHedge(t *testing.T) {
	srv, url := startFakeLLM(t)
	stalls := openAISource("stalls", url, script(t, fakellm.Script{TTFTMillis: 5, GapsMillis: []float64{2, 2, 3000, 2}}))
	steady := openAISource("steady", url, script(t, fakellm.Script{TTFTMillis: 5, GapsMillis: gaps(6, 2)}))
	h, err := New([]Source{stalls, steady}, Delay(time.Hour), StallAfter(100*time.Millisecond), StallTimeout(5*time.Second))
	require.NoError(t, err)
	res, err := h.Complete(context.Background(), hello)
	require.NoError(t, err)
	assert.Equal(t, "steady", res.Source)
	assert.Equal(t, 2, res.Attempts)
	assert.Len(t, res.Chunks, 6)

	recs := waitRecords(t, srv, 2)
	assert.True(t, recs[0].Disconnected, "the stalled attempt is cancelled once the hedge completes")
	assert.Equal(t, recs[1].Text, res.Text, "the answer is one attempt's text, never spliced")
}

func TestIntegrationContinuation(t *testing.T) {
	srv, url := startFakeLLM(t)
	stalls := anthropicSource("stalls", url, script(t, fakellm.Script{TTFTMillis: 5, GapsMillis: []float64{2, 2, 3000, 2}}))
	cont := anthropicSource("cont", url, script(t, fakellm.Script{TTFTMillis: 5, GapsMillis: gaps(4, 2)}))
	h, err := New([]Source{stalls, cont}, Delay(time.Hour), StallAfter(100*time.Millisecond),
		StallTimeout(5*time.Second), Continuation())
	require.NoError(t, err)
	call, err := h.Stream(context.Background(), hello)
	require.NoError(t, err)
	var got strings.Builder
	for call.Next() {
		got.WriteString(call.Chunk().Text)
	}
	require.NoError(t, call.Err())
	call.Close()
	res := call.Result()
	assert.Equal(t, "cont", res.Source)
	assert.Equal(t, got.String(), res.Text)

	recs := waitRecords(t, srv, 2)
	first, second := recs[0], recs[1]
	assert.True(t, first.Disconnected)
	assert.Equal(t, 3, first.Chunks())
	// The caller got the first three chunks of the stalled attempt, then the
	// continuation; nothing of the stalled attempt after its stall.
	require.True(t, strings.HasSuffix(got.String(), second.Text), "the continuation's text ends the stream")
	delivered := strings.TrimSuffix(got.String(), second.Text)
	assert.True(t, strings.HasPrefix(first.Text, delivered), "then the stalled attempt's text up to its stall")
	assert.Less(t, len(delivered), len(first.Text), "and nothing of it after the stall")
}

func TestIntegrationCallerCancel(t *testing.T) {
	srv, url := startFakeLLM(t)
	src := openAISource("a", url, script(t, fakellm.Script{TTFTMillis: 5000}))
	h, err := New([]Source{src}, Delay(time.Hour))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = h.Complete(ctx, hello)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, waitRecords(t, srv, 1)[0].Disconnected)
}

func TestIntegrationConnectionRefusedStartsNextAtOnce(t *testing.T) {
	// A port that was just released: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + l.Addr().String() + "/v1"
	require.NoError(t, l.Close())

	srv, url := startFakeLLM(t)
	h, err := New([]Source{
		openAISource("dead", dead, nil),
		openAISource("ok", url, script(t, fakellm.Script{TTFTMillis: 5, GapsMillis: gaps(2, 1)})),
	}, Delay(time.Hour))
	require.NoError(t, err)
	res, err := h.Complete(context.Background(), hello)
	require.NoError(t, err)
	assert.Equal(t, "ok", res.Source)
	assert.Len(t, waitRecords(t, srv, 1), 1)
}

func TestIntegrationBrokenStreamAfterCommit(t *testing.T) {
	_, url := startFakeLLM(t)
	cut := script(t, fakellm.Script{TTFTMillis: 5, GapsMillis: gaps(6, 2), CloseAfterChunk: 2})

	// Without continuation the caller gets the two chunks, then the error.
	h, err := New([]Source{openAISource("cut", url, cut)}, Delay(time.Hour))
	require.NoError(t, err)
	call, err := h.Stream(context.Background(), hello)
	require.NoError(t, err)
	n := 0
	for call.Next() {
		n++
	}
	call.Close()
	assert.Equal(t, 2, n)
	require.Error(t, call.Err())
	var stall *StallError
	assert.NotErrorAs(t, call.Err(), &stall, "a cut is not a stall")

	// With continuation another source continues the delivered text.
	h, err = New([]Source{
		openAISource("cut", url, cut),
		openAISource("cont", url, script(t, fakellm.Script{TTFTMillis: 5, GapsMillis: gaps(3, 2)})),
	}, Delay(time.Hour), StallAfter(time.Second), Continuation())
	require.NoError(t, err)
	call, err = h.Stream(context.Background(), hello)
	require.NoError(t, err)
	n = 0
	for call.Next() {
		n++
	}
	call.Close()
	require.NoError(t, call.Err())
	assert.Equal(t, 5, n, "two chunks of the cut stream, three of the continuation")
	assert.Equal(t, "cont", call.Result().Source)
}

func TestIntegrationConcurrentCallsShareDelaysAndBudget(t *testing.T) {
	srv, url := startFakeLLM(t)
	s := script(t, fakellm.Script{TTFTMillis: 2, GapsMillis: gaps(3, 1)})
	h, err := New([]Source{openAISource("a", url, s), anthropicSource("b", url, s)},
		AdaptiveDelay(0.5, 20*time.Millisecond))
	require.NoError(t, err)
	const calls = 40
	errs := make(chan error, calls)
	for range calls {
		go func() {
			_, err := h.Complete(context.Background(), hello)
			errs <- err
		}()
	}
	for range calls {
		require.NoError(t, recv(t, errs))
	}
	assert.GreaterOrEqual(t, len(waitRecords(t, srv, calls)), calls)
}

// TestIntegrationGeminiAndOllamaSources: a stalled Gemini primary loses the
// TTFT race to an Ollama hedge; each source alone streams to its end, Gemini
// on its finish reason (it sends no terminal frame), with usage.
func TestIntegrationGeminiAndOllamaSources(t *testing.T) {
	srv, base := startFakeLLM(t)
	root := strings.TrimSuffix(base, "/v1")
	gemini := func(name, model string, s fakellm.Script) Source {
		return NewGeminiSource(Endpoint{Name: name, BaseURL: root + "/v1beta", Model: model, APIKey: "k", Header: script(t, s)})
	}
	ollama := NewOllamaSource(Endpoint{
		Name: "ollama", BaseURL: root, Model: "llama3.2",
		Header: script(t, fakellm.Script{TTFTMillis: 5, GapsMillis: gaps(4, 2)}),
	})
	h, err := New([]Source{gemini("gemini", "gemini-slow", fakellm.Script{TTFTMillis: 3000, GapsMillis: gaps(4, 1)}), ollama}, Delay(50*time.Millisecond))
	require.NoError(t, err)
	res, err := h.Complete(context.Background(), hello)
	require.NoError(t, err)
	assert.Equal(t, "ollama", res.Source)
	recs := waitRecords(t, srv, 2)
	winner := recordOf(recs, "llama3.2")
	assert.Equal(t, winner.Text, res.Text)
	assert.Equal(t, int64(winner.OutputTokens), res.Usage.OutputTokens)
	assert.True(t, recordOf(recs, "gemini-slow").Disconnected)

	srv.Reset()
	for _, vertex := range []bool{false, true} {
		src := gemini("gemini", "gemini-2.5-flash", fakellm.Script{TTFTMillis: 5, GapsMillis: gaps(6, 1)})
		if vertex {
			src = NewGeminiSource(Endpoint{
				Name: "vertex", BaseURL: root + "/v1/projects/p/locations/l/publishers/google", Model: "gemini-2.5-flash",
				Header: script(t, fakellm.Script{TTFTMillis: 5, GapsMillis: gaps(6, 1)}),
			})
			assert.Equal(t, "gcp.vertex_ai", src.Provider())
		}
		h, err := New([]Source{src})
		require.NoError(t, err)
		res, err := h.Complete(context.Background(), hello)
		require.NoError(t, err)
		rec := waitRecords(t, srv, 1)[0]
		srv.Reset()
		assert.Equal(t, "gemini", rec.API)
		assert.Equal(t, rec.Text, res.Text)
		assert.Len(t, res.Chunks, 6)
		assert.Equal(t, "STOP", res.FinishReason)
		assert.Equal(t, int64(rec.InputTokens), res.Usage.InputTokens)
		assert.Equal(t, int64(6), res.Usage.OutputTokens)
	}
}

// TestIntegrationRetryAfterEndsTheCallWithTheWait: the only source answers
// 429 with a Retry-After: the call is not retried at once against it; it
// ends with the StatusError, which carries the wait for the caller.
func TestIntegrationRetryAfterEndsTheCallWithTheWait(t *testing.T) {
	srv, url := startFakeLLM(t)
	limited := openAISource("limited", url, script(t, fakellm.Script{Status: 429, RetryAfterMillis: 1500}))
	h, err := New([]Source{limited}, Delay(time.Hour), MaxAttempts(3))
	require.NoError(t, err)
	_, err = h.Complete(context.Background(), hello)
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 429, se.StatusCode)
	assert.Equal(t, 1500*time.Millisecond, se.RetryAfter)
	assert.Len(t, waitRecords(t, srv, 1), 1)
	time.Sleep(50 * time.Millisecond)
	assert.Len(t, srv.Requests(), 1, "the source that asked to wait was asked once")
}

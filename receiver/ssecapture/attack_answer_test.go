// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

// TestGuardErrorFrameAfterCommitCostsTheBudget: an upstream that starts
// every stream past the hedge delay (so every call hedges) and ends it with
// the API's own error frame after the first content (OpenAI's data:
// {"error":...}, Anthropic's overloaded_error mid-stream) fails the call,
// as its span's server_error says: it costs the budget as a broken stream
// does (as the cut stream of TestGuardTruncatedStreamCostsTheBudget), so
// the second call's hedge is refused; refunded as complete, an upstream
// failing its streams so would keep every hedge it triggers paid for.
func TestGuardErrorFrameAfterCommitCostsTheBudget(t *testing.T) {
	const errorFrame = `data: {"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}` + "\n\n"
	failing := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(150 * time.Millisecond):
		}
		_, _ = io.WriteString(w, chatEvent+errorFrame) // and the body ends
	}
	hang := func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	h := newHostileGuard(t, failing, hang, func(g *GuardConfig) {
		g.Hedge.Delay = AutoDuration(50 * time.Millisecond)
		// A hedge is allowed above 2 tokens; a complete call refunds a
		// whole token (ratio 1). The first call's hedge takes 4 -> 3; a
		// failed stream costs 3 -> 2 and the second call's hedge is
		// refused; refunded as complete it goes back to 4 and it is not.
		g.Hedge.Budget = BudgetConfig{MaxTokens: 4, TokenRatio: 1, SharedMaxTokens: 100}
	})
	for _, spansSoFar := range []int{2, 3} { // the first call's loser has a span too
		resp, body := post(t, http.DefaultClient, h.proxyURL+"/v1/chat/completions", shapes[0].body, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		assert.Equal(t, chatEvent+errorFrame, string(body))
		require.Eventually(t, func() bool { return h.sink.SpanCount() >= spansSoFar }, 10*time.Second, 5*time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a second loser's span, if the hedge was allowed
	failed := 0
	for _, s := range (&fixture{sink: h.sink}).spans(t, h.sink.SpanCount()) {
		if v, ok := s.Attributes().Get(semconv.AttrErrorType); ok && v.Str() == "server_error" {
			failed++
		}
	}
	require.Equal(t, 2, failed, "both streams the client got failed")
	assert.Equal(t, 3, h.sink.SpanCount(), "two calls, the second without a hedge (and its loser span)")
	refused := sumByAttribute(t, h.tel, "otelcol_receiver_sse_capture_hedges.refused", "bucket")
	assert.Equal(t, map[string]int64{"client": 1}, refused,
		"the failed streams cost the budget: the second call's hedge is refused")
}

// TestGuardAnErrorAnswerDoesNotWinTheRace: the primary is slow to its first
// content (past the hedge delay) but answers; the hedge goes to an
// alternate (a gateway) that answers at once with no content at all: its
// API's error object under 200, a redirect, or a stream that ends at once
// with no content and no finish reason. The attempt committed is the
// first whose first content chunk arrives (docs/contract.md section 7): the
// client gets the primary's stream, never the gateway's error or redirect
// (which a redirect-following SDK would follow to a host the operator never
// configured).
func TestGuardAnErrorAnswerDoesNotWinTheRace(t *testing.T) {
	const stream = `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n" +
		`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" + doneEvent
	slow := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
		_, _ = io.WriteString(w, stream)
	}
	for _, tc := range []struct {
		name      string
		alternate http.HandlerFunc
	}{
		{"200 error object", answer("application/json",
			`{"error":{"message":"upstream connect error","type":"server_error","param":null,"code":null}}`)},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://login.gateway.example/", http.StatusFound)
		}},
		{"empty stream", answer("text/event-stream", doneEvent)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostileGuard(t, slow, tc.alternate, func(g *GuardConfig) {
				g.Hedge.Delay = AutoDuration(50 * time.Millisecond)
			})
			client := testClient(t)
			client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			resp, body := post(t, client, h.proxyURL+"/v1/chat/completions", shapes[0].body, nil)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, stream, string(body), "the client gets the primary's answer, not the alternate's")
			spans := byAttempt(t, (&fixture{sink: h.sink}).spans(t, 2))
			assert.Equal(t, semconv.HedgeOutcomeWinner, attr(t, spans[0], semconv.AttrHedgeOutcome).Str(),
				"the primary is the attempt the client got")
			if tc.name == "empty stream" {
				assert.Equal(t, semconv.ErrorTypeEmptyAnswer, attr(t, spans[1], semconv.AttrErrorType).Str(),
					"the empty answer failed, and says how")
			}
		})
	}
}

// TestGuardHeldChunksAreStampedWhenTheyArrived: the hedge goes to an
// alternate with the operator's own key, whose answer waits for the
// primary's (to see that the client's key was not refused) before the
// client gets it. The alternate's first content chunk arrives at once; the
// primary's headers come 400 ms later, and the alternate is committed then.
// Its chunk event is stamped when the frame arrived from upstream
// (docs/contract.md section 7), not when the held bytes were replayed to
// the client: else its TTFT, and what the stall processor and hedge_advisor
// learn of the alternate, would hold the primary's wait.
func TestGuardHeldChunksAreStampedWhenTheyArrived(t *testing.T) {
	var sentAt atomic.Int64
	primary := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(400 * time.Millisecond): // headers late, not refused
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(5 * time.Second):
		}
		_, _ = io.WriteString(w, chatEvent+doneEvent)
	}
	alternate := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sentAt.Store(time.Now().UnixNano())
		_, _ = io.WriteString(w, chatEvent+doneEvent)
	}
	h := newHostileGuard(t, primary, alternate, func(g *GuardConfig) {
		g.Hedge.Delay = AutoDuration(50 * time.Millisecond)
		a := &g.Hedge.Alternates[0]
		a.ForwardClientCredentials = false
		a.Headers = configopaque.MapList{{Name: "Authorization", Value: "Bearer sk-operator"}}
	})
	resp, body := post(t, testClient(t), h.proxyURL+"/v1/chat/completions", shapes[0].body,
		http.Header{"Authorization": {"Bearer sk-client"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, chatEvent+doneEvent, string(body))
	spans := byAttempt(t, (&fixture{sink: h.sink}).spans(t, 2))
	winner := spans[1]
	require.Equal(t, semconv.HedgeOutcomeWinner, attr(t, winner, semconv.AttrHedgeOutcome).Str())
	chunks := chunkTimes(winner)
	require.Len(t, chunks, 1)
	late := time.Duration(chunks[0] - sentAt.Load())
	t.Logf("winner's first chunk stamped %v after the alternate sent it (attempt start to chunk: %v)",
		late, time.Duration(chunks[0]-int64(winner.StartTimestamp())))
	assert.Less(t, late, 100*time.Millisecond, "the chunk is stamped when it arrived from upstream")
}

// TestGuardCommitsWithoutContentTeachNoTTFT: with hedge.delay auto the
// guard learns its attempts' time to first content per model, censoring-
// aware. An attempt committed before any content chunk was seen (one whose
// frames the guard cannot read: any client can have it, since
// Accept-Encoding "br, identity;q=0" is forwarded as sent; or one past the
// 1 MiB pre-content bound, an upstream's flood of comments) brings only a
// lower bound. A few such calls must not teach the model a TTFT of the
// upstream's header latency: the next call still hedges at the fallback
// delay.
func TestGuardCommitsWithoutContentTeachNoTTFT(t *testing.T) {
	const normal = `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n" + doneEvent
	for _, tc := range []struct {
		name    string
		poison  func(w http.ResponseWriter) // the answer of a poisoning call
		request http.Header
	}{
		{"undecodable coding", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Content-Encoding", "br")
			_, _ = w.Write([]byte{0x1b, 0x2a, 0x00, 0xf8, 0x8d, 0x94, 0x6e, 0xde})
		}, http.Header{"Accept-Encoding": {"br, identity;q=0"}}},
		{"past the held bound", func(w http.ResponseWriter) {
			// A megabyte of comments at once, the first content 300 ms later.
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, strings.Repeat(": keepalive\n", (1<<20)/12+100))
			w.(http.Flusher).Flush()
			time.Sleep(300 * time.Millisecond)
			_, _ = io.WriteString(w, normal)
		}, http.Header{"X-Poison": {"1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary := func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Accept-Encoding") == "br, identity;q=0" || r.Header.Get("X-Poison") != "" {
					tc.poison(w)
					return
				}
				answer("text/event-stream", normal)(w, r)
			}
			h := newHostileGuard(t, primary, answer("text/event-stream", normal), func(g *GuardConfig) {
				g.Hedge.Delay = autoDuration
				g.Hedge.MinSamples = 3
				g.Hedge.FallbackDelay = 2 * time.Second
			})
			client := testClient(t)
			for range 4 {
				resp, _ := post(t, client, h.proxyURL+"/v1/chat/completions", shapes[0].body, tc.request)
				require.Equal(t, http.StatusOK, resp.StatusCode)
			}
			resp, body := post(t, client, h.proxyURL+"/v1/chat/completions", shapes[0].body, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, normal, string(body))
			require.Eventually(t, func() bool { return h.sink.SpanCount() >= 5 }, 10*time.Second, 5*time.Millisecond)
			time.Sleep(50 * time.Millisecond) // a hedge's span, if the last call hedged
			last := ptrace.NewSpan()          // the last call's first attempt
			for _, s := range (&fixture{sink: h.sink}).spans(t, h.sink.SpanCount()) {
				if attr(t, s, semconv.AttrHedgeAttempt).Int() == 0 && s.StartTimestamp() >= last.StartTimestamp() {
					last = s
				}
			}
			t.Logf("the next call's hedge delay: %v ms (%s)", attr(t, last, semconv.AttrHedgeDelayMs).Double(),
				attr(t, last, semconv.AttrHedgeDelaySource).Str())
			assert.Equal(t, "fallback", attr(t, last, semconv.AttrHedgeDelaySource).Str(),
				"no call brought a time to first content: the delay is still the fallback")
		})
	}
}

// TestGuardPassesOnAnErrorAnswerWhenNothingElseAnswers: an error object
// under 200 fails over as a 5xx does, a redirect ends the call as a 4xx
// does, and the client gets the last answer as the upstream sent it once
// the guard has nothing else to try; a whole completion (an upstream that
// does not stream) is still the call's answer at once.
func TestGuardPassesOnAnErrorAnswerWhenNothingElseAnswers(t *testing.T) {
	const errorObject = `{"error":{"message":"upstream connect error","type":"server_error","param":null,"code":null}}`
	const whole = `{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
	redirect := func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://login.gateway.example/", http.StatusFound)
	}
	for _, tc := range []struct {
		name             string
		primary, alt     http.HandlerFunc
		status           int
		body             string
		primaryRequests  int64
		alternateRequest int64
	}{
		// A failure as a 5xx is: the next attempt starts at once.
		{"error object, both sources", answer("application/json", errorObject), answer("application/json", errorObject), http.StatusOK, errorObject, 1, 1},
		// A refusal as a 4xx is: no attempt starts on it.
		{"redirect", redirect, redirect, http.StatusFound, "", 1, 0},
		{"whole completion", answer("application/json", whole), answer("application/json", errorObject), http.StatusOK, whole, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostileGuard(t, tc.primary, tc.alt, func(g *GuardConfig) {
				g.Hedge.Delay = AutoDuration(time.Hour)
			})
			client := testClient(t)
			client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			resp, body := post(t, client, h.proxyURL+"/v1/chat/completions", shapes[0].body, nil)
			assert.Equal(t, tc.status, resp.StatusCode)
			if tc.body != "" {
				assert.Equal(t, tc.body, string(body), "the answer as the upstream sent it")
			} else {
				assert.Equal(t, "https://login.gateway.example/", resp.Header.Get("Location"))
			}
			assert.Equal(t, tc.primaryRequests, h.primary.Load(), "requests to the primary")
			assert.Equal(t, tc.alternateRequest, h.alternate.Load(), "requests to the alternate")
		})
	}
}

// TestGuardPassesOnASlowAnswerThatIsNoStream: an answer the guard reads as
// no stream reaches the client whole however slowly it comes: one in a media
// type the proxy does not frame (a stream it cannot read, text/plain) goes on
// as it comes, and a JSON one whose body comes after its headers is read to
// see whether it is an error object, never cut by the bound that error
// answers' bodies have.
func TestGuardPassesOnASlowAnswerThatIsNoStream(t *testing.T) {
	const first, rest = `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n", "data: [DONE]\n\n"
	const whole = `{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
	slow := func(mediaType, a, b string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", mediaType)
			_, _ = io.WriteString(w, a)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(1500 * time.Millisecond): // past the error body's 1 s
			}
			_, _ = io.WriteString(w, b)
		}
	}
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		body    string
	}{
		{"a stream the proxy does not frame", slow("text/plain", first, rest), first + rest},
		{"a JSON answer sent after its headers", slow("application/json", whole[:10], whole[10:]), whole},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostileGuard(t, tc.handler, answer("application/json", "{}"), func(g *GuardConfig) {
				g.Hedge.Delay = AutoDuration(time.Hour)
			})
			resp, body := post(t, testClient(t), h.proxyURL+"/v1/chat/completions", shapes[0].body, nil)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, tc.body, string(body), "the whole answer, as the upstream sent it")
			assert.Zero(t, h.alternate.Load())
		})
	}
}

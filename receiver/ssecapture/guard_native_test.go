// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

// nativeShapes are the APIs of Gemini (its SSE, as the genai SDK asks for
// it, and its JSON array) and Ollama, with the client that reads each.
var nativeShapes = []string{"gemini", "gemini json array", "ollama chat", "ollama generate"}

// TestGuardHedgesNativeStreams: a primary without content within the hedge
// delay loses to the alternate, on Gemini's and Ollama's APIs as on
// OpenAI's: the client gets the alternate's bytes, the primary's request
// is cancelled, and both attempts have their span.
func TestGuardHedgesNativeStreams(t *testing.T) {
	for _, name := range nativeShapes {
		t.Run(name, func(t *testing.T) {
			f := newGuardFixture(t,
				fakellm.Script{TTFTMillis: 3000, GapsMillis: []float64{5, 5}},
				fakellm.Script{TTFTMillis: 30, GapsMillis: []float64{5, 5, 5}},
				func(g *GuardConfig) { g.Hedge.Delay = AutoDuration(150 * time.Millisecond) })
			start := time.Now()
			got := stallRuns[name](t, f.proxyURL)
			require.NoError(t, got.err)
			assert.Less(t, time.Since(start), 2*time.Second, "the hedge answered, not the slow primary")
			rec, err := f.alternate.WaitFor(testContext(t), 1)
			require.NoError(t, err)
			assert.Equal(t, rec[0].Text, strings.Join(got.texts, ""), "the client got the alternate's answer")
			reqs, err := f.primary.WaitFor(testContext(t), 1)
			require.NoError(t, err)
			assert.True(t, reqs[0].Disconnected, "the primary's request was cancelled")

			spans := byAttempt(t, f.spans(t, 2))
			assert.Equal(t, semconv.HedgeOutcomeWinner, attr(t, spans[1], semconv.AttrHedgeOutcome).Str())
			assert.Equal(t, semconv.HedgeTriggerTTFT, attr(t, spans[1], semconv.AttrHedgeTrigger).Str())
			assert.Equal(t, semconv.HedgeOutcomeLoser, attr(t, spans[0], semconv.AttrHedgeOutcome).Str())
			assert.Len(t, chunkTimes(spans[1]), 4)
		})
	}
}

// TestGuardReplacesNative503: a 503 from the primary is replaced by the
// alternate's stream at once, on Gemini's and Ollama's APIs.
func TestGuardReplacesNative503(t *testing.T) {
	for _, name := range nativeShapes {
		t.Run(name, func(t *testing.T) {
			f := newGuardFixture(t,
				fakellm.Script{Status: http.StatusServiceUnavailable},
				fakellm.Script{TTFTMillis: 10, GapsMillis: []float64{5}},
				func(*GuardConfig) {})
			got := stallRuns[name](t, f.proxyURL)
			require.NoError(t, got.err)
			rec, err := f.alternate.WaitFor(testContext(t), 1)
			require.NoError(t, err)
			assert.Equal(t, rec[0].Text, strings.Join(got.texts, ""))
			spans := byAttempt(t, f.spans(t, 2))
			assert.Equal(t, int64(http.StatusServiceUnavailable), attr(t, spans[0], semconv.AttrHTTPStatusCode).Int())
			assert.Equal(t, semconv.HedgeTriggerError, attr(t, spans[1], semconv.AttrHedgeTrigger).Str())
			assert.Equal(t, ptrace.StatusCodeUnset, spans[1].Status().Code())
		})
	}
}

// TestGuardEndsNativeStalls: the watchdog ends a stalled Gemini or Ollama
// stream at stall_timeout with the API's own error, which the client
// raises as such; the upstream request is closed and the span says why.
func TestGuardEndsNativeStalls(t *testing.T) {
	const timeout = 400 * time.Millisecond
	stall := fakellm.Script{TTFTMillis: 10, GapsMillis: []float64{10, 60000}}
	for _, name := range nativeShapes {
		t.Run(name, func(t *testing.T) {
			f := newGuardFixture(t, stall, stall, func(g *GuardConfig) { g.StallTimeout = AutoDuration(timeout) })
			start := time.Now()
			got := stallRuns[name](t, f.proxyURL)
			assert.Less(t, time.Since(start), timeout+2*time.Second, "not the upstream's minute of silence")
			assertTypedStreamError(t, name, got.err)
			reqs, err := f.primary.WaitFor(testContext(t), 1)
			require.NoError(t, err)
			assert.True(t, reqs[0].Disconnected, "the upstream request was closed")
			assert.Len(t, got.texts, 2, "the content before the stall is delivered")
			span := f.spans(t, 1)[0]
			assert.Equal(t, "stall_timeout", attr(t, span, semconv.AttrErrorType).Str())
			assert.Len(t, chunkTimes(span), 2)
		})
	}
}

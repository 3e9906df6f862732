// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

// TestGuardedSpansIgnoreTheClientsHedgeBaggage: on a guarded call the
// guard is the hedging client, and the llm.hedge.* attributes of its
// attempts' spans are its own. A client's baggage cannot mark the attempt
// it got a loser (keeping it out of the winner figures), nor give it a
// trigger or a hedge delay it did not have.
func TestGuardedSpansIgnoreTheClientsHedgeBaggage(t *testing.T) {
	f := newGuardFixture(t,
		fakellm.Script{TTFTMillis: 10, GapsMillis: []float64{5}},
		fakellm.Script{TTFTMillis: 10, GapsMillis: []float64{5}},
		func(g *GuardConfig) { g.StallTimeout = AutoDuration(10 * time.Second) }) // no hedge delay
	body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, f.proxyURL+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Baggage", "llm.hedge.loser=true,llm.hedge.outcome_inferred=true,llm.hedge.trigger=stall,"+
		"llm.hedge.delay_ms=1,llm.hedge.delay_source=fleet,llm.hedge.outcome=loser,llm.hedge.attempt=3,llm.hedge.group_id=g")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)

	span := f.spans(t, 1)[0]
	attrs := span.Attributes()
	assert.Equal(t, semconv.HedgeOutcomeWinner, attr(t, span, semconv.AttrHedgeOutcome).Str())
	assert.Equal(t, int64(0), attr(t, span, semconv.AttrHedgeAttempt).Int())
	assert.NotEqual(t, "g", attr(t, span, semconv.AttrHedgeGroupID).Str())
	for _, k := range []string{
		semconv.AttrHedgeLoser, semconv.AttrHedgeOutcomeInferred, semconv.AttrHedgeTrigger,
		semconv.AttrHedgeDelayMs, semconv.AttrHedgeDelaySource,
	} {
		_, ok := attrs.Get(k)
		assert.False(t, ok, "%s from the client's baggage", k)
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/hedgecore"
)

// TestInventedModelNamesKeepTheFleetAdvice: a request names its model, so
// a client can send maxLearnedModels streaming calls under names it invents
// (each one answered 404 by the upstream, at no cost). Were they kept, the
// models that come after them would learn in the rule's shared policy,
// which asks no fleet: a model the hedge_advisor has fresh advice for would
// lose it for as long as the process runs. Only a model whose call brought
// content is kept (TestAModelIsKeptOnceACallBringsContent).
func TestInventedModelNamesKeepTheFleetAdvice(t *testing.T) {
	f, _, clock := newFleetFixture(t, fleetBody)
	g := fleetGuard(f, clock)
	for i := range maxLearnedModels {
		g.For("openai", fmt.Sprintf("junk-%d", i))
	}
	pol := g.For("openai", "gpt-x")
	assert.Equal(t, StallAdvisor.String(), pol.StallTimeoutSource(true).String(),
		"the fleet's advice for gpt-x still comes first after a client named 1000 other models")
	assert.Equal(t, 300*time.Millisecond, pol.StallTimeout(true), "three times the fleet's p99.9 gap of gpt-x")
	pol.takeFleetDelay(clock.Now().UnixNano())
	_, src := pol.hp.DelayFrom(0)
	assert.Equal(t, hedgecore.DelayFleet.String(), src.String(), "the fleet's hedge delay of gpt-x")
}

// TestAModelIsKeptOnceACallBringsContent: a learning rule keeps a model's
// policy once one of its calls brought content; a call answered with an
// error (a model the upstream does not have) keeps none.
func TestAModelIsKeptOnceACallBringsContent(t *testing.T) {
	h := newHarness(t, Rule{StallTimeout: AutoTimeout, AutoStall: true, MaxAttempts: 1})
	s, out, _ := h.call(t)
	h.primary.next(t).status(http.StatusNotFound, `{"error":{"message":"no such model","type":"invalid_request_error","code":"model_not_found"}}`)
	r := wait(t, out)
	require.NoError(t, r.err)
	require.Equal(t, http.StatusNotFound, r.resp.StatusCode)
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
	assert.NotSame(t, s.Policy(), h.guard.For("openai", "gpt-4o"), "a call answered 404 keeps no policy for its model")

	s, _, resp, _ := h.commit(t, textFrame)
	require.NoError(t, resp.Body.Close())
	s.Finish()
	assert.Same(t, s.Policy(), h.guard.For("openai", "gpt-4o"), "a call that brought content keeps its model's policy")
}

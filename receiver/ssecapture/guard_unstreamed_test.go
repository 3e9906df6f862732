// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

// TestGuardLeavesNonStreamingCallsAlone: the guard acts on streaming calls
// only. A "stream": false call to a primary answering 503 is forwarded once,
// as it comes: no failover, no hedge, no attempt span, whatever the hedge
// settings, so a client cannot make a call it does not stream cost more
// upstream requests.
func TestGuardLeavesNonStreamingCallsAlone(t *testing.T) {
	f := newGuardFixture(t,
		fakellm.Script{Status: http.StatusServiceUnavailable},
		fakellm.Script{TTFTMillis: 10, GapsMillis: []float64{5}},
		func(g *GuardConfig) {
			g.Hedge.Delay = AutoDuration(10 * time.Millisecond)
			g.Hedge.MaxAttempts = 5
		})
	resp, _ := post(t, testClient(t), f.proxyURL+"/v1/chat/completions",
		`{"model":"gpt-4o","stream":false,"messages":[{"role":"user","content":"hi"}]}`, http.Header{"Content-Type": {"application/json"}})
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "the primary's answer")
	span := f.spans(t, 1)[0]
	_, hedged := span.Attributes().Get(semconv.AttrHedgeGroupID)
	assert.False(t, hedged, "not a guarded call")
	assert.Len(t, f.primary.Requests(), 1)
	assert.Empty(t, f.alternate.Requests(), "no failover")
}

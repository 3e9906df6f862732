// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

// clientFrom is an HTTP client whose connections come from the loopback
// address ip: to the proxy, a client of its own.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestFastFailuresOfManyClientsStayWithinTheSharedBudget: both upstreams
// answer 500 at once, and many clients call at the same time. The guard
// retries a failed attempt at once, but never past the budget: each
// client's bucket, and the bucket all of them share, bound the attempts
// after the first, whatever max_attempts allows, so an outage does not
// multiply the load on the upstreams by max_attempts.
func TestFastFailuresOfManyClientsStayWithinTheSharedBudget(t *testing.T) {
	const (
		clients  = 20
		perEach  = 3
		shared   = 10
		maxTries = 5
	)
	f := newGuardFixture(t,
		fakellm.Script{Status: http.StatusInternalServerError},
		fakellm.Script{Status: http.StatusInternalServerError},
		func(g *GuardConfig) {
			g.Hedge.MaxAttempts = maxTries
			g.Hedge.Budget = BudgetConfig{MaxTokens: 4, TokenRatio: 0.1, SharedMaxTokens: shared}
		})
	var wg sync.WaitGroup
	for c := range clients {
		hc := clientFrom(fmt.Sprintf("127.0.0.%d", 10+c))
		wg.Go(func() {
			defer hc.CloseIdleConnections()
			for range perEach {
				body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`
				req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, f.proxyURL+"/v1/chat/completions", strings.NewReader(body))
				if !assert.NoError(t, err) {
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if !assert.NoError(t, err) {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				assert.Equal(t, http.StatusInternalServerError, resp.StatusCode, "the last failure, as its upstream sent it")
			}
		})
	}
	wg.Wait()
	calls := clients * perEach
	sent := len(f.primary.Requests()) + len(f.alternate.Requests())
	retries := sent - calls
	t.Logf("%d calls, %d upstream requests", calls, sent)
	assert.Positive(t, retries, "failover still happened")
	// Each attempt after a call's first takes a token of the shared
	// bucket above its half: at most shared/2 of them in all.
	assert.LessOrEqual(t, retries, shared/2, "the shared bucket bounds the retries of all clients together")
	f.spans(t, sent) // one span per upstream request, none lost
}

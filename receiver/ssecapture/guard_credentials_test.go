// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

// TestAdvisorCredentialStaysWithTheAdvisor: the guard's advisor
// client carries the operator's credential for the hedge_advisor in its
// headers (or auth), which confighttp adds in the client's transport, to
// every request it sends. Were redirects followed, an advisor (or a load
// balancer in front of it) that answers 302 to another host would make the
// proxy send that host the operator's credential, past net/http's own rule
// that drops Authorization on a redirect to another host.
func TestAdvisorCredentialStaysWithTheAdvisor(t *testing.T) {
	var mu sync.Mutex
	var got []string
	elsewhere := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"window_s":60,"advice":[]}`)
	}))
	// Another host: localhost, where the advisor is 127.0.0.1.
	elsewhere = strings.Replace(elsewhere, "127.0.0.1", "localhost", 1)
	advisor := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere+"/v1/advice", http.StatusFound)
	}))
	startAdvisedReceiver(t, receivertest.NewNopSettings(metadata.Type), advisor, func(a *AdvisorConfig) {
		a.Headers = configopaque.MapList{{Name: "Authorization", Value: "Bearer advisor-secret"}}
	})
	time.Sleep(10 * advisedInterval)
	mu.Lock()
	defer mu.Unlock()
	leaked := 0
	for _, h := range got {
		if strings.Contains(h, "advisor-secret") {
			leaked++
		}
	}
	assert.Zero(t, leaked, "of %d fetches that reached the host the advisor redirected to, %d carried the advisor's credential", len(got), leaked)
}

// TestGuardOperatorsPrimaryKeyFailsOver: a central proxy whose primary
// carries the operator's own key (proxy.upstream.headers, as
// TestProxyAuthHeaderIsCentral; or sigv4auth for Bedrock), with an
// alternate on a second key of the operator's. The primary's 429
// insufficient_quota refuses the operator's key A, not a client's, when
// the client sent none or sent it in the header the primary sets itself:
// docs/security.md ends a call on a refusal only when it was "answered by
// an upstream that got the client's credential", so the call fails over
// to key B, as a rate limit does. A client key in another header reaches
// the primary: the refusal is the client's, and ends the call.
func TestGuardOperatorsPrimaryKeyFailsOver(t *testing.T) {
	for _, tc := range []struct {
		name      string
		header    http.Header
		want      int
		alternate int64
	}{
		{"no client credential", nil, http.StatusOK, 1},
		{"the client's key where the operator's goes", http.Header{"Authorization": {"Bearer sk-client"}}, http.StatusOK, 1},
		{"the client's key in a header of its own", http.Header{"Api-Key": {"sk-client"}}, http.StatusTooManyRequests, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostileGuard(t,
				func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					if r.Header.Get("Authorization") != "Bearer sk-operator-A" {
						w.WriteHeader(http.StatusUnauthorized)
						_, _ = io.WriteString(w, `{"error":{"code":"invalid_api_key","type":"invalid_request_error"}}`)
						return
					}
					w.WriteHeader(http.StatusTooManyRequests)
					_, _ = io.WriteString(w, `{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
				},
				answer("text/event-stream", chatEvent+doneEvent),
				func(g *GuardConfig) {
					a := &g.Hedge.Alternates[0]
					a.ForwardClientCredentials = false
					a.Headers = configopaque.MapList{{Name: "Authorization", Value: "Bearer sk-operator-B"}}
				},
				func(p *ProxyConfig) {
					p.Upstream.Headers = configopaque.MapList{{Name: "Authorization", Value: "Bearer sk-operator-A"}}
				})
			resp, got := post(t, testClient(t), h.proxyURL+shapes[0].path, shapes[0].body, tc.header)
			assert.Equal(t, tc.want, resp.StatusCode, string(got))
			assert.Equal(t, tc.alternate, h.alternate.Load(), "requests to the alternate")
		})
	}
}

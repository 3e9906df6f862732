// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

// The guarded proxy with a small budget per client: max_tokens 4, so one
// call whose primary fails and fails over (a failure and a hedge, 2
// tokens) takes a client's bucket to its threshold. The alternate answers
// every request.
const guardBudgetConfig = `
receivers:
  sse_capture:
    proxy:
      endpoint: 127.0.0.1:${PROXY}
      upstream:
        endpoint: ${PRIMARY}
      guard:
        hedge:
          max_attempts: 2
          budget: {max_tokens: 4, token_ratio: 0.1}
          alternates:
            - endpoint: ${ALTERNATE}
              headers:
                X-Fakellm-Script: '{"ttft_ms":10,"gaps_ms":[5,5]}'
exporters:
` + sinkExporter + `service:
  pipelines:
    traces:
      receivers: [sse_capture]
      exporters: [otlp_http]
`

// clientFrom is an HTTP client whose connections come from ip, a loopback
// address of its own: the proxy tells clients apart by address.
func clientFrom(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// failingPrimaryCall streams one chat completion whose primary answers 503
// and returns the status the client got.
func failingPrimaryCall(ctx context.Context, t *testing.T, hc *http.Client, proxy, model string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxy+"/v1/chat/completions",
		strings.NewReader(fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, model)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(fakellm.HeaderScript, `{"status":503}`)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.StatusCode == http.StatusOK {
		assert.Contains(t, string(b), "data: [DONE]", "the alternate's whole stream")
	}
	return resp.StatusCode
}

// TestGuardBudgetIsPerClient: a client whose calls all need failover
// spends its own bucket; another client's 503 still fails over. With one
// bucket for the whole proxy the second client got the first one's 503.
func TestGuardBudgetIsPerClient(t *testing.T) {
	sink := startSink(t)
	primary, alternate := startFakellm(t), startFakellm(t)
	proxyPort := freePort(t)
	collector(t, fill(guardBudgetConfig, "PROXY", proxyPort, "PRIMARY", primary, "ALTERNATE", alternate, "SINK", sink.URL))
	proxy := fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const badModel, goodModel = "e2e-budget-noisy", "e2e-budget-quiet"

	noisy := clientFrom(t, "127.0.0.2")
	var statuses []int
	for range 5 {
		statuses = append(statuses, failingPrimaryCall(ctx, t, noisy, proxy, badModel))
	}
	assert.Equal(t, []int{200, 503, 503, 503, 503}, statuses,
		"the noisy client's first failover spends its bucket to the threshold; its next ones are refused")

	quiet := clientFrom(t, "127.0.0.1")
	assert.Equal(t, http.StatusOK, failingPrimaryCall(ctx, t, quiet, proxy, goodModel),
		"another client's failover is not refused")

	assert.Len(t, ended(ctx, t, alternate, badModel, 1), 1, "the noisy client reached the alternate once")
	assert.Len(t, ended(ctx, t, alternate, goodModel, 1), 1)
	assert.Len(t, ended(ctx, t, primary, badModel, 5), 5)
	sp := spansByStart(t, sink, goodModel, 2)
	assert.Equal(t, semconv.HedgeTriggerError, strAttr(sp[1], semconv.AttrHedgeTrigger), "the quiet client's call failed over")
	assert.Equal(t, semconv.HedgeOutcomeWinner, strAttr(sp[1], semconv.AttrHedgeOutcome))
}

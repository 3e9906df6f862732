// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgeadvisorexporter

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/advice"
)

// TestWaitingPollIsServedFromTheNewAnswer: a poll that waited while another
// computed the answer is served from that answer, not made to compute it
// again (with 8 clients polling, recomputations chained that way tripled
// the CPU per poll in BenchmarkAdvicePolling).
func TestWaitingPollIsServedFromTheNewAnswer(t *testing.T) {
	a, clock := newTestAdvisor(t, testConfig())
	require.NoError(t, a.consumeTraces(context.Background(), traces(fleet(10, time.Second)...)))
	_, first := get(t, a, "")
	require.Len(t, first.Advice, 1)

	// Another poll computes a new answer while this one waits for the lock.
	a.answerMu.Lock()
	served := make(chan int64)
	go func() {
		// No require here: a failing assertion must not stop this goroutine.
		rec := httptest.NewRecorder()
		a.serveAdvice(rec, httptest.NewRequest(http.MethodGet, AdvicePath, http.NoBody))
		var resp advice.Response
		if assert.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp)) && assert.Len(t, resp.Advice, 1) {
			served <- resp.Advice[0].Samples
			return
		}
		served <- -1
	}()
	time.Sleep(50 * time.Millisecond) // the poll is waiting at the lock
	require.NoError(t, a.consumeTraces(context.Background(), traces(fleet(10, time.Second)...)))
	clock.Advance(2 * answerTTL)
	a.answerAt = clock.Now() // the other poll's answer, of 10 samples
	a.answerMu.Unlock()
	assert.Equal(t, int64(10), <-served, "served from the answer just computed")
}

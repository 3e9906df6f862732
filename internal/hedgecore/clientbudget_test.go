// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

import (
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failingCall is one call whose every attempt fails with a 503 under a
// policy of two attempts without a TTFT hedge: the primary fails, the
// failover starts if the bucket allows it, and fails too. It returns the
// attempts the call started.
func failingCall(t *testing.T, p *Policy, b *Budget) int {
	t.Helper()
	r := newRace(p, false)
	r.DrawOn(b)
	r.Start(0)
	for i := 0; !r.Done(); i++ {
		acts(r)
		r.Fail(i, int64(i+1)*ms, Retryable, errStatus503)
	}
	return r.Attempts()
}

// failoverCall is one call whose primary fails with a 503 and whose
// failover, if the bucket allows it, completes. It reports whether the
// call succeeded.
func failoverCall(t *testing.T, p *Policy, b *Budget) bool {
	t.Helper()
	r := newRace(p, false)
	r.DrawOn(b)
	r.Start(0)
	acts(r)
	r.Fail(0, ms, Retryable, errStatus503)
	if r.Done() {
		return false
	}
	require.Equal(t, []string{"+1"}, acts(r))
	r.Content(1, 2*ms, true)
	r.Complete(1, 3*ms)
	return r.Err() == nil
}

func failoverPolicy(t *testing.T) *Policy {
	t.Helper()
	return testPolicy(t, noTTFTHedge(), maxAttempts(2))
}

// TestOneClientsFailuresLeaveOthersTheirFailover: one client whose calls
// all fail spends its own bucket, not another client's.
func TestOneClientsFailuresLeaveOthersTheirFailover(t *testing.T) {
	p := failoverPolicy(t)
	cb := NewClientBudgets(ClientBudgetConfig{MaxTokens: 10, TokenRatio: 0.1, SharedMaxTokens: 100})
	bad, good := cb.For("addr:10.0.0.1"), cb.For("addr:10.0.0.2")
	attempts := 0
	for range 50 {
		attempts += failingCall(t, p, bad)
	}
	assert.Less(t, attempts, 50+5, "the failing client's own bucket stopped its failovers")
	assert.False(t, failoverCall(t, p, bad), "the failing client gets no failover")
	assert.InDelta(t, 100-5, cb.Shared().level(), 1e-9,
		"the failing client spent half its own bucket of the shared one, no more")
	assert.True(t, failoverCall(t, p, good), "another client still gets its failover")

	// The same calls on one bucket for everyone: the failing client takes
	// the failover away from the other one.
	one := NewBudget(10, 0.1)
	for range 50 {
		failingCall(t, p, one)
	}
	assert.False(t, failoverCall(t, p, one), "one bucket for all: the other client is refused")
}

// TestSharedBudgetBoundsManyClients: clients that all fail at once (an
// outage) stop hedging together once the shared bucket is spent, however
// many they are.
func TestSharedBudgetBoundsManyClients(t *testing.T) {
	p := failoverPolicy(t)
	cb := NewClientBudgets(ClientBudgetConfig{MaxTokens: 10, TokenRatio: 0.1, SharedMaxTokens: 20})
	extra := 0
	for c := range 100 {
		b := cb.For("addr:10.0.1." + strconv.Itoa(c))
		for range 5 {
			extra += failingCall(t, p, b) - 1
		}
	}
	// The shared bucket allows while above 10 tokens; each failover costs
	// it 2 (the hedge and its failure) and the failed primary 1.
	assert.LessOrEqual(t, extra, 5, "100 clients together: the shared bucket bounds the failovers")
	assert.Positive(t, extra)
	assert.False(t, failoverCall(t, p, cb.For("addr:10.0.2.1")), "a fresh client too waits for the shared bucket")

	// Successes refill the shared bucket as they refill a client's.
	b := cb.For("addr:10.0.2.2")
	for range 200 {
		r := newRace(p, false)
		r.DrawOn(b)
		r.Start(0)
		acts(r)
		r.Content(0, ms, true)
		r.Complete(0, 2*ms)
	}
	assert.True(t, failoverCall(t, p, b))
}

func TestAllowRefusedBySharedSpendsNothing(t *testing.T) {
	cb := NewClientBudgets(ClientBudgetConfig{MaxTokens: 10, TokenRatio: 0.1, SharedMaxTokens: 2})
	b := cb.For("a")
	require.True(t, b.Allow(), "shared 2 -> 1")
	assert.False(t, b.Allow(), "the shared bucket is at its threshold")
	assert.InDelta(t, 9, b.level(), 1e-9, "the refused hedge cost the client nothing")
}

func TestClientBudgetsAreBounded(t *testing.T) {
	cb := NewClientBudgets(ClientBudgetConfig{MaxTokens: 10, TokenRatio: 0.1, SharedMaxTokens: 100, MaxClients: 3})
	a := cb.For("a")
	a.Failure()
	cb.For("b")
	cb.For("c")
	assert.Same(t, a, cb.For("a"), "a client keeps its bucket")
	cb.For("d") // past the bound: b, the least recently used, goes
	assert.Equal(t, 3, cb.Clients())
	assert.Same(t, a, cb.For("a"), "a was used after b")
	assert.InDelta(t, 10, cb.For("b").level(), 1e-9, "b comes back on a full bucket")
	assert.Equal(t, 3, cb.Clients())

	def := NewClientBudgets(ClientBudgetConfig{MaxTokens: 10, TokenRatio: 0.1})
	for i := range DefaultMaxClients + 10 {
		def.For(strconv.Itoa(i))
	}
	assert.Equal(t, DefaultMaxClients, def.Clients(), "max_clients 0 takes the default")
	assert.Nil(t, def.Shared(), "no shared bucket without SharedMaxTokens")
}

func TestClientBudgetsDisabled(t *testing.T) {
	cb := NewClientBudgets(ClientBudgetConfig{MaxTokens: 0, TokenRatio: 0.1, SharedMaxTokens: 100})
	assert.Nil(t, cb)
	assert.Nil(t, cb.For("a"), "no budget: every hedge allowed")
	assert.Zero(t, cb.Clients())
	assert.True(t, failoverCall(t, failoverPolicy(t), cb.For("a")))
}

func TestClientBudgetsConcurrent(t *testing.T) {
	cb := NewClientBudgets(ClientBudgetConfig{MaxTokens: 10, TokenRatio: 0.1, SharedMaxTokens: 1000, MaxClients: 8})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				b := cb.For(strconv.Itoa((g*7 + i) % 16))
				if b.Allow() {
					b.Failure()
				}
				b.Success()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 8, cb.Clients())
	assert.LessOrEqual(t, cb.Shared().level(), 1000.0)
}

func TestDrawOnReplacesThePolicysBucket(t *testing.T) {
	p := testPolicy(t, budget(2, 0.1))
	r := newRace(p, false)
	r.DrawOn(nil)
	r.Start(0)
	acts(r)
	for i := 1; i < 3; i++ {
		r.Advance(int64(i) * 100 * ms)
		assert.Equal(t, []string{"+" + strconv.Itoa(i)}, acts(r), "no budget for this call")
	}
	assert.InDelta(t, 2, p.Budget().level(), 1e-9, "the policy's bucket was not touched")
}

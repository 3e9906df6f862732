// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"

	"github.com/streamstall/streamstall/internal/hedgecore"
	"github.com/streamstall/streamstall/internal/llmstream"
)

// authData is what an authenticator extension puts in client.Info.
type authData map[string]any

func (a authData) GetAttribute(name string) any { return a[name] }
func (a authData) GetAttributeNames() []string {
	names := make([]string, 0, len(a))
	for n := range a {
		names = append(names, n)
	}
	return names
}

func withClient(info client.Info) context.Context {
	return client.NewContext(context.Background(), info)
}

func ipAddr(s string) net.Addr { return &net.IPAddr{IP: net.ParseIP(s)} }

func TestClientOf(t *testing.T) {
	assert.Equal(t, "unknown", ClientOf(context.Background(), 0), "no client.Info: one bucket")
	assert.Equal(t, "addr:10.0.0.1", ClientOf(withClient(client.Info{Addr: ipAddr("10.0.0.1")}), 0))

	alice := ClientOf(withClient(client.Info{Addr: ipAddr("10.0.0.1"), Auth: authData{"username": "alice", "raw": "YWxpY2U6czNjcmV0"}}), 0)
	assert.True(t, strings.HasPrefix(alice, "auth:"), "the authenticated client, not its address: %s", alice)
	assert.NotContains(t, alice, "alice")
	assert.NotContains(t, alice, "YWxpY2U6czNjcmV0", "no credential is held")
	bob := ClientOf(withClient(client.Info{Addr: ipAddr("10.0.0.1"), Auth: authData{"username": "bob", "raw": "Ym9iOmh1bnRlcjI="}}), 0)
	assert.NotEqual(t, alice, bob, "two clients behind one address")
	again := ClientOf(withClient(client.Info{Addr: ipAddr("10.0.0.9"), Auth: authData{"raw": "YWxpY2U6czNjcmV0", "username": "alice"}}), 0)
	assert.Equal(t, alice, again, "the same client from another address, attributes in any order")
	assert.NotEqual(t,
		ClientOf(withClient(client.Info{Auth: authData{"a": "b:c"}}), 0),
		ClientOf(withClient(client.Info{Auth: authData{"a:b": "c"}}), 0), "a name cannot pose as a value")

	assert.Equal(t, "addr:10.0.0.1", ClientOf(withClient(client.Info{Addr: ipAddr("10.0.0.1"), Auth: authData{}}), 0),
		"an authenticator that names nobody (bearertokenauth): the address")
}

// An IPv6 client picks any address of the network it is given: keyed by
// the address, it would take a fresh bucket per call and drain the shared
// one alone.
func TestClientOfIPv6IsItsNetwork(t *testing.T) {
	of := func(addr string, prefix int) string {
		return ClientOf(withClient(client.Info{Addr: ipAddr(addr)}), prefix)
	}
	assert.Equal(t, "addr:2001:db8:1:2::/64", of("2001:db8:1:2::1", 0), "a /64 by default")
	assert.Equal(t, of("2001:db8:1:2::1", 0), of("2001:db8:1:2:ffff:ffff:ffff:fffe", 0), "one client for every address of its /64")
	assert.NotEqual(t, of("2001:db8:1:2::1", 0), of("2001:db8:1:3::1", 0), "the next /64 is another client")
	assert.Equal(t, of("2001:db8:1:2::1", 48), of("2001:db8:1:ff00::1", 48), "ipv6_prefix_length 48: one client per /48")
	assert.Equal(t, "addr:2001:db8:1:2::1/128", of("2001:db8:1:2::1", 128), "128: each address on its own")
	assert.Equal(t, "addr:10.0.0.1", of("::ffff:10.0.0.1", 0), "an IPv4-mapped address is its IPv4 client")
	assert.Equal(t, "addr:10.0.0.1", of("10.0.0.1", 48), "the prefix is for IPv6 only")
	assert.Equal(t, "addr:fe80::/64", ClientOf(withClient(client.Info{Addr: &net.IPAddr{IP: net.ParseIP("fe80::1"), Zone: "eth0"}}), 0),
		"the zone is dropped: it names an interface, not a client")
	assert.Equal(t, "addr:2001:db8::/64", of("2001:db8::1", 129), "out of range: the default (the configuration refuses it)")
	port := func(addr string) string {
		return ClientOf(withClient(client.Info{Addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(addr))}), 0)
	}
	assert.Equal(t, "addr:10.0.0.1", port("10.0.0.1:5000"), "a listener that records the port: the client is its address")
	assert.Equal(t, "addr:2001:db8::/64", port("[2001:db8::1]:5000"))
}

// callAs starts a guarded call as the listener hands it over for info.
func (h *harness) callAs(t *testing.T, info client.Info) (*Session, <-chan result) {
	t.Helper()
	ctx, cancel := context.WithCancel(client.NewContext(t.Context(), info))
	t.Cleanup(cancel)
	in, _ := url.Parse("/v1/chat/completions")
	body := []byte(`{"model":"gpt-4o","stream":true}`)
	s := h.guard.NewSession(h.stopping, "openai", "gpt-4o", llmstream.ShapeChatCompletions, in, body, h.clock.Now().UnixNano())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://primary.example/v1/chat/completions", strings.NewReader(string(body)))
	require.NoError(t, err)
	out := make(chan result, 1)
	go func() {
		resp, err := s.RoundTrip(req, h.primary)
		out <- result{resp, err}
	}()
	return s, out
}

// failingCall makes a call as info whose primary answers 503, and its
// failover when failsOver (the alternate answers 503 too; otherwise no
// request may reach it); it returns the attempts the budget refused.
func (h *harness) failingCall(t *testing.T, info client.Info, failsOver bool) int {
	t.Helper()
	s, out := h.callAs(t, info)
	h.primary.next(t).status(http.StatusServiceUnavailable, `{"error":{"message":"overloaded"}}`)
	if failsOver {
		h.alt.next(t).status(http.StatusServiceUnavailable, `{"error":{"message":"overloaded"}}`)
	} else {
		h.alt.none(t)
	}
	r := wait(t, out)
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusServiceUnavailable, r.resp.StatusCode)
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
	return s.Refused()
}

// TestOneClientsFailuresLeaveAnotherItsFailover: the calls of a client
// whose every upstream fails spend its own bucket; another client's 503
// still fails over.
func TestOneClientsFailuresLeaveAnotherItsFailover(t *testing.T) {
	// max_tokens 4: a failed call with its failover (3 tokens) takes a
	// client's bucket below half.
	budgets := hedgecore.NewClientBudgets(hedgecore.ClientBudgetConfig{MaxTokens: 4, TokenRatio: 0.1, SharedMaxTokens: 40})
	h := newHarness(t, Rule{MaxAttempts: 2, Budgets: budgets})
	bad := client.Info{Addr: ipAddr("10.0.0.1")}
	good := client.Info{Addr: ipAddr("10.0.0.2")}

	for i := range 3 {
		assert.Equal(t, min(i, 1), h.failingCall(t, bad, i == 0), "call %d of the failing client", i)
	}

	s, out := h.callAs(t, good)
	h.primary.next(t).status(http.StatusServiceUnavailable, `{"error":{"message":"overloaded"}}`)
	a := h.alt.next(t)
	a.stream(roleFrame, textFrame, doneFrame)
	a.end()
	r := wait(t, out)
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusOK, r.resp.StatusCode, "the other client's failover was not refused")
	_, err := io.ReadAll(r.resp.Body)
	require.NoError(t, err)
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
	assert.Zero(t, s.Refused())
	assert.Equal(t, 2, budgets.Clients())
}

// TestIPv6ClientCannotRotateAddresses: a client that makes each call from
// another address of its /64 still spends one bucket; the rule's
// IPv6Prefix reaches the session (128: each address a client of its own).
func TestIPv6ClientCannotRotateAddresses(t *testing.T) {
	for _, tc := range []struct {
		prefix  int
		refused []int
		clients int
	}{
		{prefix: 0, refused: []int{0, 1, 1}, clients: 1},
		{prefix: 128, refused: []int{0, 0, 0}, clients: 3},
	} {
		t.Run(fmt.Sprint(tc.prefix), func(t *testing.T) {
			budgets := hedgecore.NewClientBudgets(hedgecore.ClientBudgetConfig{MaxTokens: 4, TokenRatio: 0.1, SharedMaxTokens: 40})
			h := newHarness(t, Rule{MaxAttempts: 2, Budgets: budgets, IPv6Prefix: tc.prefix})
			var refused []int
			for i := range 3 {
				info := client.Info{Addr: ipAddr(fmt.Sprintf("2001:db8:0:7::%x", 0x1000+i))}
				refused = append(refused, h.failingCall(t, info, tc.refused[i] == 0))
			}
			assert.Equal(t, tc.refused, refused, "failovers refused, call by call")
			assert.Equal(t, tc.clients, budgets.Clients())
		})
	}
}

// TestWatchdogCutsAtTheLearnedDeadline: with stall_timeout auto, the
// committed stream's watchdog takes its deadline from what the policy
// learned, the floor below it.
func TestWatchdogCutsAtTheLearnedDeadline(t *testing.T) {
	h := newHarness(t, Rule{MaxAttempts: 1})
	h.guard = New(Settings{
		Default:   Rule{StallTimeout: AutoTimeout, AutoStall: true, MaxAttempts: 1},
		AutoStall: AutoStall{Multiple: 2, Floor: 100 * time.Millisecond, MinSamples: 5},
		Clock:     h.clock,
	})
	pol := h.guard.For("openai", "gpt-4o")
	pol.admit() // as a call that brought content does
	gaps := make([]Gap, 50)
	for i := range gaps {
		gaps[i] = Gap{Length: time.Second}
	}
	pol.ObserveGaps(h.clock.Now().UnixNano(), gaps)
	learned := pol.StallTimeout(true)
	require.InDelta(t, float64(2*time.Second), float64(learned), float64(50*time.Millisecond), "twice the p99.9 gap, above the floor")

	s, p, resp, cc := h.commit(t, textFrame)
	cc.set(h.clock.Now(), true)
	h.blockUntil(t, 1)
	h.clock.Advance(learned - 10*time.Millisecond)
	select {
	case <-p.req.Context().Done():
		t.Fatal("cut before the learned deadline")
	case <-time.After(20 * time.Millisecond):
	}
	h.blockUntil(t, 1)
	h.clock.Advance(10 * time.Millisecond)
	assert.ErrorIs(t, p.cancelled(t), errStalled, "cut at the learned deadline")
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(rest), "stream stalled")
	require.NoError(t, resp.Body.Close())
	s.Finish()
	assert.Equal(t, ErrTypeStallTimeout, s.Ended())
	assert.Equal(t, learned, s.StallTimeoutUsed(), "the deadline used is the learned one")
}

// TestClientGoneMidStreamCostsNoBudget: a client that leaves a committed
// stream (its request's context ends, and the upstream read with it) did
// not see the upstream fail: it costs neither its bucket nor the shared
// one, or clients that hang up could take failover away from everyone.
func TestClientGoneMidStreamCostsNoBudget(t *testing.T) {
	budgets := hedgecore.NewClientBudgets(hedgecore.ClientBudgetConfig{MaxTokens: 4, TokenRatio: 0.1, SharedMaxTokens: 40})
	h := newHarness(t, Rule{MaxAttempts: 2, Budgets: budgets})
	gone := client.Info{Addr: ipAddr("10.0.0.1")}
	for range 3 {
		ctx, cancel := context.WithCancel(client.NewContext(t.Context(), gone))
		in, _ := url.Parse("/v1/chat/completions")
		body := []byte(`{"model":"gpt-4o","stream":true}`)
		s := h.guard.NewSession(h.stopping, "openai", "gpt-4o", llmstream.ShapeChatCompletions, in, body, h.clock.Now().UnixNano())
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://primary.example/v1/chat/completions", strings.NewReader(string(body)))
		require.NoError(t, err)
		out := make(chan result, 1)
		go func() {
			resp, err := s.RoundTrip(req, h.primary)
			out <- result{resp, err}
		}()
		h.primary.next(t).stream(roleFrame, textFrame)
		r := wait(t, out)
		require.NoError(t, r.err)
		assert.Equal(t, roleFrame+textFrame, readN(t, r.resp.Body, len(roleFrame+textFrame)))
		cancel() // the client hangs up mid-stream
		_, err = io.ReadAll(r.resp.Body)
		require.Error(t, err)
		require.NoError(t, r.resp.Body.Close())
		s.Finish()
		assert.Empty(t, s.Ended())
	}

	s, out := h.callAs(t, gone)
	h.primary.next(t).status(http.StatusServiceUnavailable, `{"error":{"message":"overloaded"}}`)
	a := h.alt.next(t)
	a.stream(roleFrame, textFrame, doneFrame)
	a.end()
	r := wait(t, out)
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusOK, r.resp.StatusCode, "the client's failover is still allowed")
	_, _ = io.ReadAll(r.resp.Body)
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
	assert.Zero(t, s.Refused())
}

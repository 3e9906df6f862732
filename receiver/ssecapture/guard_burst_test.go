// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/streamstall/streamstall/internal/semconv"
)

// hangingUpstream accepts connections, reads each request and never
// answers; it counts the requests it read and the connections still open.
type hangingUpstream struct {
	ln       net.Listener
	requests atomic.Int64
	open     atomic.Int64
	wg       sync.WaitGroup
}

func newHangingUpstream(t *testing.T) *hangingUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	u := &hangingUpstream{ln: ln}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.open.Add(1)
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				defer u.open.Add(-1)
				defer func() { _ = c.Close() }()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				// The body may come in a write of its own, after the head:
				// read it whole, so that the wait below is for the close.
				if _, err := io.Copy(io.Discard, req.Body); err != nil {
					return
				}
				u.requests.Add(1)
				_, _ = c.Read(make([]byte, 1)) // until the proxy closes it
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); u.wg.Wait() })
	return u
}

func (u *hangingUpstream) url() string { return "http://" + u.ln.Addr().String() }

// TestBurstOfCancelledCallsLeavesNothingBehind: many clients whose calls
// hedge onto an alternate while both upstreams hang before their response
// headers, then all go away at once. Every upstream connection is closed,
// and each attempt that reached an upstream has exactly one span: two per
// call, attempts 0 and 1 of one group, none lost, none twice. (The
// package's goleak check sees that no attempt's goroutine is left.)
func TestBurstOfCancelledCallsLeavesNothingBehind(t *testing.T) {
	const calls = 20
	primary, alternate := newHangingUpstream(t), newHangingUpstream(t)
	sink := new(consumertest.TracesSink)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	pc := cfg.Proxy.GetOrInsertDefault()
	pc.NetAddr.Endpoint = "127.0.0.1:0"
	pc.Upstream.Endpoint = primary.url()
	gc := pc.Guard.GetOrInsertDefault()
	alt := confighttp.NewDefaultClientConfig()
	alt.Endpoint = alternate.url()
	gc.Hedge.Alternates = []AlternateConfig{{ClientConfig: alt}}
	gc.Hedge.Delay = AutoDuration(20 * time.Millisecond)
	require.NoError(t, cfg.Validate())
	rcv := startReceiver(t, cfg, sink, componenttest.NewNopHost(), tel)
	proxyURL := "http://" + rcv.addrs["proxy"].String()

	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxyURL+"/v1/chat/completions", strings.NewReader(body))
			if !assert.NoError(t, err) {
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				_ = resp.Body.Close()
				t.Errorf("a call was answered: %d", resp.StatusCode)
			}
		})
	}
	require.Eventually(t, func() bool {
		return primary.requests.Load() == calls && alternate.requests.Load() == calls
	}, 20*time.Second, 10*time.Millisecond, "every call reached both upstreams")
	cancel()
	wg.Wait()

	require.Eventually(t, func() bool { return primary.open.Load() == 0 && alternate.open.Load() == 0 },
		20*time.Second, 10*time.Millisecond, "every upstream connection is closed")
	spans := (&fixture{sink: sink}).spans(t, 2*calls)
	groups := map[string][]int64{}
	ids := map[string]bool{}
	for _, s := range spans {
		g := attr(t, s, semconv.AttrHedgeGroupID).Str()
		groups[g] = append(groups[g], attr(t, s, semconv.AttrHedgeAttempt).Int())
		assert.False(t, ids[s.SpanID().String()], "one span per attempt")
		ids[s.SpanID().String()] = true
	}
	assert.Len(t, groups, calls)
	for g, attempts := range groups {
		assert.ElementsMatch(t, []int64{0, 1}, attempts, "group %s", g)
	}
	assert.Equal(t, int64(calls), primary.requests.Load(), "no attempt was sent twice")
	assert.Equal(t, int64(calls), alternate.requests.Load())
	time.Sleep(100 * time.Millisecond) // a late duplicate would show here
	assert.Equal(t, 2*calls, sink.SpanCount())
}

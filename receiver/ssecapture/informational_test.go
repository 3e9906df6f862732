// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer/consumertest"
)

const earlyHints = "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nX-Hint-Secret: h1nt\r\n\r\n"

// TestProxyRelaysNoInformationalResponses: the upstream's 1xx responses
// (103 Early Hints, an unasked 100 Continue) never reach the client, nor
// their headers; the client's Expect: 100-continue is answered by the
// proxy alone (one 100 Continue) and not sent upstream. httputil's
// ReverseProxy relays them from the Transport's goroutine, which under the
// guard relayed every attempt's, a dropped attempt's included.
func TestProxyRelaysNoInformationalResponses(t *testing.T) {
	up := newRawUpstream(t,
		rawStep{data: earlyHints + "HTTP/1.1 100 Continue\r\n\r\n"},
		rawStep{after: 5 * time.Millisecond, data: earlyHints + sseHeadClose + chatEvent + doneEvent})
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = up.URL }))
	addr := f.rcv.addrs["proxy"].String()

	got := rawExchange(t, addr, rawChat(""))
	status, body := readResponses(got)
	assert.Equal(t, []string{"200 OK"}, status, "only the final response: %q", got)
	assert.NotContains(t, got, "h1nt")
	assert.Equal(t, chatEvent+doneEvent, body, "the stream is whole")

	got = rawExchange(t, addr, rawChat("Expect: 100-continue\r\n"))
	status, body = readResponses(got)
	assert.Equal(t, []string{"100 Continue", "200 OK"}, status, "the proxy's own 100 Continue and the response: %q", got)
	assert.Equal(t, chatEvent+doneEvent, body)
	reqs := up.requests()
	require.Len(t, reqs, 2)
	for _, r := range reqs {
		assert.NotContains(t, strings.ToLower(r), "expect:", "the upstream gets the body whole, without Expect")
	}
	spans := f.spans(t, 2)
	for _, s := range spans {
		assert.Len(t, chunkTimes(s), 1)
		_, failed := s.Attributes().Get("error.type")
		assert.False(t, failed)
	}
}

// TestGuardRelaysNoInformationalResponses: under the guard, neither the
// dropped attempt's nor the winner's 1xx responses reach the client, which
// gets the winner's stream alone.
func TestGuardRelaysNoInformationalResponses(t *testing.T) {
	slow := newRawUpstream(t,
		rawStep{data: earlyHints},
		rawStep{after: 60 * time.Millisecond, data: earlyHints},
		rawStep{after: 2 * time.Second, data: sseHeadClose + chatEvent + doneEvent})
	fast := newRawUpstream(t,
		rawStep{data: earlyHints},
		rawStep{after: 10 * time.Millisecond, data: sseHeadClose + chatEvent + doneEvent})
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	pc := cfg.Proxy.GetOrInsertDefault()
	pc.NetAddr.Endpoint = "127.0.0.1:0"
	pc.Upstream.Endpoint = slow.URL
	gc := pc.Guard.GetOrInsertDefault()
	alt := confighttp.NewDefaultClientConfig()
	alt.Endpoint = fast.URL
	gc.Hedge.Alternates = []AlternateConfig{{ClientConfig: alt}}
	gc.Hedge.Delay = AutoDuration(50 * time.Millisecond)
	require.NoError(t, cfg.Validate())
	sink := new(consumertest.TracesSink)
	rcv := startReceiver(t, cfg, sink, componenttest.NewNopHost(), nil)

	got := rawExchange(t, rcv.addrs["proxy"].String(), rawChat(""))
	status, body := readResponses(got)
	assert.Equal(t, []string{"200 OK"}, status, "only the winner's final response: %q", got)
	assert.NotContains(t, got, "h1nt")
	assert.Equal(t, chatEvent+doneEvent, body, "the winner's stream is whole")
	assert.Len(t, fast.requests(), 1, "the hedge went to the alternate")
}

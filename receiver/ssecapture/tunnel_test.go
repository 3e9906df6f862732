// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProxyRefusesTunnels: CONNECT, TRACE, TRACK and HTTP/2's preface sent
// as HTTP/1 get 405 with a JSON error and never reach the upstream (it got
// "CONNECT /" and "TRACE", which a forward proxy would tunnel and a server
// echo with the upstream's configured credential).
func TestProxyRefusesTunnels(t *testing.T) {
	up := newRawUpstream(t, rawStep{data: sseHeadClose + chatEvent + doneEvent})
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = up.URL }))
	addr := f.rcv.addrs["proxy"].String()
	for name, request := range map[string]string{
		"CONNECT": "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\nConnection: close\r\n\r\n",
		"TRACE":   "TRACE /v1/models HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n\r\n",
		"TRACK":   "TRACK /v1/models HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n\r\n",
		"PRI":     "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			got := rawExchange(t, addr, request)
			status, body := readResponses(got)
			require.Equal(t, []string{"405 Method Not Allowed"}, status, got)
			assert.Contains(t, body, `"type":"method_not_allowed"`)
		})
	}
	assert.Empty(t, up.requests(), "nothing reached the upstream")
}

// TestProxyRefusesMethodOverrides: a method override header (Google's front
// ends, OData and many web frameworks honour them) naming a tunnel method
// gets 405 on any path, and one on an API call naming another method than
// the request line's gets 400: the upstream would run a method the proxy
// did not judge the call by (a TRACE echoing the upstream's credential, a
// guarded, hedged "POST" that is a GET or DELETE upstream). Neither reaches
// the upstream; an override naming the request's own method does.
func TestProxyRefusesMethodOverrides(t *testing.T) {
	up := newRawUpstream(t, rawStep{data: sseHeadClose + chatEvent + doneEvent})
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
		p.Upstream.Endpoint = up.URL
		p.Guard.GetOrInsertDefault()
	}))
	addr := f.rcv.addrs["proxy"].String()
	for name, tt := range map[string]struct{ request, status, errType string }{
		"TRACE on a model list": {
			"GET /v1/models HTTP/1.1\r\nHost: proxy\r\nX-HTTP-Method-Override: TRACE\r\nConnection: close\r\n\r\n",
			"405 Method Not Allowed", "method_not_allowed",
		},
		"track, in X-HTTP-Method":       {rawChat("X-HTTP-Method: track\r\n"), "405 Method Not Allowed", "method_not_allowed"},
		"CONNECT after GET in one list": {rawChat("X-Method-Override: GET, CONNECT\r\n"), "405 Method Not Allowed", "method_not_allowed"},
		"GET on a chat call":            {rawChat("X-HTTP-Method-Override: GET\r\n"), "400 Bad Request", "bad_request"},
		"DELETE on a chat call":         {rawChat("X-Http-Method-Override: delete\r\n"), "400 Bad Request", "bad_request"},
	} {
		t.Run(name, func(t *testing.T) {
			got := rawExchange(t, addr, tt.request)
			status, body := readResponses(got)
			require.Equal(t, []string{tt.status}, status, got)
			assert.Contains(t, body, `"type":"`+tt.errType+`"`)
		})
	}
	assert.Empty(t, up.requests(), "nothing reached the upstream")

	got := rawExchange(t, addr, rawChat("X-HTTP-Method-Override: POST\r\n"))
	status, _ := readResponses(got)
	assert.Equal(t, []string{"200 OK"}, status, got)
	assert.Len(t, up.requests(), 1, "an override naming the request's own method is forwarded")
}

// TestProxyNeverSwitchesProtocols: a request asking to upgrade (websocket,
// h2c) goes upstream as a plain request (TestProxyDropsHopByHopHeaders),
// and an upstream that answers 101 anyway gets the client a 502: no byte of
// a tunnel reaches the client, which ReverseProxy would otherwise copy both
// ways outside every bound of the proxy.
func TestProxyNeverSwitchesProtocols(t *testing.T) {
	for name, answer := range map[string]string{
		"websocket":      "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nTUNNEL-BYTES",
		"no upgrade":     "HTTP/1.1 101 Switching Protocols\r\n\r\nTUNNEL-BYTES",
		"h2c":            "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\nTUNNEL-BYTES",
		"after 103 hint": "HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nTUNNEL-BYTES",
	} {
		t.Run(name, func(t *testing.T) {
			up := newRawUpstream(t, rawStep{data: answer})
			f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = up.URL }))
			addr := f.rcv.addrs["proxy"].String()
			for _, request := range []string{
				rawChat("Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"),
				"GET /v1/realtime HTTP/1.1\r\nHost: proxy\r\nConnection: Upgrade, close\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
			} {
				got := rawExchange(t, addr, request)
				status, _ := readResponses(got)
				assert.Equal(t, []string{"502 Bad Gateway"}, status, got)
				assert.NotContains(t, got, "TUNNEL-BYTES")
			}
			for _, head := range up.requests() {
				assert.NotContains(t, strings.ToLower(head), "upgrade", "the upstream was never asked to switch")
			}
			span := f.spans(t, 1)[0]
			assert.Equal(t, int64(http.StatusBadGateway), attr(t, span, "http.response.status_code").Int())
		})
	}
}

// TestProxyClosesAnUpstreamThatSwitchedProtocols: the connection of an
// upstream that answered 101 and holds it open is closed by the proxy with
// the 502, guarded or not: ReverseProxy's refusal of the switch left it
// open (its body, the raw connection, was never closed), one descriptor a
// call for as long as the upstream liked.
func TestProxyClosesAnUpstreamThatSwitchedProtocols(t *testing.T) {
	for _, guarded := range []bool{false, true} {
		t.Run(fmt.Sprintf("guarded=%v", guarded), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer func() { _ = ln.Close() }()
			closed := make(chan error, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					closed <- err
					return
				}
				defer func() { _ = c.Close() }()
				_ = c.SetDeadline(time.Now().Add(testTimeout))
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					closed <- err
					return
				}
				_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nTUNNEL-BYTES")
				_, err = io.Copy(io.Discard, br) // until the proxy closes the connection
				closed <- err
			}()
			f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
				p.Upstream.Endpoint = "http://" + ln.Addr().String()
				if guarded {
					p.Guard.GetOrInsertDefault()
				}
			}))
			got := rawExchange(t, f.rcv.addrs["proxy"].String(), rawChat(""))
			status, _ := readResponses(got)
			assert.Equal(t, []string{"502 Bad Gateway"}, status, got)
			select {
			case err := <-closed:
				require.NoError(t, err, "the proxy closed the upstream's connection")
			case <-time.After(testTimeout):
				t.Fatal("the upstream's connection is still open")
			}
		})
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/semconv"
)

// TestProxyUpstreamResponseHeaders: what an upstream puts in its response
// head and trailers reaches the client as HTTP allows (its Connection:
// close stays at the proxy, its trailers go on) and never the span; a
// header block past net/http's 10 MiB bound for a response gets the client
// a 502, without the block.
func TestProxyUpstreamResponseHeaders(t *testing.T) {
	trailer := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\nTrailer: X-Upstream-Token\r\n\r\n" +
		fmt.Sprintf("%x\r\n%s\r\n", len(chatEvent+doneEvent), chatEvent+doneEvent) + "0\r\nX-Upstream-Token: " + clearSecret + "\r\n\r\n"
	huge := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n" +
		strings.Repeat("X-Filler: "+strings.Repeat("f", 1000)+"\r\n", 11<<10) + "\r\n" + chatEvent + doneEvent
	for _, tc := range []struct {
		name, answer string
		status       int
	}{
		{"trailers and Connection", trailer, http.StatusOK},
		{"11 MiB of headers", huge, http.StatusBadGateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newRawUpstream(t, rawStep{data: tc.answer})
			f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = up.URL }))
			resp, body := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, nil)
			require.Equal(t, tc.status, resp.StatusCode, string(body))
			span := f.spans(t, 1)[0]
			assertNoSecrets(t, span, "", clearSecret, strings.Repeat("f", 100))
			if tc.status != http.StatusOK {
				assert.Empty(t, resp.Header.Values("X-Filler"))
				assert.Equal(t, "upstream_unreachable", attr(t, span, semconv.AttrErrorType).Str())
				return
			}
			assert.Equal(t, chatEvent+doneEvent, string(body))
			assert.Equal(t, clearSecret, resp.Trailer.Get("X-Upstream-Token"), "the upstream's trailer is the client's")
			assert.False(t, resp.Close, "the upstream's Connection: close is not the client's")
			assert.Len(t, chunkTimes(span), 1)
		})
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

// endlessChat streams chat chunks of about 1 KiB until its request ends,
// and counts the requests that ended.
type endlessChat struct{ ended atomic.Int64 }

func (u *endlessChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer u.ended.Add(1)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	chunk := fmt.Sprintf("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", strings.Repeat("x", 1000))
	rc := http.NewResponseController(w)
	for r.Context().Err() == nil {
		if _, err := io.WriteString(w, chunk); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// TestSendTimeoutEndsAClientThatStopsReading: a client that sends its
// request and never reads the stream is cut once a write has waited
// send_timeout for it, and the upstream request ends with it; the span says
// send_timeout. Without the bound the stream (its upstream connection,
// goroutines and buffers) would live as long as the client stays connected.
func TestSendTimeoutEndsAClientThatStopsReading(t *testing.T) {
	for _, guarded := range []bool{false, true} {
		t.Run(map[bool]string{false: "unguarded", true: "guarded"}[guarded], func(t *testing.T) {
			up := &endlessChat{}
			upstream := httptest.NewServer(up)
			t.Cleanup(upstream.Close)
			const timeout = 300 * time.Millisecond
			f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
				p.Upstream.Endpoint = upstream.URL
				p.SendTimeout = timeout
				if guarded {
					// The watchdog never cuts a stream whose write waits for
					// its client: send_timeout does.
					p.Guard.GetOrInsertDefault().StallTimeout = AutoDuration(100 * time.Millisecond)
				}
			}))

			conn, err := net.Dial("tcp", strings.TrimPrefix(f.proxyURL, "http://"))
			require.NoError(t, err)
			defer func() { _ = conn.Close() }()
			require.NoError(t, conn.(*net.TCPConn).SetReadBuffer(4096)) // the window shuts sooner
			body := shapes[0].body
			_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", shapes[0].path, len(body), body)
			require.NoError(t, err)
			start := time.Now()

			span := f.spans(t, 1)[0] // waits up to 10 s
			took := time.Since(start)
			assert.Equal(t, "send_timeout", attr(t, span, semconv.AttrErrorType).Str())
			assert.Greater(t, took, timeout, "no write may be cut before send_timeout")
			assert.NotEmpty(t, chunkTimes(span), "the chunks before the cut are kept")
			assert.Equal(t, map[string]int64{"send_timeout": 1}, cutsByReason(t, f.tel), "the cut is counted")
			require.Eventually(t, func() bool { return up.ended.Load() == 1 }, 5*time.Second, 10*time.Millisecond,
				"the upstream request ends with the response")
		})
	}
}

// TestSendTimeoutSparesStalledStreams: the bound runs only while a write
// waits for the client: a stream that stalls for several times send_timeout
// reaches a reading client whole, with no error.
func TestSendTimeoutSparesStalledStreams(t *testing.T) {
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.SendTimeout = 200 * time.Millisecond }))
	resp, body := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body,
		scriptHeader(t, fakellm.Script{TTFTMillis: 5, GapsMillis: []float64{700, 700}}))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, sentWhole(t, f.fake), body)
	span := f.spans(t, 1)[0]
	_, failed := span.Attributes().Get(semconv.AttrErrorType)
	assert.False(t, failed, "a stall is no send timeout")
	assert.Len(t, chunkTimes(span), 3)
}

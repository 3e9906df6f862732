// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// TestProxyHostileUpstreamBodies: whatever framing an upstream's body has,
// the client gets its bytes as the upstream's HTTP framing delivers them,
// nothing panics, and the span says how the stream ended: a body shorter
// than its Content-Length is cut for the client (its read fails) and
// truncated unless its terminal frame came; one longer than it ends at
// the length; NUL bytes and CR-only line ends are read as the SSE
// specification says; an event the body ends in the middle of is not
// counted.
func TestProxyHostileUpstreamBodies(t *testing.T) {
	const cr = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r\rdata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\r\rdata: [DONE]\r\r"
	const nul = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"\x00\"}}]}\n\n\x00data: [DONE]\n\n"
	line := "data: " + strings.Repeat("x", 12<<20) // past the 8 MiB frame cap, never ended
	for _, tc := range []struct {
		name     string
		head     string // response head after the status line, before the blank line
		body     string
		want     string // what the client reads; "" is the body
		cut      bool   // the client's read ends in an error
		chunks   int
		errType  string
		oversize int64
	}{
		{name: "longer Content-Length, terminal frame", head: "Content-Length: 1000\r\n", body: chatEvent + doneEvent, cut: true, chunks: 1},
		{name: "longer Content-Length, no terminal frame", head: "Content-Length: 1000\r\n", body: chatEvent + chatEvent, cut: true, chunks: 2, errType: "stream_truncated"},
		{name: "shorter Content-Length", head: "Content-Length: 70\r\n", body: chatEvent + chatEvent + doneEvent, want: (chatEvent + chatEvent)[:70], chunks: 1, errType: "stream_truncated"},
		{name: "CR-only line ends", body: cr, chunks: 2},
		{name: "NUL bytes", body: nul, chunks: 1, errType: "stream_truncated"},
		{name: "ends mid-event", body: chatEvent + "data: {\"choi", chunks: 1, errType: "stream_truncated"},
		{name: "12 MiB line without a newline", body: chatEvent + line, chunks: 1, errType: "stream_truncated", oversize: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newRawUpstream(t, rawStep{data: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n" + tc.head + "\r\n" + tc.body})
			f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = up.URL }))
			got, err := postChat(t, f)
			if tc.cut {
				require.Error(t, err, "the client sees the body cut")
			} else {
				require.NoError(t, err)
			}
			want := tc.want
			if want == "" {
				want = tc.body
			}
			require.Len(t, got, len(want))
			assert.Equal(t, want, string(got), "the client gets the bytes as delivered")

			span := f.spans(t, 1)[0]
			assert.Len(t, chunkTimes(span), tc.chunks)
			et, ok := span.Attributes().Get(semconv.AttrErrorType)
			if tc.errType == "" {
				assert.False(t, ok, "the stream completed: %v", span.Attributes().AsRaw())
			} else {
				require.True(t, ok)
				assert.Equal(t, tc.errType, et.Str())
			}
			if tc.oversize > 0 {
				assert.Equal(t, tc.oversize, attr(t, span, semconv.AttrOversizedFrames).Int(), fmt.Sprint(span.Attributes().AsRaw()))
			}
		})
	}
}

// TestGoLogsBytesPastAnUpstreamBody pins the one line outside our code
// that can hold completion text (docs/security.md, Credentials and text):
// bytes a broken upstream sends past its Content-Length on a kept-alive
// connection are written by Go's HTTP client to the standard logger. The
// client still gets the body as framed and the span is whole. Should Go
// stop writing it, this test fails and the sentence goes.
func TestGoLogsBytesPastAnUpstreamBody(t *testing.T) {
	logs := &harness.LockedBuffer{}
	saved := log.Writer()
	log.SetOutput(logs)
	t.Cleanup(func() { log.SetOutput(saved) })

	body := chatEvent + doneEvent
	const extra = "data: words of the answer\n\n"
	up := newRawUpstream(t, rawStep{data: fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s%s", len(body), body, extra)})
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = up.URL }))
	got, err := postChat(t, f)
	require.NoError(t, err)
	assert.Equal(t, body, string(got), "the client gets the body as framed")
	span := f.spans(t, 1)[0]
	assert.Len(t, chunkTimes(span), 1)
	_, failed := span.Attributes().Get(semconv.AttrErrorType)
	assert.False(t, failed, "the stream completed: %v", span.Attributes().AsRaw())
	assert.Eventually(t, func() bool {
		return strings.Contains(logs.String(), fmt.Sprintf("Unsolicited response received on idle HTTP channel starting with %q", extra))
	}, testTimeout, 10*time.Millisecond, "Go's log: %q", logs.String())
}

// postChat posts the first shape's chat request through the proxy and
// returns what the client read of the answer, and how its read ended.
func postChat(t *testing.T, f *fixture) ([]byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, f.proxyURL+shapes[0].path, strings.NewReader(shapes[0].body))
	require.NoError(t, err)
	resp, err := testClient(t).Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	return io.ReadAll(resp.Body)
}

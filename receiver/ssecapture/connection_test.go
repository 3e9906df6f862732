// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/semconv"
)

// TestProxyConnectionNamingEndToEndHeaders: a client whose Connection
// header names its own end-to-end headers (credentials, Content-Type,
// Content-Length, traceparent, baggage, Accept-Encoding) makes the proxy
// strip them from what it forwards, as RFC 9110 asks, and nothing else:
// the body still goes with its own length, the span still joins the
// client's trace with its hedge baggage and counts every chunk, and the
// upstream still gets a traceparent naming the span and the codings the
// proxy can read.
func TestProxyConnectionNamingEndToEndHeaders(t *testing.T) {
	f := newFixture(t, nil)
	addr := strings.TrimPrefix(f.proxyURL, "http://")
	const inTrace, inSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	status, body := rawRequestWith(t, addr, shapes[0].path,
		"Connection: x-api-key, authorization, content-type, content-length, traceparent, baggage, accept-encoding, keep-alive\r\n"+
			"X-Api-Key: sk-ant-client\r\nAuthorization: Bearer sk-client\r\n"+
			"Traceparent: 00-"+inTrace+"-"+inSpan+"-01\r\nBaggage: llm.hedge.group_id=g-7,llm.hedge.attempt=1\r\n"+
			"Accept-Encoding: gzip\r\n", shapes[0].body)
	require.Equal(t, http.StatusOK, status, body)

	up, _ := f.log.last(t)
	for _, h := range []string{"X-Api-Key", "Authorization", "Content-Type", "Baggage"} {
		assert.Empty(t, up.Values(h), "%s, named by Connection, is not forwarded", h)
	}
	rec := f.waitRequest(t, 0)
	assert.Equal(t, sentWhole(t, f.fake), []byte(body), "the client gets the stream")
	span := f.spans(t, 1)[0]
	assert.Equal(t, inTrace, span.TraceID().String())
	assert.Equal(t, inSpan, span.ParentSpanID().String())
	assert.Equal(t, "00-"+inTrace+"-"+span.SpanID().String()+"-01", up.Get("Traceparent"), "the proxy's own traceparent goes on")
	assert.Equal(t, "g-7", attr(t, span, semconv.AttrHedgeGroupID).Str())
	assert.Equal(t, "gzip", up.Get("Accept-Encoding"), "the codings the proxy decodes, from the client's")
	assert.Equal(t, "gpt-4o", attr(t, span, semconv.AttrRequestModel).Str())
	assert.Len(t, chunkTimes(span), rec.Chunks(), "every chunk counted")
	_, failed := span.Attributes().Get(semconv.AttrErrorType)
	assert.False(t, failed)
}

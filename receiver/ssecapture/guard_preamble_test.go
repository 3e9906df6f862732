// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/streamstall/streamstall/internal/semconv"
)

// TestLongPreambleStillEndsAtTTFTTimeout: a Responses stream whose
// response.created and response.in_progress echo 600 KB instructions
// passes the guard's 1 MiB pre-content bound and is committed before any
// content. With ttft_timeout and no stall timeout, it is still given up
// when no content came within ttft_timeout: the client gets the
// Responses error event after the preamble, the upstream request is
// closed, and the span says ttft_timeout.
func TestLongPreambleStillEndsAtTTFTTimeout(t *testing.T) {
	instructions := strings.Repeat("x", 600<<10)
	preamble := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\",\"instructions\":\"" + instructions + "\"}}\n\n" +
		"event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"response\":{\"id\":\"r1\",\"instructions\":\"" + instructions + "\"}}\n\n"
	closed := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, preamble)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			close(closed)
		case <-time.After(30 * time.Second):
		}
	}))
	t.Cleanup(up.Close)
	sink := new(consumertest.TracesSink)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	pc := cfg.Proxy.GetOrInsertDefault()
	pc.NetAddr.Endpoint = "127.0.0.1:0"
	pc.Upstream.Endpoint = up.URL
	pc.Guard.GetOrInsertDefault().TTFTTimeout = 500 * time.Millisecond
	require.NoError(t, cfg.Validate())
	rcv := startReceiver(t, cfg, sink, componenttest.NewNopHost(), tel)

	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost,
		"http://"+rcv.addrs["proxy"].String()+"/v1/responses", strings.NewReader(`{"model":"gpt-4o","stream":true,"input":"hi"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "a clean end of the response")
	require.NoError(t, resp.Body.Close())
	assert.Less(t, time.Since(start), 20*time.Second, "not the upstream's 30 s")
	assert.True(t, strings.HasPrefix(string(got), preamble), "the preamble first, byte for byte")
	assert.Contains(t, string(got)[len(preamble):], "event: error")
	assert.Contains(t, string(got)[len(preamble):], `"ttft_timeout"`)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream request was not closed")
	}
	span := (&fixture{sink: sink}).spans(t, 1)[0]
	assert.Equal(t, "ttft_timeout", attr(t, span, semconv.AttrErrorType).Str())
	assert.Empty(t, chunkTimes(span))
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/streamstall/streamstall/internal/testbed/fakellm"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadatatest"
)

// openStreams starts n streams through base that stall after their first
// chunks, and returns once each client has its first chunk; release lets
// them end.
func openStreams(t *testing.T, base string, n int) (release func()) {
	t.Helper()
	return openStreamsOf(t, base, n, shapes[0].body)
}

// openStreamsOf is openStreams with the request body given.
func openStreamsOf(t *testing.T, base string, n int, body string) (release func()) {
	t.Helper()
	hdr := scriptHeader(t, fakellm.Script{TTFTMillis: 5, GapsMillis: []float64{5, 1500}})
	client := testClient(t)
	var wg sync.WaitGroup
	started := make(chan error, n)
	bodies := make(chan io.ReadCloser, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, base+shapes[0].path, strings.NewReader(body))
			if err != nil {
				started <- err
				return
			}
			req.Header.Set("Content-Type", "application/json")
			for k, v := range hdr {
				req.Header[k] = v
			}
			resp, err := client.Do(req)
			if err != nil {
				started <- err
				return
			}
			_, err = bufio.NewReader(resp.Body).ReadString('\n') // the first chunk's line
			bodies <- resp.Body
			started <- err
		}()
	}
	for range n {
		require.NoError(t, <-started)
	}
	return func() {
		wg.Wait()
		close(bodies)
		for b := range bodies {
			_, _ = io.Copy(io.Discard, b)
			_ = b.Close()
		}
	}
}

// TestMaxConcurrentRequestsSheds: past max_concurrent_requests a request
// is answered 503 with Retry-After and a JSON error, is not forwarded and
// makes no span; the shed requests are counted and the requests in flight
// gauged; once the streams in flight end, requests are served again.
func TestMaxConcurrentRequestsSheds(t *testing.T) {
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.MaxConcurrentRequests = 2 }))
	release := openStreams(t, f.proxyURL, 2)
	forwarded := f.log.count()

	resp, body := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, nil)
	assertRefused(t, resp, body, http.StatusServiceUnavailable, "overloaded", "max_concurrent_requests")
	assert.Equal(t, forwarded, f.log.count(), "a shed request is not forwarded")
	metadatatest.AssertEqualReceiverSseCaptureRequestsShed(t, f.tel, []metricdata.DataPoint[int64]{{Value: 1}},
		metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	metadatatest.AssertEqualReceiverSseCaptureRequestsInFlight(t, f.tel, []metricdata.DataPoint[int64]{{Value: 2}},
		metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())

	release()
	assert.Len(t, f.spans(t, 2), 2, "the two streams in flight, and no span for the shed request")
	require.Eventually(t, func() bool { return f.rcv.proxy.InFlight() == 0 }, 5*time.Second, time.Millisecond)
	metadatatest.AssertEqualReceiverSseCaptureRequestsInFlight(t, f.tel, []metricdata.DataPoint[int64]{{Value: 0}},
		metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	resp, body = post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	f.waitRequest(t, 2)
	assert.Equal(t, f.fake.Sent(2), body)
}

// TestOpenStreamMemory reports what an open stream holds of the proxy's
// memory (the heap and goroutine stacks of the whole test process with the
// streams held open through the proxy, minus the same streams held open
// directly against fakellm): the figure behind max_concurrent_requests'
// default. Its bound is loose; the figure is in the log (-v).
func TestOpenStreamMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 2 x 500 streams")
	}
	const n = 500
	f := newFixture(t, nil)
	held := func(base string) float64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.HeapInuse + ms.StackInuse
		release := openStreams(t, base, n)
		runtime.GC()
		runtime.ReadMemStats(&ms)
		after := ms.HeapInuse + ms.StackInuse
		release()
		return (float64(after) - float64(before)) / n
	}
	direct := held(f.upstream.URL)
	proxied := held(f.proxyURL)
	perStream := (proxied - direct) / 1024
	t.Logf("an open stream holds %.0f KiB of the proxy's heap and stacks (%.0f KiB proxied, %.0f KiB direct, per stream)",
		perStream, proxied/1024, direct/1024)
	assert.Less(t, perStream, 256.0, "defaultMaxConcurrentRequests assumes about 100 KiB an open stream")
}

// TestMaxConcurrentRequestsPerClient: past max_concurrent_requests_per_client
// a client's request is answered 429 with Retry-After and a JSON error, is
// not forwarded, makes no span and is counted; another client (another
// address) is served meanwhile, and once the first client's streams end it
// is served again.
func TestMaxConcurrentRequestsPerClient(t *testing.T) {
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.MaxConcurrentRequestsPerClient = 2 }))
	release := openStreams(t, f.proxyURL, 2)
	forwarded := f.log.count()

	resp, body := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, nil)
	assertRefused(t, resp, body, http.StatusTooManyRequests, "too_many_requests", "max_concurrent_requests_per_client")
	assert.Equal(t, forwarded, f.log.count(), "a limited request is not forwarded")
	metadatatest.AssertEqualReceiverSseCaptureRequestsLimited(t, f.tel, []metricdata.DataPoint[int64]{{Value: 1}},
		metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())

	// Another client, from another loopback address, keeps its own slots.
	other := clientFrom("127.0.0.2")
	t.Cleanup(other.CloseIdleConnections)
	resp, _ = post(t, other, f.proxyURL+shapes[0].path, shapes[0].body, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "another client is served")

	release()
	assert.Len(t, f.spans(t, 3), 3, "the three streams served, and no span for the limited request")
	require.Eventually(t, func() bool { return f.rcv.proxy.InFlight() == 0 }, 5*time.Second, time.Millisecond)
	resp, _ = post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "served again once its streams ended")
}

// assertRefused checks a request the proxy refused before forwarding it:
// its status, Retry-After: 1, and a JSON error of type typ that names the
// limit.
func assertRefused(t *testing.T, resp *http.Response, body []byte, status int, typ, limit string) {
	t.Helper()
	assert.Equal(t, status, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	var e struct {
		Error struct{ Type, Message string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body, &e), "%s", body)
	assert.Equal(t, typ, e.Error.Type)
	assert.Contains(t, e.Error.Message, limit)
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

// fastFactor runs fakellm's named profiles 1000x faster: a 55 s stall lasts about 55 ms.
const fastFactor = 0.001

// upstreamLog wraps fakellm and records the request headers it saw, so
// tests can check what the proxy forwarded.
type upstreamLog struct {
	next    http.Handler
	mu      sync.Mutex
	headers []http.Header
	hosts   []string
	uris    []string // each request's target as the upstream got it
	// respHeaders are added to every response, before fakellm writes.
	respHeaders http.Header
}

func (u *upstreamLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.headers = append(u.headers, r.Header.Clone())
	u.hosts = append(u.hosts, r.Host)
	u.uris = append(u.uris, r.RequestURI)
	u.mu.Unlock()
	for k, vs := range u.respHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	u.next.ServeHTTP(w, r)
}

func (u *upstreamLog) last(t *testing.T) (http.Header, string) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	require.NotEmpty(t, u.headers, "the upstream saw no request")
	return u.headers[len(u.headers)-1], u.hosts[len(u.hosts)-1]
}

func (u *upstreamLog) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.headers)
}

type fixture struct {
	fake     *fakellm.Server
	upstream *httptest.Server
	log      *upstreamLog
	rcv      *sseCaptureReceiver
	sink     *consumertest.TracesSink
	proxyURL string
	tel      *componenttest.Telemetry
}

type fixtureOption func(*Config, *fakellm.Config)

func withProxy(f func(*ProxyConfig)) fixtureOption {
	return func(c *Config, _ *fakellm.Config) { f(c.Proxy.Get()) }
}

// newFixture serves fakellm on loopback and an sse_capture proxy in front of
// it, delivering spans to a sink (or to next, when given).
func newFixture(t *testing.T, next consumer.Traces, opts ...fixtureOption) *fixture {
	t.Helper()
	fcfg := fakellm.Config{TimeFactor: fastFactor, Chunks: 12, Seed: 7}
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.Proxy.GetOrInsertDefault().NetAddr.Endpoint = "127.0.0.1:0"
	for _, o := range opts {
		o(cfg, &fcfg)
	}
	fake, err := fakellm.New(fcfg)
	require.NoError(t, err)
	f := &fixture{fake: fake, log: &upstreamLog{next: fake}, sink: new(consumertest.TracesSink), tel: componenttest.NewTelemetry()}
	t.Cleanup(func() { require.NoError(t, f.tel.Shutdown(context.Background())) })
	f.upstream = httptest.NewServer(f.log)
	t.Cleanup(f.upstream.Close)
	if cfg.Proxy.Get().Upstream.Endpoint == "" {
		cfg.Proxy.Get().Upstream.Endpoint = f.upstream.URL
	}
	require.NoError(t, cfg.Validate())
	if next == nil {
		next = f.sink
	}
	f.rcv = startReceiver(t, cfg, next, componenttest.NewNopHost(), f.tel)
	f.proxyURL = "http://" + f.rcv.addrs["proxy"].String()
	return f
}

func startReceiver(tb testing.TB, cfg *Config, next consumer.Traces, host component.Host, tel *componenttest.Telemetry) *sseCaptureReceiver {
	tb.Helper()
	set := receivertest.NewNopSettings(metadata.Type)
	if tel != nil {
		set.TelemetrySettings = tel.NewTelemetrySettings()
	}
	r, err := NewFactory().CreateTraces(context.Background(), set, cfg, next)
	require.NoError(tb, err)
	rcv := r.(*sseCaptureReceiver)
	require.NoError(tb, rcv.Start(context.Background(), host))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(tb, rcv.Shutdown(ctx))
	})
	return rcv
}

var _ receiver.Traces = (*sseCaptureReceiver)(nil)

// testClient has its own transport so that no idle connection outlives the test.
func testClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

const testTimeout = 20 * time.Second

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// post sends a JSON body to the proxy and returns the response, body read.
func post(t *testing.T, client *http.Client, url, body string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	got, _ := io.ReadAll(resp.Body)
	return resp, got
}

// spans waits for n spans and returns them.
func (f *fixture) spans(t *testing.T, n int) []ptrace.Span {
	t.Helper()
	require.Eventually(t, func() bool { return f.sink.SpanCount() >= n }, 10*time.Second, 5*time.Millisecond)
	var out []ptrace.Span
	for _, td := range f.sink.AllTraces() {
		rss := td.ResourceSpans()
		for i := range rss.Len() {
			sss := rss.At(i).ScopeSpans()
			for j := range sss.Len() {
				spans := sss.At(j).Spans()
				for k := range spans.Len() {
					out = append(out, spans.At(k))
				}
			}
		}
	}
	require.Len(t, out, n)
	return out
}

// waitRequest waits until fakellm finished request seq and returns its record.
func (f *fixture) waitRequest(t *testing.T, seq int) fakellm.Request {
	t.Helper()
	reqs, err := f.fake.WaitFor(testContext(t), seq+1)
	require.NoError(t, err)
	return reqs[seq]
}

func chunkTimes(span ptrace.Span) []int64 {
	var out []int64
	for i := range span.Events().Len() {
		if ev := span.Events().At(i); ev.Name() == semconv.EventChunk {
			out = append(out, int64(ev.Timestamp()))
		}
	}
	return out
}

func eventCount(span ptrace.Span, name string) int {
	n := 0
	for i := range span.Events().Len() {
		if span.Events().At(i).Name() == name {
			n++
		}
	}
	return n
}

func attr(t *testing.T, span ptrace.Span, key string) pcommon.Value {
	t.Helper()
	v, ok := span.Attributes().Get(key)
	require.True(t, ok, "attribute %s missing", key)
	return v
}

// deriveUpstream computes the figures of what fakellm sent, relative to the
// span's start, for comparison with the figures of the span.
func deriveUpstream(span ptrace.Span, rec fakellm.Request, threshold time.Duration) figures.Figures {
	ts := make([]int64, len(rec.ChunkTimes))
	for i, c := range rec.ChunkTimes {
		ts[i] = c.UnixNano()
	}
	return figures.Derive(int64(span.StartTimestamp()), ts, int64(threshold), nil)
}

// assertNoSecrets scans every string the span carries (name, status,
// attributes and event attributes, nested values included) for credentials,
// prompt text and completion text.
func assertNoSecrets(t *testing.T, span ptrace.Span, completion string, secrets ...string) {
	t.Helper()
	var values []string
	var walk func(v pcommon.Value)
	walk = func(v pcommon.Value) {
		switch v.Type() {
		case pcommon.ValueTypeSlice:
			for i := range v.Slice().Len() {
				walk(v.Slice().At(i))
			}
		case pcommon.ValueTypeMap:
			v.Map().Range(func(k string, v pcommon.Value) bool {
				values = append(values, k)
				walk(v)
				return true
			})
		default:
			values = append(values, v.AsString())
		}
	}
	collect := func(m pcommon.Map) {
		m.Range(func(k string, v pcommon.Value) bool {
			values = append(values, k)
			walk(v)
			return true
		})
	}
	values = append(values, span.Name(), span.Status().Message(), span.TraceState().AsRaw())
	collect(span.Attributes())
	for i := range span.Events().Len() {
		values = append(values, span.Events().At(i).Name())
		collect(span.Events().At(i).Attributes())
	}
	// Any two consecutive words of the completion would betray it.
	var words []string
	fields := strings.Fields(completion)
	for i := 1; i < len(fields); i++ {
		words = append(words, fields[i-1]+" "+fields[i])
	}
	for _, v := range values {
		for _, s := range secrets {
			require.NotContains(t, v, s, "a credential or the prompt leaked into the span")
		}
		if completion != "" {
			require.NotContains(t, v, completion, "the completion leaked into the span")
		}
		for _, w := range words {
			require.NotContains(t, v, w, "completion text leaked into the span")
		}
	}
}

func newTestServer(tb testing.TB, h http.Handler) string {
	tb.Helper()
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return srv.URL
}

// sentWhole is what fakellm sent for the first request since its last
// Reset, once that request's handler has returned: fakellm records each
// write after its flush, so a client that read the last byte may be ahead
// of the record.
func sentWhole(t *testing.T, fake *fakellm.Server) []byte {
	t.Helper()
	_, err := fake.WaitFor(testContext(t), 1)
	require.NoError(t, err)
	return fake.Sent(0)
}

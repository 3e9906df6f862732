// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

// hostileGuard is a guarded proxy in front of a primary and an alternate
// of the test's own, each counting the requests it got.
type hostileGuard struct {
	proxyURL           string
	sink               *consumertest.TracesSink
	tel                *componenttest.Telemetry
	primary, alternate atomic.Int64
}

func newHostileGuard(t *testing.T, primary, alternate http.HandlerFunc, g func(*GuardConfig), opts ...func(*ProxyConfig)) *hostileGuard {
	t.Helper()
	h := &hostileGuard{sink: new(consumertest.TracesSink)}
	counted := func(n *atomic.Int64, next http.HandlerFunc) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			next(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	pc := cfg.Proxy.GetOrInsertDefault()
	pc.NetAddr.Endpoint = "127.0.0.1:0"
	pc.Upstream.Endpoint = counted(&h.primary, primary)
	gc := pc.Guard.GetOrInsertDefault()
	alt := confighttp.NewDefaultClientConfig()
	alt.Endpoint = counted(&h.alternate, alternate)
	gc.Hedge.Alternates = []AlternateConfig{{ClientConfig: alt, ForwardClientCredentials: true}}
	if g != nil {
		g(gc)
	}
	for _, o := range opts {
		o(pc)
	}
	require.NoError(t, cfg.Validate())
	rcv := startReceiver(t, cfg, h.sink, componenttest.NewNopHost(), tel)
	h.proxyURL, h.tel = "http://"+rcv.addrs["proxy"].String(), tel
	return h
}

// answer writes body in one piece with the given content type.
func answer(mediaType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", mediaType)
		_, _ = io.WriteString(w, body)
	}
}

// TestGuardTakesAnOllamaAnswerWithoutItsLastLineFeed: an Ollama server (or
// a gateway in front of one) that answers a streaming call with its whole
// answer in one NDJSON line, without the line feed after it, gave a
// complete answer: the span reads it so (the NDJSON framing's last line
// needs no line feed). The guard must read it the same way, not take it
// for a stream that ended before content and fail over to the alternate.
func TestGuardTakesAnOllamaAnswerWithoutItsLastLineFeed(t *testing.T) {
	const whole = `{"model":"llama3","message":{"role":"assistant","content":"Hello there"},"done":true,"done_reason":"stop"}`
	h := newHostileGuard(t,
		answer("application/x-ndjson", whole),
		answer("application/x-ndjson", `{"model":"llama3","message":{"role":"assistant","content":"other"},"done":true}`+"\n"),
		nil)
	resp, got := post(t, testClient(t), h.proxyURL+"/api/chat", `{"model":"llama3","messages":[{"role":"user","content":"hi"}]}`, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, whole, string(got), "the client got the primary's answer")
	assert.Zero(t, h.alternate.Load(), "the alternate was not asked")
	span := (&fixture{sink: h.sink}).spans(t, 1)[0]
	_, failed := span.Attributes().Get(semconv.AttrErrorType)
	assert.False(t, failed, "a complete answer")
	assert.Len(t, chunkTimes(span), 1)
}

var _ = strings.Repeat

// holdAfter writes body, flushed, then holds the response open (without
// another byte) until the proxy closes the request or hold passes.
func holdAfter(mediaType, body string, hold time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", mediaType)
		_, _ = io.WriteString(w, body)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(hold):
		}
	}
}

// TestGuardDoesNotCutAStreamThatEnded: an upstream (or a gateway in front
// of it) that sends the stream's terminal frame ([DONE], message_stop) and
// then leaves the connection open has ended its stream: the silence after
// it is no stall. The watchdog must not write its error frame after the
// terminal one (the client got a complete answer, and an SDK that reads
// the stream to its end would raise it), nor mark the span stall_timeout,
// which the figures read as a stall the guard cut.
func TestGuardDoesNotCutAStreamThatEnded(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, tc := range []struct{ name, path, body, stream string }{
		{
			name: "chat", path: "/v1/chat/completions",
			body: `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			stream: `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n" +
				`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
				"data: [DONE]\n\n",
		},
		{
			name: "messages", path: "/v1/messages",
			body: `{"model":"claude-x","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			stream: "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\n" +
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := holdAfter("text/event-stream", tc.stream, 2*time.Second)
			h := newHostileGuard(t, up, up, func(g *GuardConfig) { g.StallTimeout = AutoDuration(timeout) })
			start := time.Now()
			resp, got := post(t, testClient(t), h.proxyURL+tc.path, tc.body, nil)
			assert.Less(t, time.Since(start), 1500*time.Millisecond, "ended at the stall deadline, not when the upstream let go")
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, tc.stream, string(got), "the client got the upstream's bytes and nothing after its terminal frame")
			span := (&fixture{sink: h.sink}).spans(t, 1)[0]
			_, failed := span.Attributes().Get(semconv.AttrErrorType)
			assert.False(t, failed, "a complete stream, not a stall cut")
			assert.Len(t, chunkTimes(span), 1)
		})
	}
}

// TestProxyMarksA200ThatIsAnError: an upstream or gateway that answers 200
// with its API's error object as the body failed the call: the client gets
// the body as sent, and the span says the call failed, with the error's
// code or type (an Ollama error names nothing: error), as it does for the
// same error in a stream or under an error status.
func TestProxyMarksA200ThatIsAnError(t *testing.T) {
	for _, tc := range []struct{ name, path, req, body, errType string }{
		{
			name: "chat", path: "/v1/chat/completions",
			req:     `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
			body:    `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`,
			errType: "server_error",
		},
		{
			name: "messages", path: "/v1/messages",
			req:     `{"model":"claude-x","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
			body:    `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			errType: "overloaded_error",
		},
		{
			name: "ollama", path: "/api/chat",
			req:     `{"model":"llama3","stream":false,"messages":[{"role":"user","content":"hi"}]}`,
			body:    `{"error":"model runner has unexpectedly stopped"}`,
			errType: "error",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
				p.Upstream.Endpoint = newTestServer(t, answer("application/json", tc.body))
			}))
			resp, got := post(t, testClient(t), f.proxyURL+tc.path, tc.req, nil)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, tc.body, string(got), "the body as the upstream sent it")
			span := f.spans(t, 1)[0]
			v, failed := span.Attributes().Get(semconv.AttrErrorType)
			require.True(t, failed, "the call failed")
			assert.Equal(t, tc.errType, v.Str())
			assert.Equal(t, ptrace.StatusCodeError, span.Status().Code())
		})
	}
}

// gzipped is body in gzip.
func gzipped(t *testing.T, body string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := io.WriteString(zw, body)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// TestGuardReadsACodedRefusal: a client whose own key is spent gets the
// primary's 429 insufficient_quota, never the alternate's answer on the
// operator's key, also when the primary sends its error body in gzip (the
// proxy forwards the client's Accept-Encoding: gzip, which the Node SDKs
// and httpx send, and an API behind a CDN compresses its JSON errors). The
// guard reads the refusal through the body's coding, as the span does.
func TestGuardReadsACodedRefusal(t *testing.T) {
	refusal := gzipped(t, `{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
	h := newHostileGuard(t,
		func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write(refusal)
		},
		answer("text/event-stream", chatEvent+doneEvent),
		func(g *GuardConfig) {
			a := &g.Hedge.Alternates[0]
			a.ForwardClientCredentials = false
			a.Headers = configopaque.MapList{{Name: "Authorization", Value: "Bearer sk-operator"}}
		})
	resp, got := post(t, testClient(t), h.proxyURL+shapes[0].path, shapes[0].body,
		http.Header{"Authorization": {"Bearer sk-spent"}, "Accept-Encoding": {"gzip"}})
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, refusal, got, "the client got the primary's refusal as sent")
	assert.Zero(t, h.alternate.Load(), "the operator's key served no request")
	span := (&fixture{sink: h.sink}).spans(t, 1)[0]
	assert.Equal(t, "insufficient_quota", attr(t, span, semconv.AttrErrorType).Str())
}

// TestGuardBoundsTheFramesALoserHeld: a primary that sends just under the
// 1 MiB pre-content bound in two-byte comments (":" and a line feed), half
// a million frames, and then nothing, loses to the alternate's hedge. The
// loser's span records its frames as keepalive events like any span, at
// most max_chunk_events of them and the rest counted, not one event per
// frame: half a million events would make an OTLP span of megabytes, and
// what the attempt keeps of its frames before content would cost many
// times the bytes it held.
func TestGuardBoundsTheFramesALoserHeld(t *testing.T) {
	const maxEvents = 64
	comments := strings.Repeat(":\n", (1<<20-4<<10)/2)
	h := newHostileGuard(t,
		holdAfter("text/event-stream", comments, 10*time.Second),
		answer("text/event-stream", chatEvent+doneEvent),
		func(g *GuardConfig) { g.Hedge.Delay = AutoDuration(300 * time.Millisecond) },
		func(p *ProxyConfig) {
			p.RecordKeepalives = true
			p.ChunkEvents.MaxChunkEvents = maxEvents
		})
	resp, got := post(t, testClient(t), h.proxyURL+shapes[0].path, shapes[0].body, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, chatEvent+doneEvent, string(got), "the client got the alternate's stream alone")
	spans := byAttempt(t, (&fixture{sink: h.sink}).spans(t, 2))
	loser := spans[0]
	assert.Equal(t, semconv.HedgeOutcomeLoser, attr(t, loser, semconv.AttrHedgeOutcome).Str())
	kept := eventCount(loser, semconv.EventKeepalive)
	assert.Equal(t, maxEvents, kept)
	dropped := attr(t, loser, semconv.AttrKeepaliveEventsDropped).Int()
	assert.Positive(t, dropped)
	assert.LessOrEqual(t, dropped, int64(len(comments)/2-maxEvents), "no more than it sent")
}

// TestProxySaysWhenBytesAfterAGzipMemberDoNotDecode: a gzip body whose
// member ends and is followed by bytes that are no gzip member (an
// upstream that compressed its preamble and then wrote the rest plain)
// does not decode: a gzip client fails on those bytes or drops them. The
// client gets every byte as sent, and the span says decode_error, as for
// any body that stops decoding, not stream_truncated: the proxy could not
// read the rest, so whether the stream was whole is unknown.
func TestProxySaysWhenBytesAfterAGzipMemberDoNotDecode(t *testing.T) {
	member := gzipped(t, ": preamble\n\n")
	sent := append(append([]byte{}, member...), chatEvent+doneEvent...)
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
		p.Upstream.Endpoint = newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(sent)
		}))
	}))
	resp, got := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, http.Header{"Accept-Encoding": {"gzip"}})
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, sent, got, "the client got every byte as sent")
	span := f.spans(t, 1)[0]
	assert.Equal(t, "decode_error", attr(t, span, semconv.AttrCaptureError).Str())
	_, truncated := span.Attributes().Get(semconv.AttrErrorType)
	assert.False(t, truncated, "the body ended cleanly: not stream_truncated")
}

// TestGuardEndsAStallCleanlyUnderAContentLength: an upstream that declares
// a Content-Length for its event stream (a replay server, a gateway that
// buffered the head) and stalls before sending it all is ended like any
// stall: the client gets the upstream's bytes, the guard's error frame and
// a clean end of the response. Sent on under the upstream's length, the
// frame would make the body shorter or longer than it says, and the
// client's HTTP layer would fail the read instead of its SDK raising the
// API's error.
func TestGuardEndsAStallCleanlyUnderAContentLength(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, declared := range []int{len(chatEvent) + 1000, len(chatEvent) + 10} {
		t.Run(strconv.Itoa(declared), func(t *testing.T) {
			up := func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Content-Length", strconv.Itoa(declared))
				_, _ = io.WriteString(w, chatEvent)
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			}
			h := newHostileGuard(t, up, up, func(g *GuardConfig) { g.StallTimeout = AutoDuration(timeout) })
			req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, h.proxyURL+shapes[0].path, strings.NewReader(shapes[0].body))
			require.NoError(t, err)
			resp, err := testClient(t).Do(req)
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err, "a clean end of the response")
			require.NoError(t, resp.Body.Close())
			assert.True(t, strings.HasPrefix(string(got), chatEvent), "the upstream's bytes first")
			assert.Contains(t, string(got)[len(chatEvent):], `"code":"stall_timeout"`, "then the guard's frame, whole")
			span := (&fixture{sink: h.sink}).spans(t, 1)[0]
			assert.Equal(t, "stall_timeout", attr(t, span, semconv.AttrErrorType).Str())
		})
	}
}

// TestGuardShutdownLeavesAStreamThatEndedAlone: at shutdown, a guarded
// stream whose upstream sent its terminal frame and then held the
// connection open is over, watched or not (without a stall timeout the
// guard still frames the streams it committed, for shutdown): the client
// gets nothing after the terminal frame but a clean end, and the span is
// the complete call, not error.type shutdown.
func TestGuardShutdownLeavesAStreamThatEndedAlone(t *testing.T) {
	stream := chatEvent + doneEvent
	up := newTestServer(t, holdAfter("text/event-stream", stream, 10*time.Second))
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	p := cfg.Proxy.GetOrInsertDefault()
	p.NetAddr.Endpoint = "127.0.0.1:0"
	p.Upstream.Endpoint = up
	p.ShutdownTimeout = 200 * time.Millisecond
	p.Guard.GetOrInsertDefault() // hedging only: the stream is not watched
	require.NoError(t, cfg.Validate())
	sink := new(consumertest.TracesSink)
	r, err := NewFactory().CreateTraces(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	rcv := r.(*sseCaptureReceiver)
	require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))

	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, "http://"+rcv.addrs["proxy"].String()+shapes[0].path, strings.NewReader(shapes[0].body))
	require.NoError(t, err)
	resp, err := testClient(t).Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	head := make([]byte, len(stream))
	_, err = io.ReadFull(resp.Body, head)
	require.NoError(t, err)
	require.NoError(t, rcv.Shutdown(context.Background()))
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "a clean end")
	assert.Empty(t, string(rest), "nothing after the terminal frame")

	require.Equal(t, 1, sink.SpanCount())
	span := sink.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	_, failed := span.Attributes().Get(semconv.AttrErrorType)
	assert.False(t, failed, "the complete call it was: %v", span.Attributes().AsRaw())
}

// TestGuardKeepsAnAlternatesCookiesFromTheClient: a cookie an alternate
// sets (a CDN's bot-management or affinity cookie) would come back from
// the client's cookie jar on its next call, which goes to the primary:
// Cookie reaches the primary only, so the alternate's cookie would leak to
// another provider and never serve the one that set it. The primary's own
// cookies reach the client as they came.
func TestGuardKeepsAnAlternatesCookiesFromTheClient(t *testing.T) {
	stream := `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n" + "data: [DONE]\n\n"
	answer := func(cookie string, status int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Add("Set-Cookie", cookie+"=v; Path=/; Secure")
			if status != http.StatusOK {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_, _ = io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error"}}`)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, stream)
		}
	}
	body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name          string
		primaryStatus int
		alternateUp   bool
		want          []string
	}{
		{"the primary serves", http.StatusOK, true, []string{"primary=v; Path=/; Secure"}},
		{"the alternate serves", http.StatusServiceUnavailable, true, nil},
		{"both fail, the alternate's failure is passed on", http.StatusServiceUnavailable, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alternate := answer("alternate", http.StatusOK)
			if !tc.alternateUp {
				alternate = answer("alternate", http.StatusServiceUnavailable)
			}
			h := newHostileGuard(t, answer("primary", tc.primaryStatus), alternate, func(g *GuardConfig) { g.Hedge.MaxAttempts = 2 })
			resp, _ := post(t, testClient(t), h.proxyURL+"/v1/chat/completions", body, nil)
			assert.Equal(t, tc.want, resp.Header.Values("Set-Cookie"))
		})
	}
}

// TestGuardEndsACodedStreamThatEndedWhole: a gzip stream whose terminal
// frame has passed, flushed but its coding left open while the upstream
// holds the connection, ends at the stall deadline with the coding closed
// and no frame of the guard's: the client decodes the whole stream, the
// upstream's bytes first, and reads to its end without an error.
func TestGuardEndsACodedStreamThatEndedWhole(t *testing.T) {
	stream := `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n" + "data: [DONE]\n\n"
	var coded bytes.Buffer
	zw := gzip.NewWriter(&coded)
	_, err := io.WriteString(zw, stream)
	require.NoError(t, err)
	require.NoError(t, zw.Flush()) // a sync flush: the coding stays open
	sent := bytes.Clone(coded.Bytes())
	up := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(sent)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}
	h := newHostileGuard(t, up, up, func(g *GuardConfig) { g.StallTimeout = AutoDuration(300 * time.Millisecond) })
	resp, got := post(t, testClient(t), h.proxyURL+shapes[0].path, shapes[0].body, http.Header{"Accept-Encoding": {"gzip"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, bytes.HasPrefix(got, sent), "the upstream's bytes first, as they came")
	zr, err := gzip.NewReader(bytes.NewReader(got))
	require.NoError(t, err)
	decoded, err := io.ReadAll(zr)
	require.NoError(t, err, "the coding is closed")
	assert.Equal(t, stream, string(decoded), "nothing after the terminal frame")
	span := (&fixture{sink: h.sink}).spans(t, 1)[0]
	_, failed := span.Attributes().Get(semconv.AttrErrorType)
	assert.False(t, failed, "a complete stream, not a stall cut")
}

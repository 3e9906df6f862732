// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// The attacks of docs/security.md against the ocb-built collector with its
// default limits: each must cost bounded memory and time, get a clear answer,
// and leave only figures that chunk evidence supports.

const hostileConfig = `
extensions:
  bearertokenauth/proxy:
    header: X-Collector-Token
    token: collector-secret
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${OTLP}
  sse_capture:
    proxy:
      endpoint: 127.0.0.1:${PROXY}
      upstream:
        endpoint: ${UPSTREAM}/openai
      auth:
        authenticator: bearertokenauth/proxy
      auth_header: X-Collector-Token
    ingest:
      endpoint: 127.0.0.1:${INGEST}
processors:
  stall:
` + sinkAndMetrics + `service:
  pipelines:
    traces:
      receivers: [otlp, sse_capture]
      processors: [stall]
      exporters: [otlp_http, stall_metrics]
    metrics:
      receivers: [stall_metrics]
      exporters: [prometheus]
`

// peakBudget bounds how far the collector's resident-set high-water mark may
// rise above where it stood before the attacks, over all of them together.
// Before the trust boundary was hardened, one 16 MB ingest body raised it by
// 660 to 900 MB and twenty spans with 4 MiB model names by 2.3 GB.
const peakBudget = 400 << 20

// upstream is the provider behind the proxy: it records what reached it and
// answers with the stream the test scripted for the request's model.
type upstream struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests []*http.Request
	streams  map[string]func(w http.ResponseWriter, r *http.Request)
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{streams: map[string]func(http.ResponseWriter, *http.Request){}}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string `json:"model"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req)
	u.mu.Lock()
	u.requests = append(u.requests, r.Clone(context.Background()))
	stream := u.streams[req.Model]
	u.mu.Unlock()
	if stream == nil {
		http.Error(w, `{"error":"no such model"}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	stream(w, r)
}

func (u *upstream) script(model string, stream func(w http.ResponseWriter, r *http.Request)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.streams[model] = stream
}

func (u *upstream) seen() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.requests...)
}

func chunkFrame(model, text string) string {
	return fmt.Sprintf("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", model, text)
}

func flushed(w http.ResponseWriter, s string) {
	_, _ = io.WriteString(w, s)
	w.(http.Flusher).Flush()
}

type hostileStack struct {
	col                       *harness.Process
	up                        *upstream
	sink                      *harness.Sink
	otlp, proxy, ingest, prom string
	baseline                  int64
}

func startHostileStack(t *testing.T) *hostileStack {
	t.Helper()
	s := &hostileStack{up: startUpstream(t), sink: startSink(t)}
	otlp, proxy, ingest, prom := freePort(t), freePort(t), freePort(t), freePort(t)
	s.col = collector(t, fill(hostileConfig, "OTLP", otlp, "PROXY", proxy, "INGEST", ingest, "PROM", prom,
		"UPSTREAM", s.up.srv.URL, "SINK", s.sink.URL), "bearertokenauth/proxy")
	s.otlp = fmt.Sprintf("http://127.0.0.1:%d/v1/traces", otlp)
	s.proxy = fmt.Sprintf("127.0.0.1:%d", proxy)
	s.ingest = fmt.Sprintf("http://127.0.0.1:%d/v1/streams", ingest)
	s.prom = fmt.Sprintf("http://127.0.0.1:%d/metrics", prom)
	var err error
	s.baseline, err = s.col.PeakRSS()
	require.NoError(t, err)
	return s
}

// checkPeak fails the test when the collector's peak memory rose past budget.
func (s *hostileStack) checkPeak(t *testing.T, after string) {
	t.Helper()
	peak, err := s.col.PeakRSS()
	require.NoError(t, err)
	t.Logf("after %s: peak RSS %d MiB (+%d MiB)", after, peak>>20, (peak-s.baseline)>>20)
	assert.Less(t, peak-s.baseline, int64(peakBudget), "peak RSS after %s", after)
}

type reply struct {
	status int
	header http.Header
	body   []byte
	took   time.Duration
}

func send(t *testing.T, method, url string, header map[string]string, body io.Reader) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{status: resp.StatusCode, header: resp.Header, body: b, took: time.Since(start)}
}

// jsonError requires an ingest error body: JSON with an "error" string.
func jsonError(t *testing.T, r reply) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "error body is not JSON: %q", r.body)
	require.IsType(t, "", m["error"], "error body: %s", r.body)
	return m
}

func TestHostileInput(t *testing.T) {
	s := startHostileStack(t)
	jsonType := map[string]string{"Content-Type": "application/json"}

	t.Run("ingest zeros array, three at once", func(t *testing.T) {
		zeros := []byte("[" + strings.Repeat("0,", 8_000_000-1) + "0]")
		// Records of streams that start now: ingest refuses older ones
		// (max_start_age) before any other limit is reached.
		record := fmt.Sprintf(`{"name":"chat m","start_time_unix_nano":"%d"},`, time.Now().UnixNano())
		records := []byte("[" + strings.Repeat(record, 16_000_000/len(record)) + "{}]")
		var wg sync.WaitGroup
		replies := make([]reply, 3)
		for i := range replies {
			body := zeros
			if i > 0 {
				body = records
			}
			wg.Go(func() { replies[i] = send(t, http.MethodPost, s.ingest, jsonType, bytes.NewReader(body)) })
		}
		wg.Wait()
		require.Equal(t, http.StatusBadRequest, replies[0].status, "%s", replies[0].body)
		assert.EqualValues(t, 0, jsonError(t, replies[0])["record"], "refused at its first element")
		for _, r := range replies[1:] {
			require.Equal(t, http.StatusRequestEntityTooLarge, r.status, "%s", r.body)
			assert.EqualValues(t, 10_000, jsonError(t, r)["record"], "refused at the record past max_records")
		}
		for _, r := range replies {
			assert.Less(t, r.took, 30*time.Second)
		}
		s.checkPeak(t, "a 16 MB zeros array and two 16 MB arrays of 250,000 records, at once")
	})

	t.Run("ingest record with a million attributes", func(t *testing.T) {
		var b bytes.Buffer
		b.WriteString(`{"name":"chat m","start_time_unix_nano":"1790000000000000000","attributes":{`)
		for i := range 1_000_000 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"k%d":1`, i)
		}
		b.WriteString(`}}`)
		r := send(t, http.MethodPost, s.ingest, jsonType, &b)
		require.Equal(t, http.StatusRequestEntityTooLarge, r.status, "%s", r.body)
		m := jsonError(t, r)
		assert.EqualValues(t, 0, m["record"])
		assert.Less(t, r.took, 30*time.Second, "it used to take over ten minutes of CPU")
		s.checkPeak(t, "a record with a million attributes")
	})

	t.Run("ingest record that sets figures", func(t *testing.T) {
		body := `[{"name":"chat m","start_time_unix_nano":"1790000000000000000",` +
			`"attributes":{"gen_ai.request.model":"m","llm.stream.stall_count":3,"llm.stream.stall_ms":90000}}]`
		r := send(t, http.MethodPost, s.ingest, jsonType, strings.NewReader(body))
		require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
		m := jsonError(t, r)
		assert.EqualValues(t, 0, m["record"])
		assert.Contains(t, m["field"], "llm.stream.")
	})

	t.Run("ingest cross-site simple request", func(t *testing.T) {
		body := `{"name":"chat m","start_time_unix_nano":"1790000000000000000","chunk_offsets_ms":[10,20]}`
		r := send(t, http.MethodPost, s.ingest, map[string]string{
			"Content-Type": "text/plain", "Origin": "https://evil.example",
		}, strings.NewReader(body))
		require.Equal(t, http.StatusUnsupportedMediaType, r.status, "%s", r.body)
		jsonError(t, r)
	})

	t.Run("ingest brotli body", func(t *testing.T) {
		r := send(t, http.MethodPost, s.ingest, map[string]string{
			"Content-Type": "application/json", "Content-Encoding": "br",
		}, strings.NewReader("not really brotli"))
		require.GreaterOrEqual(t, r.status, 400, "%s", r.body)
		require.Less(t, r.status, 500, "%s", r.body)
		jsonError(t, r)
	})

	t.Run("ingest records out of time or not UTF-8", func(t *testing.T) {
		now := time.Now()
		ns := func(d time.Duration) int64 { return now.Add(d).UnixNano() }
		for _, tc := range []struct{ name, body, field string }{
			{"a day old", fmt.Sprintf(`{"name":"chat m","start_time_unix_nano":"%d"}`, ns(-25*time.Hour)), "start_time_unix_nano"},
			{"two hours long", fmt.Sprintf(`{"name":"chat m","start_time_unix_nano":"%d","end_time_unix_nano":"%d"}`, ns(-3*time.Hour), ns(-time.Hour)), "end_time_unix_nano"},
			{"a chunk an hour ahead", fmt.Sprintf(`{"name":"chat m","start_time_unix_nano":"%d","chunk_times_unix_nano":["%d"]}`, ns(-time.Minute), ns(time.Hour)), "chunk_times_unix_nano"},
			{"an offset string with an exponent", fmt.Sprintf(`{"name":"chat m","start_time_unix_nano":"%d","chunk_offsets_ms":["1e3"]}`, ns(-time.Minute)), "chunk_offsets_ms"},
			{"a name that is not UTF-8", fmt.Sprintf(`{"name":"chat `+"\xff"+`","start_time_unix_nano":"%d"}`, ns(-time.Minute)), "name"},
		} {
			r := send(t, http.MethodPost, s.ingest, jsonType, strings.NewReader(tc.body))
			require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", tc.name, r.body)
			m := jsonError(t, r)
			assert.EqualValues(t, 0, m["record"], tc.name)
			assert.Equal(t, tc.field, m["field"], tc.name)
		}
	})

	t.Run("60,000 request headers on both listeners", func(t *testing.T) {
		var headers strings.Builder
		for i := range 60_000 {
			fmt.Fprintf(&headers, "X-H-%d: v\r\n", i)
		}
		for name, target := range map[string]string{"proxy": s.proxy, "ingest": strings.TrimSuffix(strings.TrimPrefix(s.ingest, "http://"), "/v1/streams")} {
			path := map[string]string{"proxy": "/v1/chat/completions", "ingest": "/v1/streams"}[name]
			status := refusedRequest(t, target, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"+
				headers.String()+"\r\n{}")
			assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, status, "%s: 431 before the authenticator", name)
		}
		s.checkPeak(t, "60,000 request headers on each listener")
	})

	t.Run("proxy forwards no Upgrade or TE", func(t *testing.T) {
		s.up.script("hop-check", func(w http.ResponseWriter, _ *http.Request) {
			flushed(w, chunkFrame("hop-check", "hi"))
			flushed(w, "data: [DONE]\n\n")
		})
		body := `{"model":"hop-check","stream":true}`
		status := rawRequest(t, s.proxy, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Collector-Token: Bearer collector-secret\r\n"+
			"Connection: Upgrade, X-Hop\r\nUpgrade: websocket\r\nTE: trailers\r\nX-Hop: 1\r\n"+
			fmt.Sprintf("Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
		require.Equal(t, http.StatusOK, status)
		seen := s.up.seen()
		require.NotEmpty(t, seen)
		got := seen[len(seen)-1]
		for _, h := range []string{"Upgrade", "Te", "Connection", "X-Hop"} {
			assert.Empty(t, got.Header.Values(h), "%s reached the upstream", h)
		}
	})

	t.Run("otlp span with one chunk and forged figures", func(t *testing.T) {
		td := ptrace.NewTraces()
		ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
		sp := streamingSpan(ss, "forged-figures", semconv.EventChunk, time.Now().Add(-time.Minute), 100)
		sp.Attributes().PutInt(semconv.AttrStallCount, 7)
		sp.Attributes().PutDouble(semconv.AttrStallMs, 50000)
		sp.Attributes().PutDouble(semconv.AttrActiveTPS, 9999)
		body, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
		require.NoError(t, err)
		r := send(t, http.MethodPost, s.otlp, jsonType, bytes.NewReader(body))
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		got := waitSpan(t, s.sink, "forged-figures")
		attrs := got.Attributes()
		count, ok := attrs.Get(semconv.AttrChunkCount)
		require.True(t, ok)
		assert.EqualValues(t, 1, count.Int())
		for _, forged := range []string{semconv.AttrStallCount, semconv.AttrStallMs, semconv.AttrActiveTPS} {
			_, ok := attrs.Get(forged)
			assert.False(t, ok, "%s survived the stall processor", forged)
		}
	})

	t.Run("otlp spans with 4 MiB model names", func(t *testing.T) {
		huge := strings.Repeat("m", 4<<20)
		for i := range 20 {
			td := ptrace.NewTraces()
			ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
			sp := streamingSpan(ss, fmt.Sprintf("huge-model-%d", i), semconv.EventChunk, time.Now().Add(-time.Minute), 100, 150, 3200)
			sp.Attributes().PutStr(semconv.AttrRequestModel, fmt.Sprintf("%d%s", i, huge))
			body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
			require.NoError(t, err)
			r := send(t, http.MethodPost, s.otlp, map[string]string{"Content-Type": "application/x-protobuf"}, bytes.NewReader(body))
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		}
		waitSpan(t, s.sink, "huge-model-19")
		var scraped int
		eventually(t, 30*time.Second, "a scrape with the huge models' series", func() error {
			r := send(t, http.MethodGet, s.prom, nil, nil)
			scraped = len(r.body)
			if !bytes.Contains(r.body, []byte(`gen_ai_request_model="19mmm`)) {
				return errNotYet
			}
			for line := range strings.SplitSeq(string(r.body), "\n") {
				if len(line) > 64<<10 {
					return fmt.Errorf("a scrape line of %d bytes: dimension values are not capped", len(line))
				}
			}
			return nil
		})
		t.Logf("scrape: %d bytes", scraped)
		assert.Less(t, scraped, 4<<20, "the scrape used to be 1.34 GB")
		s.checkPeak(t, "twenty spans with 4 MiB model names")
	})

	t.Run("proxy keeps the collector's token home", func(t *testing.T) {
		s.up.script("token-check", func(w http.ResponseWriter, _ *http.Request) {
			flushed(w, chunkFrame("token-check", "hi"))
			flushed(w, "data: [DONE]\n\n")
		})
		r := send(t, http.MethodPost, "http://"+s.proxy+"/v1/chat/completions", map[string]string{
			"Content-Type": "application/json", "Authorization": "Bearer sk-client-key",
			"X-Collector-Token": "Bearer collector-secret",
		}, strings.NewReader(`{"model":"token-check","stream":true}`))
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var got *http.Request
		for _, req := range s.up.seen() {
			if strings.HasSuffix(req.URL.Path, "/chat/completions") {
				got = req
			}
		}
		require.NotNil(t, got, "the upstream saw no request")
		assert.Equal(t, "Bearer sk-client-key", got.Header.Get("Authorization"), "the client's provider key goes upstream")
		assert.Empty(t, got.Header.Values("X-Collector-Token"), "the collector's own token reached the provider")
	})

	t.Run("proxy path leaves the upstream prefix", func(t *testing.T) {
		before := len(s.up.seen())
		for _, path := range []string{"/../admin", "/v1/%2e%2e/%2e%2e/admin", "/v1/..%2f..%2fadmin"} {
			status := rawRequest(t, s.proxy, "POST "+path+" HTTP/1.1\r\nHost: x\r\nX-Collector-Token: Bearer collector-secret\r\n"+
				"Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
			assert.Equal(t, http.StatusBadRequest, status, "path %s", path)
		}
		assert.Len(t, s.up.seen(), before, "a request that leaves the prefix reached the upstream")
	})

	t.Run("proxy oversized frame", func(t *testing.T) {
		var sent bytes.Buffer
		sent.WriteString("data: " + strings.Repeat("x", 20<<20) + "\n\n")
		for i := range 5 {
			sent.WriteString(chunkFrame("oversized", fmt.Sprintf("t%d", i)))
		}
		sent.WriteString("data: [DONE]\n\n")
		s.up.script("oversized", func(w http.ResponseWriter, _ *http.Request) {
			flushed(w, sent.String())
		})
		r := send(t, http.MethodPost, "http://"+s.proxy+"/v1/chat/completions", map[string]string{
			"Content-Type": "application/json", "X-Collector-Token": "Bearer collector-secret",
		}, strings.NewReader(`{"model":"oversized","stream":true}`))
		require.Equal(t, http.StatusOK, r.status)
		require.True(t, bytes.Equal(sent.Bytes(), r.body), "the client's bytes differ from the upstream's")
		sp := waitSpan(t, s.sink, "chat oversized")
		attrs := sp.Attributes()
		count, _ := attrs.Get(semconv.AttrChunkCount)
		assert.EqualValues(t, 5, count.Int(), "chunks after the oversized frame are counted")
		oversized, ok := attrs.Get("llm.stream.oversized_frames")
		require.True(t, ok)
		assert.EqualValues(t, 1, oversized.Int())
		_, hasErr := attrs.Get(semconv.AttrErrorType)
		assert.False(t, hasErr, "the stream ended as it really ended")
		s.checkPeak(t, "a 20 MB frame through the proxy")
	})

	t.Run("proxy content-coded streams", func(t *testing.T) {
		// gzip from an upstream that flushes its encoder per frame, with a
		// 2.5 s stall: the client gets the coded bytes, the figures are the
		// stream's own.
		var sent bytes.Buffer
		var sentMu sync.Mutex
		s.up.script("gzipped", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(writerFunc(func(p []byte) (int, error) {
				sentMu.Lock()
				sent.Write(p)
				sentMu.Unlock()
				return w.Write(p)
			}))
			for i, frame := range []string{chunkFrame("gzipped", "a"), chunkFrame("gzipped", "b"), chunkFrame("gzipped", "c"), "data: [DONE]\n\n"} {
				if i == 2 {
					time.Sleep(2500 * time.Millisecond)
				}
				_, _ = io.WriteString(zw, frame)
				_ = zw.Flush()
				w.(http.Flusher).Flush()
			}
			_ = zw.Close()
		})
		auth := map[string]string{
			"Content-Type": "application/json", "X-Collector-Token": "Bearer collector-secret",
			"Accept-Encoding": "gzip, deflate, br",
		}
		before := len(s.up.seen())
		r := send(t, http.MethodPost, "http://"+s.proxy+"/v1/chat/completions", auth, strings.NewReader(`{"model":"gzipped","stream":true}`))
		require.Equal(t, http.StatusOK, r.status)
		assert.Equal(t, "gzip", r.header.Get("Content-Encoding"))
		sentMu.Lock()
		assert.True(t, bytes.Equal(sent.Bytes(), r.body), "the client gets the coded bytes as sent")
		sentMu.Unlock()
		assert.Equal(t, "gzip, deflate", s.up.seen()[before].Header.Get("Accept-Encoding"), "br dropped: the proxy cannot read it")
		attrs := waitSpan(t, s.sink, "chat gzipped").Attributes()
		count, _ := attrs.Get(semconv.AttrChunkCount)
		assert.EqualValues(t, 3, count.Int())
		stalls, _ := attrs.Get(semconv.AttrStallCount)
		assert.EqualValues(t, 1, stalls.Int())
		stallMs, _ := attrs.Get(semconv.AttrStallMs)
		assert.InDelta(t, 2500, stallMs.Double(), 200)
		for _, k := range []string{semconv.AttrErrorType, semconv.AttrCaptureError} {
			_, ok := attrs.Get(k)
			assert.False(t, ok, k)
		}

		// A bomb: 1 GiB of zeros behind one chunk, in about 1 MB. Once the
		// window is all zeros, the flushed bytes of a MiB of zeros decode to
		// zeros wherever they are repeated.
		var bomb bytes.Buffer
		zw := gzip.NewWriter(&bomb)
		_, _ = io.WriteString(zw, chunkFrame("gzip-bomb", "a")+":")
		zeros := make([]byte, 1<<20)
		var segment []byte
		for range 2 {
			mark := bomb.Len()
			_, _ = zw.Write(zeros)
			_ = zw.Flush()
			segment = append(segment[:0], bomb.Bytes()[mark:]...)
		}
		for range 1022 {
			bomb.Write(segment)
		}
		s.up.script("gzip-bomb", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(bomb.Bytes())
		})
		r = send(t, http.MethodPost, "http://"+s.proxy+"/v1/chat/completions", auth, strings.NewReader(`{"model":"gzip-bomb","stream":true}`))
		require.Equal(t, http.StatusOK, r.status)
		assert.True(t, bytes.Equal(bomb.Bytes(), r.body), "the client gets every byte")
		attrs = waitSpan(t, s.sink, "chat gzip-bomb").Attributes()
		captureErr, _ := attrs.Get(semconv.AttrCaptureError)
		assert.Equal(t, "decoded_limit", captureErr.Str())
		count, _ = attrs.Get(semconv.AttrChunkCount)
		assert.EqualValues(t, 1, count.Int())
		_, hasErr := attrs.Get(semconv.AttrErrorType)
		assert.False(t, hasErr)
		s.checkPeak(t, "a 1 GiB gzip bomb through the proxy")

		// An upstream that answers in brotli although it was not asked to.
		brotli := []byte("\x1b\x1a\x00\xf8\xa5\x40\xc2\xbe\x03 not decoded")
		s.up.script("brotli", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Encoding", "br")
			_, _ = w.Write(brotli)
		})
		r = send(t, http.MethodPost, "http://"+s.proxy+"/v1/chat/completions", auth, strings.NewReader(`{"model":"brotli","stream":true}`))
		require.Equal(t, http.StatusOK, r.status)
		assert.Equal(t, brotli, r.body)
		attrs = waitSpan(t, s.sink, "chat brotli").Attributes()
		captureErr, _ = attrs.Get(semconv.AttrCaptureError)
		assert.Equal(t, "unsupported_content_encoding", captureErr.Str())
		_, hasErr = attrs.Get(semconv.AttrErrorType)
		assert.False(t, hasErr, "not stream_truncated")
	})

	t.Run("slow request bodies are cut", func(t *testing.T) {
		var wg sync.WaitGroup
		for name, target := range map[string]string{"proxy": s.proxy, "ingest": strings.TrimSuffix(strings.TrimPrefix(s.ingest, "http://"), "/v1/streams")} {
			path := map[string]string{"proxy": "/v1/chat/completions", "ingest": "/v1/streams"}[name]
			wg.Go(func() {
				took := slowBody(t, target, path)
				t.Logf("%s: a body at one byte per two seconds was cut after %s", name, took)
				assert.Less(t, took, 80*time.Second, "%s kept a slow body open", name)
			})
		}
		wg.Wait()
	})

	t.Run("shutdown ends open streams", func(t *testing.T) {
		s.up.script("endless", func(w http.ResponseWriter, r *http.Request) {
			for i := 0; ; i++ {
				flushed(w, chunkFrame("endless", fmt.Sprintf("t%d", i)))
				select {
				case <-r.Context().Done():
					return
				case <-time.After(500 * time.Millisecond):
				}
				if i == 90 { // 45 s
					flushed(w, "data: [DONE]\n\n")
					return
				}
			}
		})
		req, err := http.NewRequest(http.MethodPost, "http://"+s.proxy+"/v1/chat/completions", strings.NewReader(`{"model":"endless","stream":true}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Collector-Token", "Bearer collector-secret")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		go func() { _, _ = io.Copy(io.Discard, resp.Body) }()
		time.Sleep(2 * time.Second)

		start := time.Now()
		s.col.Stop(60 * time.Second)
		took := time.Since(start)
		t.Logf("the collector stopped %s after SIGTERM with a 45 s stream open", took)
		assert.Less(t, took, 40*time.Second, "shutdown waited for the stream")
		sp := waitSpan(t, s.sink, "chat endless")
		errType, ok := sp.Attributes().Get(semconv.AttrErrorType)
		require.True(t, ok)
		assert.Equal(t, "shutdown", errType.Str())
		count, _ := sp.Attributes().Get(semconv.AttrChunkCount)
		assert.GreaterOrEqual(t, count.Int(), int64(3), "the figures up to shutdown")
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// bytesPeakBudget bounds the rise of the collector's peak RSS in each case
// of TestHostileBytes. Before spans and buffers were bounded in bytes, the
// stream of 2,000,000 chunks raised it by 1.7 GiB and the 50 unterminated
// 7 MiB lines by 989 MiB; with the defaults (max_chunk_events 2048,
// frame_buffer_bytes 64 MiB) each stays far below this.
const bytesPeakBudget = 256 << 20

// proxyStream asks the hostile stack's proxy for model's stream and returns
// the reply.
func proxyStream(t *testing.T, proxy, model string) reply {
	t.Helper()
	return send(t, http.MethodPost, "http://"+proxy+"/v1/chat/completions", map[string]string{
		"Content-Type": "application/json", "X-Collector-Token": "Bearer collector-secret",
	}, strings.NewReader(fmt.Sprintf(`{"model":%q,"stream":true}`, model)))
}

// scriptLongStream makes model's stream n chunks of "a", written a thousand
// frames at a time, then [DONE]; it returns the bytes a client must get.
func scriptLongStream(u *upstream, model string, n int) int {
	frame := chunkFrame(model, "a")
	block := strings.Repeat(frame, 1000)
	u.script(model, func(w http.ResponseWriter, _ *http.Request) {
		for left := n; left > 0; left -= 1000 {
			_, _ = io.WriteString(w, block[:min(left, 1000)*len(frame)])
		}
		flushed(w, "data: [DONE]\n\n")
	})
	return n*len(frame) + len("data: [DONE]\n\n")
}

// assertElided checks a span that came through stall: its figures count
// every chunk, and it holds at most max_chunk_events chunk events.
func assertElided(t *testing.T, sp ptrace.Span, chunks int64) {
	t.Helper()
	count, ok := sp.Attributes().Get(semconv.AttrChunkCount)
	require.True(t, ok, "the span has figures")
	assert.Equal(t, chunks, count.Int(), "chunk_count counts the elided chunks")
	events := 0
	for _, ev := range sp.Events().All() {
		if ev.Name() == semconv.EventChunk {
			events++
		}
	}
	assert.LessOrEqual(t, events, 2048, "at most max_chunk_events chunk events")
	elided, ok := sp.Attributes().Get(semconv.AttrChunkEventsElided)
	require.True(t, ok)
	assert.Equal(t, chunks-int64(events), elided.Int())
}

// The inputs whose cost used to grow with their length in bytes: each must
// now cost the collector bounded memory, and the sink must get the spans
// with exact figures.
func TestHostileBytes(t *testing.T) {
	t.Run("a proxied stream of 2,000,000 chunks", func(t *testing.T) {
		s := startHostileStack(t)
		const n = 2_000_000
		want := scriptLongStream(s.up, "two-million", n)
		r := proxyStream(t, s.proxy, "two-million")
		require.Equal(t, http.StatusOK, r.status)
		assert.Len(t, r.body, want, "the client gets every byte")
		assertElided(t, waitSpan(t, s.sink, "chat two-million"), n)
		peak, err := s.col.PeakRSS()
		require.NoError(t, err)
		t.Logf("peak RSS %d MiB (+%d MiB)", peak>>20, (peak-s.baseline)>>20)
		assert.Less(t, peak-s.baseline, int64(bytesPeakBudget))
	})

	t.Run("50 streams that each send a 7 MiB line without a newline", func(t *testing.T) {
		s := startHostileStack(t)
		line := "data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("x", 7<<20)
		s.up.script("long-line", func(w http.ResponseWriter, _ *http.Request) {
			flushed(w, chunkFrame("long-line", "a"))
			// Sent in pieces, as a network would, and never ended.
			for i := 0; i < len(line); i += 64 << 10 {
				flushed(w, line[i:min(i+64<<10, len(line))])
			}
		})
		var wg sync.WaitGroup
		replies := make([]reply, 50)
		for i := range replies {
			wg.Go(func() { replies[i] = proxyStream(t, s.proxy, "long-line") })
		}
		wg.Wait()
		for _, r := range replies {
			require.Equal(t, http.StatusOK, r.status)
			assert.Len(t, r.body, len(chunkFrame("long-line", "a"))+len(line), "the client gets every byte")
		}
		oversized := int64(0)
		eventually(t, 30*time.Second, "50 spans at the sink", func() error {
			n := 0
			oversized = 0
			for _, sp := range s.sink.Spans() {
				if sp.Name() != "chat long-line" {
					continue
				}
				n++
				if v, ok := sp.Span.Attributes().Get(semconv.AttrOversizedFrames); ok {
					oversized += v.Int()
				}
			}
			if n < 50 {
				return errNotYet
			}
			return nil
		})
		t.Logf("%d of 50 unterminated lines skipped past frame_buffer_bytes", oversized)
		assert.Positive(t, oversized, "the budget cannot hold 50 lines of 7 MiB")
		peak, err := s.col.PeakRSS()
		require.NoError(t, err)
		t.Logf("peak RSS %d MiB (+%d MiB)", peak>>20, (peak-s.baseline)>>20)
		assert.Less(t, peak-s.baseline, int64(bytesPeakBudget))
	})

	t.Run("100,000 chunks cross an OTLP/gRPC hop with default limits", func(t *testing.T) {
		sink := startSink(t)
		grpcPort := freePort(t)
		collector(t, fill(`
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:${GRPC}
exporters:
  otlp_http:
    endpoint: ${SINK}
    encoding: json
    compression: none
service:
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [otlp_http]
`, "GRPC", grpcPort, "SINK", sink.URL))
		up := startUpstream(t)
		proxyPort, ingestPort := freePort(t), freePort(t)
		collector(t, fill(`
receivers:
  sse_capture:
    proxy:
      endpoint: 127.0.0.1:${PROXY}
      upstream:
        endpoint: ${UPSTREAM}
    ingest:
      endpoint: 127.0.0.1:${INGEST}
processors:
  stall:
  batch:
exporters:
  otlp_grpc:
    endpoint: 127.0.0.1:${GRPC}
    tls:
      insecure: true
service:
  pipelines:
    traces:
      receivers: [sse_capture]
      processors: [stall, batch]
      exporters: [otlp_grpc]
`, "PROXY", proxyPort, "INGEST", ingestPort, "UPSTREAM", up.srv.URL, "GRPC", grpcPort))
		const n = 100_000
		want := scriptLongStream(up, "hundred-thousand", n)
		r := send(t, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", proxyPort),
			map[string]string{"Content-Type": "application/json"}, strings.NewReader(`{"model":"hundred-thousand","stream":true}`))
		require.Equal(t, http.StatusOK, r.status)
		assert.Len(t, r.body, want)

		// A record of 100,000 offsets (within every ingest limit), with
		// 50 ordinary records in the same batch.
		var rec bytes.Buffer
		start := time.Now().Add(-2 * time.Minute).UnixNano()
		fmt.Fprintf(&rec, `[{"name":"ingest hundred-thousand","start_time_unix_nano":"%d","chunk_offsets_ms":[`, start)
		for i := range n {
			if i > 0 {
				rec.WriteByte(',')
			}
			fmt.Fprintf(&rec, "%d", i)
		}
		rec.WriteString("]}")
		for i := range 50 {
			fmt.Fprintf(&rec, `,{"name":"ingest ordinary %d","start_time_unix_nano":"%d","chunk_offsets_ms":[100,150,200]}`, i, start)
		}
		rec.WriteString("]")
		ir := send(t, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/v1/streams", ingestPort), map[string]string{"Content-Type": "application/json"}, &rec)
		require.Equal(t, http.StatusOK, ir.status, "%s", ir.body)

		assertElided(t, waitSpan(t, sink, "chat hundred-thousand"), n)
		assertElided(t, waitSpan(t, sink, "ingest hundred-thousand"), n)
		for i := range 50 {
			waitSpan(t, sink, fmt.Sprintf("ingest ordinary %d", i))
		}
	})
}

func waitSpan(t *testing.T, sink *harness.Sink, name string) ptrace.Span {
	t.Helper()
	var sp ptrace.Span
	eventually(t, 30*time.Second, "span "+name+" at the sink", func() error {
		var ok bool
		if sp, ok = sink.Span(name); !ok {
			return errNotYet
		}
		return nil
	})
	return sp
}

// rawRequest writes a request as given (Go's client would clean the path)
// and returns the status code of the answer.
func rawRequest(t *testing.T, addr, request string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	_, err = io.WriteString(c, request)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// refusedRequest writes a request the server may refuse before reading it
// whole: it reads the answer while it writes, and returns its status.
func refusedRequest(t *testing.T, addr, request string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	written := make(chan struct{})
	go func() {
		defer close(written)
		_, _ = io.WriteString(c, request) // fails once the server hangs up
	}()
	defer func() { <-written }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// slowBody sends a request whose body trickles in at one byte per two
// seconds and returns how long the server kept the connection open.
func slowBody(t *testing.T, addr, path string) time.Duration {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	start := time.Now()
	_, err = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nX-Collector-Token: Bearer collector-secret\r\n"+
		"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n", path)
	require.NoError(t, err)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = io.Copy(io.Discard, c)
	}()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for range 45 { // 90 s at most
		select {
		case <-closed:
			return time.Since(start)
		case <-tick.C:
			if _, err := c.Write([]byte{' '}); err != nil {
				return time.Since(start)
			}
		}
	}
	return time.Since(start)
}

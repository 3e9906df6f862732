// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// frame is one SSE event or comment as a plain client saw it.
type frame struct {
	event, data string
	comment     bool
	at          time.Time // when its terminating blank line was read
}

// isContent recognises the text content frames of the four APIs.
func (f frame) isContent() bool {
	switch {
	case strings.Contains(f.data, `"object":"text_completion"`):
		return !strings.Contains(f.data, `"text":""`) && strings.Contains(f.data, `"finish_reason":null`)
	case strings.Contains(f.data, `"object":"chat.completion.chunk"`):
		return strings.Contains(f.data, `"delta":{"content"`)
	}
	return f.event == "response.output_text.delta" || strings.Contains(f.data, `"type":"text_delta"`)
}

// lateTolerance bounds how late a scripted frame may be. Timers are precise to well under a
// millisecond; the margin is for scheduling on the shared, loaded 2-core test machine.
// The median lateness must still be a few milliseconds.
const (
	lateTolerance       = 40 * time.Millisecond
	medianLateTolerance = 5 * time.Millisecond
)

// readFrames reads SSE frames until the body ends or stop returns true.
func readFrames(t *testing.T, body io.Reader, stop func(frame) bool) ([]frame, error) {
	t.Helper()
	br := bufio.NewReader(body)
	var out []frame
	var cur frame
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return out, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			cur.at = time.Now()
			out = append(out, cur)
			if stop != nil && stop(cur) {
				return out, nil
			}
			cur = frame{}
		case strings.HasPrefix(line, ":"):
			cur.comment = true
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data += strings.TrimPrefix(line, "data: ")
		}
	}
}

func postJSON(ctx context.Context, t *testing.T, url string, body string, headers map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := testHTTPClient(t).Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

const chatStreamBody = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`

func TestScriptTimingOnTheWire(t *testing.T) {
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		t.Run(path, func(t *testing.T) {
			// A stall of the shared test machine can delay one run; a fault in fakellm fails every run.
			var problems []string
			for attempt := 1; attempt <= 3; attempt++ {
				if problems = scriptTimingRun(t, path); len(problems) == 0 {
					return
				}
				t.Logf("attempt %d: %s", attempt, strings.Join(problems, "; "))
			}
			t.Errorf("timing off in every attempt: %s", strings.Join(problems, "; "))
		})
	}
}

// scriptTimingRun streams one scripted response; it asserts what load cannot change and returns
// the precision problems, which load can cause.
func scriptTimingRun(t *testing.T, path string) []string {
	srv, hs := startServer(t, Config{})
	script := `{"ttft_ms":30,"gaps_ms":[10,10,300,10],"keepalive_every_ms":80}`
	resp := postJSON(testContext(t), t, hs.URL+path, chatStreamBody, map[string]string{HeaderScript: script})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream; charset=utf-8", resp.Header.Get("Content-Type"))
	frames, err := readFrames(t, resp.Body, nil)
	require.ErrorIs(t, err, io.EOF)
	rec := waitOne(t, srv)
	assert.True(t, rec.Completed)
	assert.Len(t, frames, rec.Frames)

	var problems []string
	want := []float64{30, 40, 50, 350, 360}
	t.Logf("chunk offsets %.2f ms, planned %v ms", rec.ChunkOffsetsMillis, want)
	require.Len(t, rec.ChunkOffsetsMillis, len(want))
	late := make([]float64, len(want))
	for i, w := range want {
		late[i] = rec.ChunkOffsetsMillis[i] - w
		assert.GreaterOrEqual(t, rec.ChunkOffsetsMillis[i], w, "chunk %d is early", i+1)
		if late[i] >= float64(lateTolerance/time.Millisecond) {
			problems = append(problems, fmt.Sprintf("chunk %d late by %.2f ms", i+1, late[i]))
		}
	}
	slices.Sort(late)
	if m := late[len(late)/2]; m >= float64(medianLateTolerance/time.Millisecond) {
		problems = append(problems, fmt.Sprintf("median lateness %.2f ms", m))
	}
	var received []time.Time
	for _, f := range frames {
		if f.isContent() {
			received = append(received, f.at)
		}
	}
	require.Len(t, received, len(want))
	for i := range received {
		// Each frame is flushed on its own: the client sees it as soon as it was sent.
		if lag := received[i].Sub(rec.ChunkTimes[i]); lag >= lateTolerance {
			problems = append(problems, fmt.Sprintf("chunk %d reached the client %v after it was flushed", i+1, lag))
		}
	}
	// The 300 ms silence holds keepalives at about 80, 160 and 240 ms; the real Anthropic ping
	// after the first block opens comes first.
	keepalives := rec.KeepaliveTimes
	if path == "/v1/messages" {
		require.NotEmpty(t, keepalives)
		assert.True(t, keepalives[0].Before(rec.ChunkTimes[0]))
		keepalives = keepalives[1:]
	}
	if len(keepalives) != 3 {
		problems = append(problems, fmt.Sprintf("%d keepalives in the silence, want 3", len(keepalives)))
	}
	for _, k := range keepalives {
		assert.True(t, k.After(rec.ChunkTimes[2]) && k.Before(rec.ChunkTimes[3]), "keepalive at %v outside the silence", k.Sub(rec.Start))
	}
	return problems
}

func TestClientDisconnectStopsTheStream(t *testing.T) {
	for _, path := range []string{"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"} {
		t.Run(path, func(t *testing.T) {
			srv, hs := startServer(t, Config{})
			ctx, cancel := context.WithCancel(testContext(t))
			defer cancel()
			// A 60 s silence after the second chunk, with keepalives: only the disconnect can end it.
			script := `{"ttft_ms":0,"gaps_ms":[0,60000,0],"keepalive_every_ms":5}`
			resp := postJSON(ctx, t, hs.URL+path, chatStreamBody, map[string]string{HeaderScript: script})
			contents := 0
			_, err := readFrames(t, resp.Body, func(f frame) bool {
				if f.isContent() {
					contents++
				}
				return contents == 2
			})
			require.NoError(t, err)
			cancelled := time.Now()
			cancel()

			rec := waitOne(t, srv)
			assert.True(t, rec.Disconnected)
			assert.False(t, rec.Completed)
			assert.Equal(t, 2, rec.Chunks())
			assert.WithinDuration(t, cancelled, rec.DisconnectedAt, 200*time.Millisecond)
			assert.WithinDuration(t, cancelled, rec.End, 200*time.Millisecond)
		})
	}
}

func TestFakeClockDrivesTheStream(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(t0)
	srv, hs := startServer(t, Config{Clock: clock, Profile: `{"ttft_ms":1000,"gaps_ms":[2000,0]}`})
	ctx := testContext(t)
	done := make(chan []byte, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/v1/chat/completions", strings.NewReader(chatStreamBody))
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			done <- nil
			return
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		done <- b
	}()
	require.NoError(t, clock.BlockUntilContext(ctx, 1)) // waiting for the first token
	clock.Advance(time.Second)
	require.NoError(t, clock.BlockUntilContext(ctx, 1)) // waiting through the 2 s gap
	clock.Advance(2 * time.Second)
	body := <-done
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()

	rec := waitOne(t, srv)
	assert.Equal(t, []time.Time{t0.Add(time.Second), t0.Add(3 * time.Second), t0.Add(3 * time.Second)}, rec.ChunkTimes)
	assert.Equal(t, []float64{1000, 3000, 3000}, rec.ChunkOffsetsMillis)
	assert.Equal(t, t0, rec.Start)
	assert.Contains(t, string(body), `"created":`+strconv.FormatInt(t0.Unix(), 10))
	assert.Equal(t, srv.Sent(0), body)
}

func TestDeterministicBySeed(t *testing.T) {
	run := func(seed uint64, profile string) ([]Request, [][]byte) {
		clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		srv, hs := startServer(t, Config{Seed: seed, Clock: clock, Profile: profile, Chunks: 6})
		var bodies [][]byte
		for _, path := range []string{"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"} {
			resp := postJSON(testContext(t), t, hs.URL+path, chatStreamBody, nil)
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			bodies = append(bodies, b)
		}
		reqs, err := srv.WaitFor(testContext(t), 4)
		require.NoError(t, err)
		for i := range reqs {
			assert.Equal(t, bodies[i], srv.Sent(i))
		}
		return reqs, bodies
	}
	zeroDelays := `{"ttft_ms":0}`
	reqsA, bodiesA := run(42, zeroDelays)
	reqsB, bodiesB := run(42, zeroDelays)
	reqsC, bodiesC := run(43, zeroDelays)
	assert.Equal(t, bodiesA, bodiesB)
	for i := range bodiesA {
		assert.NotEqual(t, bodiesA[i], bodiesC[i])
		assert.Equal(t, reqsA[i].ResponseID, reqsB[i].ResponseID)
		assert.NotEqual(t, reqsA[i].ResponseID, reqsC[i].ResponseID)
	}
	// Successive requests of one server differ.
	assert.NotEqual(t, reqsA[0].Text, reqsA[3].Text)

	// The named profiles' timing is a function of the seed too.
	plan := func(seed uint64) Plan {
		srv, err := New(Config{Seed: seed, Profile: ProfileStall, TimeFactor: fastFactor})
		require.NoError(t, err)
		st, err := srv.steering(http.Header{}, "")
		require.NoError(t, err)
		return st.profile.plan(newRequestRand(st.seed, 0), st.chunks, srv.cfg.TimeFactor)
	}
	first, again := plan(5), plan(5)
	assert.Equal(t, first, again, "the same seed plans the same stream")
	assert.NotEqual(t, plan(5), plan(6))
}

func TestRequestLogEndpoint(t *testing.T) {
	srv, hs := startServer(t, Config{Profile: `{"ttft_ms":1,"gaps_ms":[1,1]}`})
	client := testHTTPClient(t)
	for range 2 {
		resp := postJSON(testContext(t), t, hs.URL+"/v1/chat/completions", chatStreamBody, nil)
		_, err := io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
	}
	_, err := srv.WaitFor(testContext(t), 2)
	require.NoError(t, err)

	resp, err := client.Get(hs.URL + RequestsPath)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var logged []Request
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&logged))
	require.Len(t, logged, 2)
	for i, r := range logged {
		assert.Equal(t, i, r.Seq)
		assert.Equal(t, "/v1/chat/completions", r.Path)
		assert.Equal(t, "chat.completions", r.API)
		assert.Equal(t, "gpt-4o", r.Model)
		assert.Equal(t, ProfileScript, r.Profile)
		assert.Len(t, r.ChunkTimes, 3)
		assert.Len(t, r.ChunkOffsetsMillis, 3)
		assert.Equal(t, []time.Duration{time.Millisecond, time.Millisecond}, r.Plan.Gaps)
		assert.True(t, r.Completed)
		assert.Equal(t, http.StatusOK, r.Status)
	}

	body, err := client.Get(hs.URL + RequestsPath + "/1/body")
	require.NoError(t, err)
	defer func() { _ = body.Body.Close() }()
	b, err := io.ReadAll(body.Body)
	require.NoError(t, err)
	assert.Equal(t, srv.Sent(1), b)
	assert.True(t, bytes.HasSuffix(b, sseDone))

	missing, err := client.Get(hs.URL + RequestsPath + "/7/body")
	require.NoError(t, err)
	defer func() { _ = missing.Body.Close() }()
	assert.Equal(t, http.StatusNotFound, missing.StatusCode)

	req, err := http.NewRequest(http.MethodDelete, hs.URL+RequestsPath, nil)
	require.NoError(t, err)
	del, err := client.Do(req)
	require.NoError(t, err)
	defer func() { _ = del.Body.Close() }()
	assert.Equal(t, http.StatusNoContent, del.StatusCode)
	assert.Empty(t, srv.Requests())
	assert.Nil(t, srv.Sent(0))

	resp3 := postJSON(testContext(t), t, hs.URL+"/v1/chat/completions", chatStreamBody, nil)
	_, err = io.Copy(io.Discard, resp3.Body)
	require.NoError(t, err)
	rec := waitOne(t, srv)
	assert.Equal(t, 0, rec.Seq, "the sequence restarts after a reset")
}

func TestWaitForHonoursContext(t *testing.T) {
	srv, err := New(Config{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	reqs, err := srv.WaitFor(ctx, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Empty(t, reqs)
}

func TestBadRequestsGetProviderErrors(t *testing.T) {
	srv, hs := startServer(t, Config{})
	for _, tc := range []struct {
		name, path, body string
		headers          map[string]string
		status           int
		want             string
	}{
		{"unknown profile", "/v1/chat/completions", chatStreamBody, map[string]string{HeaderProfile: "nope"}, 400, `unknown profile \"nope\"`},
		{"bad script", "/v1/chat/completions", chatStreamBody, map[string]string{HeaderScript: `{"ttft_ms":-1}`}, 400, "ttft_ms must be between"},
		{"unknown script field", "/v1/messages", chatStreamBody, map[string]string{HeaderScript: `{"ttft":1}`}, 400, `unknown field \"ttft\"`},
		{"bad chunks", "/v1/chat/completions", chatStreamBody, map[string]string{HeaderChunks: "0"}, 400, "X-Fakellm-Chunks"},
		{"bad seed", "/v1/responses", chatStreamBody, map[string]string{HeaderSeed: "-3"}, 400, "X-Fakellm-Seed"},
		{"bad content", "/v1/chat/completions", chatStreamBody, map[string]string{HeaderContent: "image"}, 400, "content must be one of"},
		{"no model", "/v1/chat/completions", `{"stream":true}`, nil, 400, "model"},
		{"not json", "/v1/messages", `{`, nil, 400, "could not parse"},
		{"too large", "/v1/chat/completions", `{"model":"m","pad":"` + strings.Repeat("x", maxRequestBody) + `"}`, nil, 413, "exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.Reset()
			resp := postJSON(testContext(t), t, hs.URL+tc.path, tc.body, tc.headers)
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.status, resp.StatusCode)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			assert.Contains(t, string(b), tc.want)
			if tc.path == "/v1/messages" {
				var e anthropicError
				require.NoError(t, json.Unmarshal(b, &e))
				assert.Equal(t, "error", e.Type)
				assert.NotEmpty(t, e.Error.Type)
			} else {
				var e openAIError
				require.NoError(t, json.Unmarshal(b, &e))
				assert.NotEmpty(t, e.Error.Message)
			}
			rec := waitOne(t, srv)
			assert.Equal(t, tc.status, rec.Status)
			assert.NotEmpty(t, rec.Error)
			assert.Empty(t, rec.ChunkTimes)
		})
	}
}

func TestUnknownPathIs404(t *testing.T) {
	srv, hs := startServer(t, Config{})
	resp := postJSON(testContext(t), t, hs.URL+"/v1/embeddings", `{}`, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	oc := openAIClient(t, hs)
	_, err := oc.Models.List(testContext(t))
	var oerr *openai.Error
	require.ErrorAs(t, err, &oerr)
	assert.Equal(t, http.StatusNotFound, oerr.StatusCode)
	assert.Empty(t, srv.Requests(), "only API requests are recorded")
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"profile", Config{Profile: "fast"}, `unknown profile "fast"`},
		{"script", Config{Profile: `{"status":200}`}, "status must be an HTTP error status"},
		{"time factor", Config{TimeFactor: -1}, "time factor must be a positive number"},
		{"chunks", Config{Chunks: MaxChunks + 1}, "chunks must be between 1 and"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := New(Config{Profile: `{"ttft_ms":1}`, TimeFactor: 0.5, Chunks: 3})
	assert.NoError(t, err)
}

func TestServesOverHTTPServerOnLoopback(t *testing.T) {
	// The shape cmd/fakellm uses: an http.Server on a loopback listener (httptest here for the port).
	srv, err := New(Config{Profile: ProfileSteady, TimeFactor: fastFactor, Chunks: 3})
	require.NoError(t, err)
	hs := httptest.NewUnstartedServer(srv)
	hs.Start()
	defer hs.Close()
	assert.True(t, strings.HasPrefix(hs.URL, "http://127.0.0.1:"))
	resp := postJSON(testContext(t), t, hs.URL+"/v1/chat/completions", chatStreamBody, nil)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, 3, strings.Count(string(b), `"delta":{"content"`))
}

func TestPathPrefixSelectsProfile(t *testing.T) {
	srv, hs := startServer(t, Config{TimeFactor: fastFactor, Chunks: 4})
	// The SDK's base URL carries the profile: nothing else about the client changes.
	oc := openAIClient(t, hs, openaioption.WithBaseURL(hs.URL+"/p/http429/v1/"))
	_, err := oc.Chat.Completions.New(testContext(t), chatParams("gpt-4o"))
	var oerr *openai.Error
	require.ErrorAs(t, err, &oerr)
	assert.Equal(t, http.StatusTooManyRequests, oerr.StatusCode)

	// A header still wins over the path.
	resp := postJSON(testContext(t), t, hs.URL+"/p/http429/v1/messages", chatStreamBody,
		map[string]string{HeaderProfile: ProfileBurst})
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)

	bad := postJSON(testContext(t), t, hs.URL+"/p/warp/v1/chat/completions", chatStreamBody, nil)
	assert.Equal(t, http.StatusBadRequest, bad.StatusCode)

	reqs, err := srv.WaitFor(testContext(t), 3)
	require.NoError(t, err)
	assert.Equal(t, ProfileHTTP429, reqs[0].Profile)
	assert.Equal(t, "/p/http429/v1/chat/completions", reqs[0].Path)
	assert.Equal(t, ProfileBurst, reqs[1].Profile)
	assert.True(t, reqs[1].Plan.Burst)
	assert.Contains(t, reqs[2].Error, `unknown profile "warp"`)
}

func TestRecordsRequestHeadersAndBody(t *testing.T) {
	srv, hs := startServer(t, Config{Profile: `{"ttft_ms":0}`, Chunks: 2})
	body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"secret prompt"}]}`
	resp := postJSON(testContext(t), t, hs.URL+"/v1/chat/completions", body, map[string]string{
		"Authorization": "Bearer sk-live", "X-Api-Key": "k", "Traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	})
	_, err := io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	rec := waitOne(t, srv)
	assert.Equal(t, "Bearer sk-live", rec.Header.Get("Authorization"), "the Go API sees what arrived")
	assert.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", rec.Header.Get("Traceparent"))
	assert.Equal(t, []byte(body), srv.Received(0))

	logResp, err := testHTTPClient(t).Get(hs.URL + RequestsPath)
	require.NoError(t, err)
	defer func() { _ = logResp.Body.Close() }()
	logged, err := io.ReadAll(logResp.Body)
	require.NoError(t, err)
	assert.NotContains(t, string(logged), "sk-live", "the log endpoint never serves credentials")
	assert.Contains(t, string(logged), "[redacted]")
	assert.Contains(t, string(logged), "0af7651916cd43dd8448eb211c80319c")
	assert.Equal(t, "Bearer sk-live", srv.Requests()[0].Header.Get("Authorization"), "redaction works on a copy")
}

func TestDiscardBodies(t *testing.T) {
	srv, hs := startServer(t, Config{Profile: `{"ttft_ms":0}`, Chunks: 2, DiscardBodies: true})
	resp := postJSON(testContext(t), t, hs.URL+"/v1/chat/completions", chatStreamBody, nil)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	rec := waitOne(t, srv)
	assert.Nil(t, srv.Sent(0))
	assert.Nil(t, srv.Received(0))
	assert.Equal(t, len(b), rec.Bytes, "the accounting stays")
	assert.Len(t, rec.ChunkTimes, 2)
}

// TestNativeAPIRejections: Gemini and Ollama requests fakellm cannot serve get a 400 in their
// provider's error format.
func TestNativeAPIRejections(t *testing.T) {
	_, hs := startServer(t, Config{TimeFactor: 0.001})
	for _, tc := range []struct{ path, body, want string }{
		{"/v1beta/models/gemini-2.5-flash:countTokens", `{}`, `"status":"INVALID_ARGUMENT"`},
		{"/v1beta/models/gemini-2.5-flash:streamGenerateContent", `{`, `"status":"INVALID_ARGUMENT"`},
		{"/api/chat", `{"messages":[]}`, `{"error":"model: field required"}`},
		{"/api/generate", `[`, `{"error":"We could not parse`},
	} {
		resp := postJSON(testContext(t), t, hs.URL+tc.path, tc.body, nil)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, tc.path)
		assert.Contains(t, string(b), tc.want, tc.path)
	}
}

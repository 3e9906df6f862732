// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

// The guard under load: many guarded streams at once, mixing every way a
// stream goes (plain, stalled, slow to its first chunk, refused with 503,
// gzip-coded, abandoned by its client), each call's spans checked against
// what the upstreams recorded. The race detector (make test runs this
// package with -race) and goleak (TestMain) watch the shared state and the
// goroutines; the figures must match the upstreams' own schedule.

// stressCase is one way a guarded call goes.
type stressCase int

const (
	stressPlain stressCase = iota
	stressStall
	stressSlowFirst
	stressRefused
	stressGzip
	stressDisconnect
	stressCases
)

func (c stressCase) String() string {
	return [...]string{"plain", "stall", "slow_first", "refused", "gzip", "disconnect"}[c]
}

// The guard's timers in the stress run, and the primary's scripts: far
// enough apart that a loaded machine under the race detector still tells a
// stall from a gap and a slow first chunk from a fast one.
const (
	stressHedgeDelay   = 150 * time.Millisecond
	stressStallTimeout = 300 * time.Millisecond
	// stressLate bounds how late the proxy may stamp a chunk after the
	// upstream flushed it, stressEarly how early: the upstream stamps once
	// its flush has returned and its goroutine runs again, and on two
	// loaded cores under the race detector the proxy has read the chunk
	// up to about 10 ms before that.
	stressLate  = 250 * time.Millisecond
	stressEarly = 30 * time.Millisecond
	// stressGzipHeader asks the primary's wrapper to gzip the response.
	stressGzipHeader = "X-Stress-Gzip"
)

func (c stressCase) script() fakellm.Script {
	gaps := []float64{2, 2, 2, 2, 2, 2}
	switch c {
	case stressStall:
		return fakellm.Script{TTFTMillis: 5, GapsMillis: []float64{2, 2, 1500, 2}}
	case stressSlowFirst:
		return fakellm.Script{TTFTMillis: 1500, GapsMillis: gaps}
	case stressRefused:
		return fakellm.Script{Status: http.StatusServiceUnavailable}
	case stressDisconnect:
		return fakellm.Script{TTFTMillis: 5, GapsMillis: []float64{2, 200, 200, 200, 200}}
	case stressGzip:
		// Longer than the hedge delay: a guard that cannot read the coded
		// bytes sees no content in time and hedges.
		return fakellm.Script{TTFTMillis: 5, GapsMillis: []float64{40, 40, 40, 40, 40}}
	}
	return fakellm.Script{TTFTMillis: 5, GapsMillis: gaps}
}

// gzipWhenAsked codes the response in gzip when the request carries
// stressGzipHeader, flushing the coder on every flush so that each chunk
// still leaves at once.
type gzipWhenAsked struct{ next http.Handler }

func (g gzipWhenAsked) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(stressGzipHeader) == "" {
		g.next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	gw := &gzipFlushWriter{ResponseWriter: w, gz: gzip.NewWriter(w)}
	g.next.ServeHTTP(gw, r)
	_ = gw.gz.Close()
}

type gzipFlushWriter struct {
	http.ResponseWriter
	gz *gzip.Writer
}

func (w *gzipFlushWriter) Write(p []byte) (int, error) { return w.gz.Write(p) }

func (w *gzipFlushWriter) Flush() {
	_ = w.gz.Flush()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// withoutScript hides the per-call script from the alternate: it answers
// every call with its own healthy default.
type withoutScript struct{ next http.Handler }

func (h withoutScript) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Header.Del(fakellm.HeaderScript)
	h.next.ServeHTTP(w, r)
}

// stressOutcome is what one call's client saw.
type stressOutcome struct {
	c      stressCase
	status int
	body   string
	err    error
}

func TestGuardStressMixedStreams(t *testing.T) {
	calls := 1000
	if testing.Short() {
		calls = 120
	}
	const concurrency = 40

	primary, err := fakellm.New(fakellm.Config{Seed: 1, Chunks: 7})
	require.NoError(t, err)
	alternate, err := fakellm.New(fakellm.Config{Seed: 2, Profile: scriptJSON(t, fakellm.Script{TTFTMillis: 5, GapsMillis: []float64{2, 2, 2, 2, 2, 2}})})
	require.NoError(t, err)
	p := httptest.NewServer(gzipWhenAsked{next: primary})
	a := httptest.NewServer(withoutScript{next: alternate})
	t.Cleanup(p.Close)
	t.Cleanup(a.Close)

	sink := new(consumertest.TracesSink)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	pc := cfg.Proxy.GetOrInsertDefault()
	pc.NetAddr.Endpoint = "127.0.0.1:0"
	pc.Upstream.Endpoint = p.URL
	gc := pc.Guard.GetOrInsertDefault()
	gc.StallTimeout = AutoDuration(stressStallTimeout)
	gc.Hedge.Delay = AutoDuration(stressHedgeDelay)
	gc.Hedge.MaxAttempts = 2
	gc.Hedge.Budget.MaxTokens = 0 // every hedge allowed: the run checks the attempts, not the budget
	alt := confighttp.NewDefaultClientConfig()
	alt.Endpoint = a.URL
	gc.Hedge.Alternates = []AlternateConfig{{ClientConfig: alt}}
	require.NoError(t, cfg.Validate())
	rcv := startReceiver(t, cfg, sink, componenttest.NewNopHost(), tel)
	proxyURL := "http://" + rcv.addrs["proxy"].String() + "/v1/chat/completions"

	tr := &http.Transport{MaxIdleConnsPerHost: concurrency}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}

	outcomes := make([]stressOutcome, calls)
	work := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := range work {
				outcomes[i] = stressCall(t.Context(), client, proxyURL, i, stressCase(i%int(stressCases)))
			}
		})
	}
	for i := range calls {
		work <- i
	}
	close(work)
	wg.Wait()

	for i, o := range outcomes {
		require.NoError(t, o.err, "call %d (%s)", i, o.c)
	}

	// Every upstream request is an attempt with a span of its own: the spans
	// are counted before they are matched.
	upstream := map[string]fakellm.Request{} // by the span id its traceparent named
	for _, srv := range []*fakellm.Server{primary, alternate} {
		for _, rec := range srv.Requests() {
			id := traceparentSpanID(t, rec.Header.Get("Traceparent"))
			_, dup := upstream[id]
			require.False(t, dup, "two upstream requests named span %s: a request no attempt counted", id)
			upstream[id] = rec
		}
	}
	require.Eventually(t, func() bool { return sink.SpanCount() >= len(upstream) }, 30*time.Second, 10*time.Millisecond,
		"a span for each of the %d upstream requests", len(upstream))
	time.Sleep(100 * time.Millisecond) // no span beyond them either
	traces := map[string][]ptrace.Span{}
	for _, td := range sink.AllTraces() {
		for i := range td.ResourceSpans().Len() {
			for j := range td.ResourceSpans().At(i).ScopeSpans().Len() {
				spans := td.ResourceSpans().At(i).ScopeSpans().At(j).Spans()
				for k := range spans.Len() {
					s := spans.At(k)
					traces[s.TraceID().String()] = append(traces[s.TraceID().String()], s)
				}
			}
		}
	}
	// Beyond them, only attempts that a loaded machine started late and that
	// lost before their upstream answered (checkStressCall): each is a loser
	// with no response.
	reached := 0
	for _, spans := range traces {
		for _, s := range spans {
			if _, ok := upstream[s.SpanID().String()]; ok {
				reached++
				continue
			}
			_, answered := s.Attributes().Get(semconv.AttrHTTPStatusCode)
			assert.False(t, answered, "span %s was answered by no upstream request", s.SpanID())
			assert.Equal(t, semconv.HedgeOutcomeLoser, attr(t, s, semconv.AttrHedgeOutcome).Str(),
				"span %s has no upstream request", s.SpanID())
		}
	}
	require.Equal(t, len(upstream), reached, "one span per upstream request")
	require.Len(t, traces, calls, "one trace per call")

	perCase, lateWins := map[stressCase]int{}, map[stressCase]int{}
	for _, spans := range traces {
		c := stressCaseOf(t, spans)
		perCase[c]++
		if checkStressCall(t, c, spans, upstream) {
			lateWins[c]++
		}
	}
	for c := range stressCases {
		assert.Positive(t, perCase[c], "case %s ran", c)
		// A guard that could not read a case's content would hedge and lose
		// the primary on every call of it: a few calls only are the load's.
		assert.LessOrEqual(t, lateWins[c], max(1, perCase[c]/20),
			"case %s: calls that a late hedge won from the primary, of %d", c, perCase[c])
	}
	completeStalls := 0
	for i, o := range outcomes {
		if checkStressOutcome(t, i, o) {
			completeStalls++
		}
	}
	assert.Equal(t, lateWins[stressStall], completeStalls, "a stall call ends complete only when a late hedge won it")
}

// stressCall makes one guarded streaming call and reads what the client
// gets; a disconnecting client leaves after its second content chunk (the
// third data line: the first carries the role).
func stressCall(ctx context.Context, client *http.Client, url string, i int, c stressCase) stressOutcome {
	o := stressOutcome{c: c}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	body := fmt.Sprintf(`{"model":"stress-%s","stream":true,"messages":[{"role":"user","content":"call %d"}]}`, c, i)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		o.err = err
		return o
	}
	script, _ := json.Marshal(c.script())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(fakellm.HeaderScript, string(script))
	req.Header.Set("X-Stress-Case", c.String())
	if c == stressGzip {
		req.Header.Set(stressGzipHeader, "1") // the transport asks for gzip and decodes it
	}
	resp, err := client.Do(req)
	if err != nil {
		o.err = err
		return o
	}
	defer func() { _ = resp.Body.Close() }()
	o.status = resp.StatusCode
	if c != stressDisconnect {
		b, err := io.ReadAll(resp.Body)
		o.body, o.err = string(b), err
		return o
	}
	sc := bufio.NewScanner(resp.Body)
	for lines := 0; lines < 3 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: {") {
			lines++
		}
	}
	return o // leaves with the stream still open
}

func traceparentSpanID(t *testing.T, tp string) string {
	t.Helper()
	parts := strings.Split(tp, "-")
	require.Len(t, parts, 4, "traceparent %q", tp)
	return parts[2]
}

func stressCaseOf(t *testing.T, spans []ptrace.Span) stressCase {
	t.Helper()
	model := attr(t, spans[0], semconv.AttrRequestModel).Str()
	for c := range stressCases {
		if model == "stress-"+c.String() {
			return c
		}
	}
	t.Fatalf("no case for model %q", model)
	return 0
}

// checkStressCall checks the spans of one call: how many attempts its case
// makes, which one won, its error.type, and every chunk event against the
// moment the upstream flushed that chunk. It reports a call that a hedge
// the load started late won from the primary.
func checkStressCall(t *testing.T, c stressCase, spans []ptrace.Span, upstream map[string]fakellm.Request) (lateWin bool) {
	t.Helper()
	wantAttempts, wantWinner, wantErr := 1, 0, ""
	switch c {
	case stressSlowFirst, stressRefused:
		wantAttempts, wantWinner = 2, 1
	case stressStall:
		wantErr = "stall_timeout"
	case stressDisconnect:
		wantErr = "cancelled"
	}
	// On two cores loaded under the race detector the primary's first chunk
	// can reach the guard after the hedge delay: the hedge is then started
	// as it should be, and the alternate (its first chunk 5 ms after its
	// start) may win it, with the alternate's healthy stream; the caller
	// bounds how often.
	if len(spans) == wantAttempts+1 && wantAttempts == 1 {
		wantAttempts = 2
		for _, s := range spans {
			if attr(t, s, semconv.AttrHedgeAttempt).Int() == 1 && attr(t, s, semconv.AttrHedgeOutcome).Str() == semconv.HedgeOutcomeWinner {
				lateWin, wantWinner = true, 1
				if c != stressDisconnect {
					wantErr = ""
				}
			}
		}
	}
	if !assert.Len(t, spans, wantAttempts, "%s: attempts", c) {
		return lateWin
	}
	for _, s := range spans {
		outcome := attr(t, s, semconv.AttrHedgeOutcome).Str()
		attempt := attr(t, s, semconv.AttrHedgeAttempt).Int()
		if int(attempt) != wantWinner {
			assert.Equal(t, semconv.HedgeOutcomeLoser, outcome, "%s: attempt %d", c, attempt)
			continue
		}
		rec, ok := upstream[s.SpanID().String()]
		require.True(t, ok, "%s: the winner's span %s has no upstream request", c, s.SpanID())
		assert.Equal(t, semconv.HedgeOutcomeWinner, outcome, "%s: attempt %d", c, attempt)
		errType, _ := s.Attributes().Get(semconv.AttrErrorType)
		assert.Equal(t, wantErr, errType.Str(), "%s: error.type", c)
		got := chunkTimes(s)
		if c == stressDisconnect {
			// The client left after two chunks; the span holds what the proxy
			// read before it stopped, all of it sent by the upstream.
			require.GreaterOrEqual(t, len(got), 2, "%s: chunks", c)
			require.LessOrEqual(t, len(got), len(rec.ChunkTimes), "%s: chunks", c)
		} else {
			require.Len(t, got, len(rec.ChunkTimes), "%s: one chunk event per content chunk the upstream sent", c)
		}
		for k, at := range got {
			sent := rec.ChunkTimes[k].UnixNano()
			lag := time.Duration(at - sent)
			assert.True(t, lag >= -stressEarly && lag <= stressLate,
				"%s: chunk %d stamped %v after the upstream flushed it", c, k, lag)
		}
		if c == stressStall && !lateWin {
			assert.InDelta(t, float64(stressStallTimeout)/1e6, attr(t, s, semconv.AttrStallTimeoutMs).Double(), 0.001)
		}
	}
	return lateWin
}

// checkStressOutcome checks what the client got: a stream that ends as its
// case says, in the bytes an OpenAI client parses. It reports a stall call
// that ended complete: a late hedge won it (checkStressCall).
func checkStressOutcome(t *testing.T, i int, o stressOutcome) (completeStall bool) {
	t.Helper()
	if o.c == stressDisconnect {
		assert.Equal(t, http.StatusOK, o.status)
		return false
	}
	require.Equal(t, http.StatusOK, o.status, "call %d (%s): %s", i, o.c, o.body)
	switch o.c {
	case stressStall:
		if strings.HasSuffix(o.body, "data: [DONE]\n\n") && !strings.Contains(o.body, "stall_timeout") {
			return true
		}
		assert.Contains(t, o.body, "stall_timeout", "call %d: the guard's error frame", i)
		assert.NotContains(t, o.body, "data: [DONE]", "call %d: a cut stream does not end as complete", i)
	default:
		assert.True(t, strings.HasSuffix(o.body, "data: [DONE]\n\n"), "call %d (%s): a complete stream", i, o.c)
	}
	return false
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedge

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/streamstall/streamstall/internal/advice"
	"github.com/streamstall/streamstall/internal/hedgecore"
	"github.com/streamstall/streamstall/internal/semconv"
)

// advisor is an httptest hedge advisor whose answer the test sets.
type advisor struct {
	srv    *httptest.Server
	answer atomic.Value // string body; "" answers 500
	hits   atomic.Int64
	hang   atomic.Bool // hang until the client gives up
}

func newAdvisor(t *testing.T, body string) *advisor {
	a := &advisor{}
	a.answer.Store(body)
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.hits.Add(1)
		assert.Equal(t, advice.Path, r.URL.Path)
		assert.Equal(t, "openai", r.URL.Query().Get("provider"))
		if a.hang.Load() {
			<-r.Context().Done()
			return
		}
		body := a.answer.Load().(string)
		if body == "" {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(a.srv.Close)
	return a
}

const fleetBody = `{"window_s": 600, "advice": [
  {"provider": "openai", "model": "a-model", "samples": 900, "censored": 120,
   "ttft_ms": {"p50": 20, "p90": 35, "p95": 40, "p99": 80}, "gap_ms": {"p99": 5, "p999": 50},
   "hedge_delay_ms": 40, "stall_after_ms": 50},
  {"provider": "openai", "model": "b-model", "samples": 12, "censored": 0, "ttft_ms": {"p50": 20}, "gap_ms": {}}]}`

func TestAdviceFleetDelayFromTheFirstCall(t *testing.T) {
	adv := newAdvisor(t, fleetBody)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()

	clock := clockwork.NewFakeClockAt(time.Unix(1_700_000_000, 0))
	a, b := newPipeSource("a"), newPipeSource("b")
	h, err := New([]Source{a, b}, Delay(100*time.Millisecond), withClock(clock), TracerProvider(tp), Advice(adv.srv.URL))
	require.NoError(t, err)
	defer h.Close()
	assert.Equal(t, int64(1), adv.hits.Load(), "New fetched once")

	c := consume(t, h, hello)
	recv(t, a.opened)
	blockUntil(t, clock, 2) // the advice ticker and the hedge timer
	clock.Advance(40 * time.Millisecond)
	pb := recv(t, b.opened)
	pb.events <- text("hi")
	c.next(t)
	pb.events <- Event{Type: EventDone}
	require.NoError(t, c.end(t))

	stubs := exp.GetSpans()
	primary, hedge := attempt(t, stubs, 0), attempt(t, stubs, 1)
	assert.Equal(t, semconv.HedgeDelaySourceFleet, attr(t, primary, semconv.AttrHedgeDelaySource).AsString())
	assert.InDelta(t, 40.0, attr(t, primary, semconv.AttrHedgeDelayMs).AsFloat64(), 1e-9)
	assert.Equal(t, semconv.HedgeDelaySourceFallback, attr(t, hedge, semconv.AttrHedgeDelaySource).AsString(),
		"b-model's advice has no recommendation")
	assert.InDelta(t, 100.0, attr(t, hedge, semconv.AttrHedgeDelayMs).AsFloat64(), 1e-9)
}

func TestAdviceKeepsTheLastGoodAdvice(t *testing.T) {
	adv := newAdvisor(t, fleetBody)
	clock := clockwork.NewFakeClock()
	a := newPipeSource("a")
	h, err := New([]Source{a}, withClock(clock), Advice(adv.srv.URL+"/", AdviceInterval(time.Minute), AdviceTimeout(50*time.Millisecond)))
	require.NoError(t, err)
	defer h.Close()
	d, src := h.policy.DelayFrom(0)
	assert.Equal(t, hedgecore.DelayFleet, src)
	assert.Equal(t, int64(40*time.Millisecond), d)

	refreshed := func(n int) error {
		t.Helper()
		blockUntil(t, clock, 1)
		clock.Advance(time.Minute)
		require.Eventually(t, func() bool { done, _ := h.advice.status(); return done >= n }, 5*time.Second, time.Millisecond)
		_, err := h.advice.status()
		return err
	}

	adv.answer.Store("") // the advisor fails
	require.ErrorContains(t, refreshed(2), "the advisor answered 500")
	_, src = h.policy.DelayFrom(0)
	assert.Equal(t, hedgecore.DelayFleet, src, "the last good advice is kept")

	adv.answer.Store(fleetBody)
	adv.hang.Store(true) // the advisor hangs: the timeout gives up
	require.ErrorIs(t, refreshed(3), context.DeadlineExceeded)
	_, src = h.policy.DelayFrom(0)
	assert.Equal(t, hedgecore.DelayFleet, src)
	adv.hang.Store(false)

	adv.answer.Store(`{"window_s": 600, "advice": []}`) // the series is gone: local learning again
	require.NoError(t, refreshed(4))
	_, src = h.policy.DelayFrom(0)
	assert.Equal(t, hedgecore.DelayFallback, src)
	assert.Equal(t, int64(4), adv.hits.Load())
}

func TestAdviceUnreachableNeverFailsACall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())

	src := instantSource{}
	h, err := New([]Source{src}, Advice(url, AdviceTimeout(100*time.Millisecond)))
	require.NoError(t, err)
	defer h.Close()
	_, err = h.advice.status()
	require.Error(t, err)
	res, err := h.Complete(context.Background(), hello)
	require.NoError(t, err)
	assert.Equal(t, "hello", res.Text)
	_, from := h.policy.DelayFrom(0)
	assert.Equal(t, hedgecore.DelayFallback, from)
	h.Close() // twice: a no-op
}

func TestAdviceValidation(t *testing.T) {
	for _, url := range []string{"", "ftp://x", "http://", "::"} {
		_, err := New([]Source{newPipeSource("a")}, Advice(url))
		require.Error(t, err, url)
	}
	_, err := New([]Source{newPipeSource("a")}, Advice("http://localhost:1", AdviceInterval(0)))
	require.ErrorContains(t, err, "advice interval and timeout must be positive")
}

func TestAdviceURL(t *testing.T) {
	a, b := newPipeSource("a"), newPipeSource("b") // both openai, models a-model and b-model
	url := func(base string, sources ...Source) string { return (&adviceConfig{url: base}).adviceURL(sources) }
	assert.Equal(t, "http://c:4320/v1/hedge/advice?model=a-model&provider=openai", url("http://c:4320", a))
	assert.Equal(t, "http://c:4320/v1/hedge/advice?provider=openai", url("http://c:4320/", a, b))
	assert.Equal(t, "http://c:4320/v1/hedge/advice", url("http://c:4320", a, instantSourceOf("anthropic")))
	assert.Equal(t, "https://c/x/advice?provider=openai", url("https://c/x/advice?provider=openai", a, b), "a full URL is used as given")
}

func instantSourceOf(provider string) Source { return providerSource{instantSource{}, provider} }

type providerSource struct {
	instantSource
	provider string
}

func (s providerSource) Provider() string { return s.provider }

func TestMatchWeightsEntriesBySamples(t *testing.T) {
	d := func(v float64) *float64 { return &v }
	entries := []advice.Entry{
		{Provider: "openai", Model: "m", Samples: 300, HedgeDelayMs: d(100)},
		{Provider: "OpenAI", Model: "m", Samples: 100, HedgeDelayMs: d(200)},
		{Provider: "openai", Model: "m", Samples: 50},                         // no recommendation
		{Provider: "openai", Model: "other", Samples: 50, HedgeDelayMs: d(1)}, // another model
		{Provider: "openai", Model: "m", Samples: 50, HedgeDelayMs: d(-5)},    // hostile
	}
	got := match(entries, "openai", "m")
	require.NotNil(t, got)
	assert.Equal(t, int64(125*time.Millisecond), got.Delay)
	assert.Equal(t, int64(400), got.Samples)
	assert.Nil(t, match(entries, "anthropic", "m"))
}

func TestDelaySourceNamesAreTheContract(t *testing.T) {
	assert.Equal(t, semconv.HedgeDelaySourceFleet, hedgecore.DelayFleet.String())
	assert.Equal(t, semconv.HedgeDelaySourceLocal, hedgecore.DelayLocal.String())
	assert.Equal(t, semconv.HedgeDelaySourceFallback, hedgecore.DelayFallback.String())
}

// instantSource answers "hello" at once.
type instantSource struct{}

func (instantSource) Name() string     { return "instant" }
func (instantSource) Provider() string { return "openai" }
func (instantSource) Model() string    { return "m" }
func (instantSource) Open(context.Context, *Request) (Stream, error) {
	return &instantStream{}, nil
}

type instantStream struct{ n int }

func (s *instantStream) Recv() (Event, error) {
	s.n++
	switch s.n {
	case 1:
		return text("hello"), nil
	case 2:
		return Event{Type: EventDone}, nil
	}
	return Event{}, io.EOF
}

func (s *instantStream) Close() error { return nil }

// TestAdviceHTTPClientReachesATLSAdvisor: an advisor behind TLS with a
// certificate of its own is reached through the client given, and only
// through it: the default client does not trust the certificate.
func TestAdviceHTTPClientReachesATLSAdvisor(t *testing.T) {
	var auth atomic.Value
	auth.Store("")
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(fleetBody))
	}))
	defer srv.Close()

	h, err := New([]Source{newPipeSource("a")}, Advice(srv.URL, AdviceTimeout(time.Second)))
	require.NoError(t, err)
	_, err = h.advice.status()
	require.Error(t, err, "the default client does not trust the advisor's certificate")
	_, src := h.policy.DelayFrom(0)
	assert.Equal(t, hedgecore.DelayFallback, src)
	h.Close()

	client := srv.Client()
	client.Transport = bearer{token: "advice-token", next: client.Transport}
	h, err = New([]Source{newPipeSource("a")}, Advice(srv.URL, AdviceTimeout(time.Second), AdviceHTTPClient(client)))
	require.NoError(t, err)
	defer h.Close()
	_, err = h.advice.status()
	require.NoError(t, err)
	d, src := h.policy.DelayFrom(0)
	assert.Equal(t, hedgecore.DelayFleet, src)
	assert.Equal(t, int64(40*time.Millisecond), d)
	assert.Equal(t, "Bearer advice-token", auth.Load(), "the client's transport adds the credentials")
}

// bearer adds a bearer token to every request, as an auth transport does.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/llmstream"
)

// The providers' own error bodies (from their API references).
const (
	openAIQuota = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.",` +
		`"type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	openAIRate = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on requests per min (RPM): Limit 500.",` +
		`"type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	anthropicRate    = `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`
	anthropicBilling = `{"type":"error","error":{"type":"billing_error","message":"Your credit balance is too low to access the Anthropic API."}}`
	geminiQuota      = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.",` +
		`"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure",` +
		`"violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"13s"}]}}`
	vertexCapacity = `{"error":{"code":429,"message":"Resource exhausted. Please try again later.","status":"RESOURCE_EXHAUSTED"}}`
	ollamaError    = `{"error":"model is busy"}`
)

func TestQuotaErrorNamesQuotasNotRates(t *testing.T) {
	for body, want := range map[string]bool{
		openAIQuota:      true,
		openAIRate:       false,
		anthropicRate:    false,
		anthropicBilling: true,
		geminiQuota:      true,
		vertexCapacity:   false,
		ollamaError:      false,
		`not json`:       false,
		``:               false,
		`{"error":null}`: false,
		`[1,2]`:          false,
	} {
		assert.Equal(t, want, quotaError([]byte(body)), "%s", body)
	}
}

func TestCredentialRefused(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   bool
	}{
		{http.StatusUnauthorized, `{"error":{"code":"invalid_api_key"}}`, true},
		{http.StatusPaymentRequired, anthropicBilling, true},
		{http.StatusForbidden, `{}`, true},
		{http.StatusTooManyRequests, openAIQuota, true},
		{http.StatusTooManyRequests, openAIRate, false},
		{http.StatusTooManyRequests, geminiQuota, true},
		{http.StatusServiceUnavailable, openAIQuota, false},
		{http.StatusBadRequest, openAIQuota, true}, // an account's limit, whatever the status
		{http.StatusBadRequest, `{"error":{"message":"max_tokens is too large","type":"invalid_request_error","code":"invalid_value"}}`, false},
		{http.StatusBadRequest, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}`, true},
		{http.StatusBadRequest, `{"error":{"message":"Billing hard limit has been reached","type":"invalid_request_error","code":"billing_hard_limit_reached"}}`, true},
	} {
		assert.Equal(t, tc.want, credentialRefused(tc.status, []byte(tc.body)), "%d %.60s", tc.status, tc.body)
	}
}

// closeCounter counts the closes of a body.
type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// TestReadErrorBodyPutsTheBodyBack: the error answer's body is read into
// memory (its connection then goes back to the pool) and still reaches the
// client as the upstream sent it; past the bound the rest follows.
func TestReadErrorBodyPutsTheBodyBack(t *testing.T) {
	long := `{"error":{"code":"insufficient_quota","pad":"` + strings.Repeat("x", maxErrorBody) + `"}}`
	for _, body := range []string{openAIQuota, "", long} {
		rc := &closeCounter{Reader: strings.NewReader(body)}
		resp := &http.Response{StatusCode: http.StatusTooManyRequests, Body: rc}
		read := readErrorBody(resp)
		whole := len(body) <= maxErrorBody
		if whole {
			assert.Equal(t, body, string(read))
			assert.Equal(t, 1, rc.closed, "read to its end, the upstream body is done with")
		} else {
			assert.Len(t, read, maxErrorBody+1)
			assert.Zero(t, rc.closed)
		}
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, body, string(got), "the client gets the body as the upstream sent it")
		require.NoError(t, resp.Body.Close())
	}
	assert.False(t, credentialRefused(http.StatusTooManyRequests, []byte(long)[:maxErrorBody+1]), "a cut body names nothing")
}

// TestReadErrorBodyWaitsBounded: an upstream that holds its error body
// delays the answer by errorBodyWait at most; the client gets what came.
func TestReadErrorBodyWaitsBounded(t *testing.T) {
	pr, pw := io.Pipe()
	go func() { _, _ = pw.Write([]byte(`{"error":`)) }()
	resp := &http.Response{StatusCode: http.StatusServiceUnavailable, Body: pr}
	read := readErrorBody(resp) // returns: errorBodyWait closed the body
	assert.Equal(t, `{"error":`, string(read))
	got, err := io.ReadAll(resp.Body)
	assert.Equal(t, `{"error":`, string(got))
	assert.ErrorIs(t, err, io.ErrClosedPipe)
}

func TestIsCredentialHeader(t *testing.T) {
	for _, h := range []string{
		"Authorization", "authorization", "Proxy-Authorization", "Cookie", "x-api-key", "api-key", "X-Goog-Api-Key",
		"x-goog-user-project", "OpenAI-Organization", "openai-project", "anthropic-workspace-id",
		"x-portkey-api-key", "Ocp-Apim-Subscription-Key",
		"cf-aig-authorization", "Helicone-Auth", "X-Auth-Token", "x_auth_token", "X-Amz-Security-Token", "X-Client-Secret",
		"X-Firebase-AppCheck", "Cf-Access-Jwt-Assertion", "X-Goog-Iap-Jwt-Assertion", "Signature", "X-Forwarded-Client-Cert",
		"X-SSL-Client-Cert", "X-Client-Credentials",
	} {
		assert.True(t, IsCredentialHeader(h), h)
	}
	for _, h := range []string{
		"Content-Type", "Idempotency-Key", "anthropic-version", "anthropic-beta", "OpenAI-Beta", "Traceparent", "X-Stainless-Retry-Count",
		"X-Ratelimit-Remaining-Tokens", "X-Author",
	} {
		assert.False(t, IsCredentialHeader(h), h)
	}
}

// clientCredentials are what a client of every SDK may send.
var clientCredentials = map[string]string{
	"Authorization": "Bearer sk-client", "X-Api-Key": "sk-ant-client", "Api-Key": "azure-client",
	"X-Goog-Api-Key": "goog-client", "X-Goog-User-Project": "client-project", "Cookie": "session=client",
	"Openai-Organization": "org-client", "Openai-Project": "proj-client", "Anthropic-Workspace-Id": "wrk-client",
}

// newCredentialHarness is newHarness with the alternate's credential
// settings of alt.
func newCredentialHarness(t *testing.T, r Rule, alt Upstream) *harness {
	h := &harness{clock: clockwork.NewFakeClockAt(time.Unix(1_700_000_000, 0)), primary: newScripted(), alt: newScripted()}
	alt.URL, _ = url.Parse("http://alternate.example:8443/base")
	alt.Transport, alt.Address, alt.Port = h.alt, "alternate.example", 8443
	r.Alternates = []Upstream{alt}
	h.guard = New(Settings{Default: r, Clock: h.clock, AutoStall: AutoStall{Multiple: 10, Floor: 30 * time.Second, MinSamples: 20}})
	h.stopping, h.stop = context.WithCancel(context.Background())
	t.Cleanup(h.stop)
	return h
}

// credentialCall is harness.call with the client's credential headers.
func (h *harness) credentialCall(t *testing.T) (*Session, <-chan result) {
	header := http.Header{"Proxy-Authorization": {"Basic c2VjcmV0"}, "Idempotency-Key": {"call-1"}}
	for k, v := range clientCredentials {
		header.Set(k, v)
	}
	return h.callOf(t, "openai", "gpt-4o", llmstream.ShapeChatCompletions, "/v1/chat/completions", `{"model":"gpt-4o","stream":true}`, header)
}

// callOf starts a guarded call of shape to model of provider, to target (a
// path and query) with body and header; the result comes on the channel.
func (h *harness) callOf(t *testing.T, provider, model string, shape llmstream.Shape, target, body string, header http.Header) (*Session, <-chan result) {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	in, err := url.Parse(target)
	require.NoError(t, err)
	s := h.guard.NewSession(h.stopping, provider, model, shape, in, []byte(body), h.clock.Now().UnixNano())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://primary.example"+in.RequestURI(), strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	out := make(chan result, 1)
	go func() {
		resp, err := s.RoundTrip(req, h.primary)
		out <- result{resp, err}
	}()
	return s, out
}

func TestAttemptsAreNeverReplayable(t *testing.T) {
	h := newHarness(t, Rule{MaxAttempts: 3})
	s, out := h.credentialCall(t)
	for _, up := range []*scripted{h.primary, h.alt, h.primary} {
		uc := up.next(t)
		_, err := io.ReadAll(uc.req.Body) // as the transport sends it
		require.NoError(t, err)
		_, err = uc.req.GetBody()
		assert.Error(t, err, "net/http replays a request whose GetBody works (and Idempotency-Key) on every reused connection that dies")
		assert.Equal(t, int64(len(`{"model":"gpt-4o","stream":true}`)), uc.req.ContentLength)
		assert.Nil(t, uc.req.Trailer)
		uc.status(http.StatusServiceUnavailable, `{}`)
	}
	r := wait(t, out)
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusServiceUnavailable, r.resp.StatusCode)
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
}

func TestClientCredentialsReachOnlyThePrimary(t *testing.T) {
	for _, forward := range []bool{false, true} {
		h := newCredentialHarness(t, Rule{MaxAttempts: 2}, Upstream{ForwardClientCredentials: forward})
		s, out := h.credentialCall(t)
		p := h.primary.next(t)
		for k, v := range clientCredentials {
			assert.Equal(t, v, p.req.Header.Get(k), "the primary gets the client's %s", k)
		}
		assert.Empty(t, p.req.Header.Values("Proxy-Authorization"), "Proxy-Authorization goes nowhere")
		p.status(http.StatusServiceUnavailable, `{}`)
		a := h.alt.next(t)
		for k, v := range clientCredentials {
			if forward {
				assert.Equal(t, v, a.req.Header.Get(k), "forward_client_credentials: the alternate gets the client's %s", k)
			} else {
				assert.Empty(t, a.req.Header.Values(k), "the alternate got the client's %s", k)
			}
		}
		assert.Empty(t, a.req.Header.Values("Proxy-Authorization"), "Proxy-Authorization goes nowhere")
		assert.Equal(t, "call-1", a.req.Header.Get("Idempotency-Key"), "other headers go on")
		assert.Len(t, p.req.Header, len(clientCredentials)+1, "the alternate's header changes are its own: %v", p.req.Header)
		a.stream(textFrame)
		r := wait(t, out)
		require.NoError(t, r.err)
		a.end()
		_, _ = io.Copy(io.Discard, r.resp.Body)
		require.NoError(t, r.resp.Body.Close())
		s.Finish()
	}
}

// TestRefusedCredentialIsNotServedOnTheOperators: a client whose own key
// is out of quota (or refused) gets the primary's answer as it came, never
// a stream on the alternate's key.
func TestRefusedCredentialIsNotServedOnTheOperators(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
	}{
		{http.StatusTooManyRequests, openAIQuota},
		{http.StatusUnauthorized, `{"error":{"code":"invalid_api_key","type":"invalid_request_error"}}`},
		{http.StatusForbidden, `{"error":{"type":"permission_error"}}`},
	} {
		h := newCredentialHarness(t, Rule{MaxAttempts: 3}, Upstream{OwnCredential: true})
		s, out := h.credentialCall(t)
		h.primary.next(t).status(tc.status, tc.body)
		r := wait(t, out)
		require.NoError(t, r.err)
		assert.Equal(t, tc.status, r.resp.StatusCode)
		got, err := io.ReadAll(r.resp.Body)
		require.NoError(t, err)
		assert.Equal(t, tc.body, string(got), "the primary's own answer, as it came")
		require.NoError(t, r.resp.Body.Close())
		h.alt.none(t)
		h.primary.none(t)
		s.Finish()
		assert.Equal(t, 1, s.Attempts())
	}
}

// TestRateLimitStillFailsOver: a 429 that names a rate, not a quota, is
// the provider's load and fails over as before.
func TestRateLimitStillFailsOver(t *testing.T) {
	h := newCredentialHarness(t, Rule{MaxAttempts: 2}, Upstream{OwnCredential: true})
	s, out := h.credentialCall(t)
	h.primary.next(t).status(http.StatusTooManyRequests, openAIRate)
	a := h.alt.next(t)
	a.stream(textFrame)
	r := wait(t, out)
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusOK, r.resp.StatusCode)
	a.end()
	_, _ = io.Copy(io.Discard, r.resp.Body)
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
}

func TestServeCredentialFailuresFailsOver(t *testing.T) {
	h := newCredentialHarness(t, Rule{MaxAttempts: 2}, Upstream{OwnCredential: true, ServeCredentialFailures: true})
	s, out := h.credentialCall(t)
	h.primary.next(t).status(http.StatusTooManyRequests, openAIQuota)
	a := h.alt.next(t)
	a.stream(textFrame)
	r := wait(t, out)
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusOK, r.resp.StatusCode, "the operator chose to serve refused clients")
	a.end()
	_, _ = io.Copy(io.Discard, r.resp.Body)
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
}

// TestHedgeOnTheOperatorsKeyWaitsForThePrimary: a hedge on an alternate
// with its own credential that has content before the primary answered is
// held until the primary's answer shows the client's key was not refused;
// a refusal drops it and the client gets the refusal.
func TestHedgeOnTheOperatorsKeyWaitsForThePrimary(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		h := newCredentialHarness(t, Rule{Delay: 100 * time.Millisecond, MaxAttempts: 2}, Upstream{OwnCredential: true})
		s, out := h.credentialCall(t)
		p := h.primary.next(t)
		h.blockUntil(t, 1)
		h.clock.Advance(100 * time.Millisecond)
		a := h.alt.next(t)
		a.stream(textFrame)
		pending(t, out)
		p.status(http.StatusTooManyRequests, openAIQuota)
		r := wait(t, out)
		require.NoError(t, r.err)
		assert.Equal(t, http.StatusTooManyRequests, r.resp.StatusCode)
		got, _ := io.ReadAll(r.resp.Body)
		assert.Equal(t, openAIQuota, string(got))
		require.NoError(t, r.resp.Body.Close())
		assert.ErrorIs(t, a.cancelled(t), errLoser)
		s.Finish()
	})
	t.Run("accepted", func(t *testing.T) {
		h := newCredentialHarness(t, Rule{Delay: 100 * time.Millisecond, MaxAttempts: 2}, Upstream{OwnCredential: true})
		s, out := h.credentialCall(t)
		p := h.primary.next(t)
		h.blockUntil(t, 1)
		h.clock.Advance(100 * time.Millisecond)
		a := h.alt.next(t)
		a.stream(textFrame)
		pending(t, out)
		p.stream(roleFrame) // headers: the client's key was taken
		r := wait(t, out)
		require.NoError(t, r.err)
		assert.Equal(t, textFrame, readN(t, r.resp.Body, len(textFrame)), "the hedge is committed")
		assert.ErrorIs(t, p.cancelled(t), errLoser)
		a.end()
		require.NoError(t, r.resp.Body.Close())
		s.Finish()
		assert.True(t, s.Won())
	})
}

// FuzzQuotaError: any body is read without panic, and a body that names a
// quota says so in its own words.
func FuzzQuotaError(f *testing.F) {
	for _, b := range []string{openAIQuota, openAIRate, anthropicRate, anthropicBilling, geminiQuota, vertexCapacity, ollamaError, `{"error":{"code":7}}`} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !quotaError(body) {
			return
		}
		l := bytes.ToLower(body)
		if !bytes.Contains(l, []byte("quota")) && !bytes.Contains(l, []byte("billing")) && !bytes.Contains(l, []byte(`\u`)) {
			t.Fatalf("a quota error that names none: %q", body)
		}
	})
}

// TestQueryCredentialReachesOnlyThePrimary: Gemini's API key may come in the
// query (?key=), as its REST reference shows; an alternate that does not
// forward the client's credentials gets the query without it.
func TestQueryCredentialReachesOnlyThePrimary(t *testing.T) {
	for _, forward := range []bool{false, true} {
		h := newCredentialHarness(t, Rule{MaxAttempts: 2}, Upstream{ForwardClientCredentials: forward})
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		const query = "alt=sse&key=goog-client&access_token=ya29.client&x-api-key=k&api_key=k&keep=1"
		in, _ := url.Parse("/v1beta/models/gemini-2.5-flash:streamGenerateContent?" + query)
		body := []byte(`{"contents":[]}`)
		s := h.guard.NewSession(h.stopping, "gcp.gemini", "gemini-2.5-flash", llmstream.ShapeGemini, in, body, h.clock.Now().UnixNano())
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://primary.example"+in.RequestURI(), bytes.NewReader(body))
		require.NoError(t, err)
		out := make(chan result, 1)
		go func() {
			resp, err := s.RoundTrip(req, h.primary)
			out <- result{resp, err}
		}()
		p := h.primary.next(t)
		assert.Equal(t, query, p.req.URL.RawQuery, "the primary gets the client's query")
		p.status(http.StatusServiceUnavailable, `{}`)
		a := h.alt.next(t)
		if forward {
			assert.Equal(t, query, a.req.URL.RawQuery)
		} else {
			assert.Equal(t, "alt=sse&keep=1", a.req.URL.RawQuery, "the alternate got the client's credential in the query")
		}
		a.status(http.StatusServiceUnavailable, `{}`)
		r := wait(t, out)
		require.NoError(t, r.err)
		require.NoError(t, r.resp.Body.Close())
		s.Finish()
	}
}

// TestDecodedErrorBodyReadsTheCoding: an error body is read through its
// gzip coding; one that names gzip but is plain, or names a coding the
// proxy does not decode, is read as it came, so a refusal in the clear
// still counts.
func TestDecodedErrorBodyReadsTheCoding(t *testing.T) {
	var coded bytes.Buffer
	zw := gzip.NewWriter(&coded)
	_, _ = io.WriteString(zw, openAIQuota)
	require.NoError(t, zw.Close())
	for _, tc := range []struct {
		coding string
		body   []byte
	}{
		{"gzip", coded.Bytes()},
		{"gzip", []byte(openAIQuota)},
		{"br", []byte(openAIQuota)},
		{"", []byte(openAIQuota)},
	} {
		resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{}}
		if tc.coding != "" {
			resp.Header.Set("Content-Encoding", tc.coding)
		}
		assert.True(t, credentialRefused(resp.StatusCode, decodedErrorBody(resp, tc.body)), "%q", tc.coding)
	}
}

// TestAlternateRefusalOfTheOperatorsKeyIsNotTheClients: when the call's
// last failure is an alternate refusing the credential the operator gave
// it, the client gets a 502 of the guard's own, not the alternate's answer:
// that body names the operator's key (masked) and organization, and its 401
// would tell the client its own key was refused. An alternate that forwards
// the client's credential, or answers another error, is passed on as sent.
func TestAlternateRefusalOfTheOperatorsKeyIsNotTheClients(t *testing.T) {
	const refusal = `{"error":{"message":"Incorrect API key provided: sk-proj-****wxyz. Organization org-operator.","type":"invalid_request_error","code":"invalid_api_key"}}`
	for name, tt := range map[string]struct {
		alt        Upstream
		status     int
		body       string
		wantStatus int
	}{
		"own key refused":          {Upstream{OwnCredential: true}, http.StatusUnauthorized, refusal, http.StatusBadGateway},
		"own key out of quota":     {Upstream{OwnCredential: true}, http.StatusTooManyRequests, `{"error":{"type":"insufficient_quota","message":"org-operator"}}`, http.StatusBadGateway},
		"client's key forwarded":   {Upstream{ForwardClientCredentials: true, ServeCredentialFailures: true}, http.StatusUnauthorized, refusal, http.StatusUnauthorized},
		"own key, another failure": {Upstream{OwnCredential: true}, http.StatusServiceUnavailable, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable},
	} {
		t.Run(name, func(t *testing.T) {
			h := newCredentialHarness(t, Rule{MaxAttempts: 2}, tt.alt)
			s, out := h.credentialCall(t)
			h.primary.next(t).status(http.StatusServiceUnavailable, `{}`)
			h.alt.next(t).status(tt.status, tt.body)
			r := wait(t, out)
			require.NoError(t, r.err)
			body, err := io.ReadAll(r.resp.Body)
			require.NoError(t, err)
			require.NoError(t, r.resp.Body.Close())
			s.Finish()
			assert.Equal(t, tt.wantStatus, r.resp.StatusCode)
			if tt.wantStatus == http.StatusBadGateway {
				assert.NotContains(t, string(body), "org-operator", "the operator's account stays at the proxy")
				assert.NotContains(t, string(body), "sk-proj")
				assert.Contains(t, string(body), ErrTypeAlternateRefused)
				assert.Equal(t, "application/json", r.resp.Header.Get("Content-Type"))
				assert.Equal(t, ErrTypeAlternateRefused, s.Ended())
			} else {
				assert.Equal(t, tt.body, string(body), "passed on as the alternate sent it")
				assert.Empty(t, s.Ended())
			}
		})
	}
}

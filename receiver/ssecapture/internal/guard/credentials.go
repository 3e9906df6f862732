// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/streamstall/streamstall/internal/hedgecore"
)

// Credentials follow the upstream (docs/security.md, "Credentials follow
// the upstream"): the client's credential headers reach the primary, and an
// alternate only when its configuration forwards them; an alternate with a
// credential of its own never serves a call whose client credential was
// refused for auth or quota, unless configured to.

// credentialHeaders are the request headers that carry a client's
// credential, or choose whose account a call is billed to, as the official
// SDKs send them (openai-go, anthropic-sdk-go, google.golang.org/genai and
// their Python and TypeScript siblings, Azure OpenAI).
var credentialHeaders = []string{
	"Authorization",
	"Proxy-Authorization",
	"Cookie",
	"X-Api-Key",           // Anthropic
	"Api-Key",             // Azure OpenAI
	"X-Goog-Api-Key",      // Gemini
	"X-Goog-User-Project", // the Google Cloud project billed
	"Openai-Organization",
	"Openai-Project",
	"Anthropic-Workspace-Id",
	"Anthropic-User-Profile-Id",
}

// IsCredentialHeader reports whether a request header carries a credential:
// one of credentialHeaders, any name that says it holds an API key or a
// subscription key (x-portkey-api-key, Ocp-Apim-Subscription-Key), or one
// with a word that says it holds an authorization, a token or a secret
// (the gateways' own: cf-aig-authorization, Helicone-Auth, X-Auth-Token).
func IsCredentialHeader(name string) bool {
	c := http.CanonicalHeaderKey(name)
	for _, h := range credentialHeaders {
		if c == h {
			return true
		}
	}
	l := strings.ToLower(name)
	for _, s := range []string{"api-key", "api_key", "apikey", "subscription-key"} {
		if strings.Contains(l, s) {
			return true
		}
	}
	for w := range strings.FieldsFuncSeq(l, func(r rune) bool { return r == '-' || r == '_' }) {
		if credentialWord(w) {
			return true
		}
	}
	return false
}

// credentialWord reports whether a word of a header name says the header
// holds a credential or an identity proven by one: a token, a secret, a
// signed assertion (Cloudflare Access's Cf-Access-Jwt-Assertion, Google
// IAP's X-Goog-Iap-Jwt-Assertion), an attestation (X-Firebase-AppCheck), a
// message signature (RFC 9421's Signature), a client certificate passed on
// by a TLS terminator (X-Forwarded-Client-Cert, X-SSL-Client-Cert). Whole
// words only: Idempotency-Key and the rate limit headers' "tokens" name
// something else.
func credentialWord(w string) bool {
	switch w {
	case "auth", "authorization", "authentication", "token", "secret", "password", "passwd",
		"jwt", "assertion", "appcheck", "credential", "credentials", "signature", "cert", "certificate":
		return true
	}
	return false
}

// stripCredentials removes every credential header from h.
func stripCredentials(h http.Header) {
	for name := range h {
		if IsCredentialHeader(name) {
			delete(h, name)
		}
	}
}

// stripQueryCredentials removes from u's query the parameters that carry a
// credential: Google's key and access_token (Gemini takes its API key as
// ?key=) and userProject (the project billed, the query form of
// X-Goog-User-Project, "$userProject" too), an AWS SigV4 presigned URL's
// X-Amz-* parameters, and any name IsCredentialHeader takes for one. The
// others stay as they came, in their order.
func stripQueryCredentials(u *url.URL) {
	u.RawQuery, _ = DropQueryPairs(u.RawQuery, queryCredential)
}

// DropQueryPairs returns raw, a URL's query, without the pairs whose name
// (percent-decoded, as url.Values reads it; a name that does not decode is
// taken as it is) drop says to remove, every other pair kept byte for byte
// in its order, and whether it removed any. The one query filter of the
// proxy and its guard.
func DropQueryPairs(raw string, drop func(name string) bool) (string, bool) {
	if raw == "" {
		return raw, false
	}
	pairs := strings.Split(raw, "&")
	kept := pairs[:0]
	for _, pair := range pairs {
		name, _, _ := strings.Cut(pair, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if drop(name) {
			continue
		}
		kept = append(kept, pair)
	}
	if len(kept) == strings.Count(raw, "&")+1 {
		return raw, false
	}
	return strings.Join(kept, "&"), true
}

// queryCredential reports whether a query parameter carries a credential
// (stripQueryCredentials).
func queryCredential(name string) bool {
	switch strings.ToLower(strings.TrimPrefix(name, "$")) {
	case "key", "access_token", "userproject":
		return true
	}
	return IsPresignParam(name) || IsCredentialHeader(name)
}

// presignParams are the query parameters of an AWS SigV4 presigned URL:
// X-Amz-Credential names the access key, X-Amz-Signature is the credential
// (X-Amz-Security-Token a credential by its name already).
var presignParams = []string{
	"x-amz-algorithm", "x-amz-credential", "x-amz-date", "x-amz-expires",
	"x-amz-signedheaders", "x-amz-signature", "x-amz-security-token",
}

// IsPresignParam reports whether a query parameter is one of an AWS SigV4
// presigned URL's.
func IsPresignParam(name string) bool {
	l := strings.ToLower(name)
	for _, p := range presignParams {
		if l == p {
			return true
		}
	}
	return false
}

// reachedBy reports whether a refusal of the credential of out, a request
// to the primary, is the client's: the primary has no credential of its
// own (a client without one is refused for it, and must not be served on
// an alternate's), or the client's credential reaches it, in a header the
// primary does not set itself or in the query.
func (pc *PrimaryCredential) reachedBy(out *http.Request) bool {
	if pc == nil || !pc.Own {
		return true
	}
	for name := range out.Header {
		if IsCredentialHeader(name) && !slices.ContainsFunc(pc.Headers, func(h string) bool { return strings.EqualFold(h, name) }) {
			return true
		}
	}
	for pair := range strings.SplitSeq(out.URL.RawQuery, "&") {
		name, _, _ := strings.Cut(pair, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if name != "" && queryCredential(name) {
			return true
		}
	}
	return false
}

// credentialRefused reports whether an error answer (its status, and the
// first bytes of its body) says the request's credential was refused: 401,
// 402 (Anthropic's billing_error), 403, a 429 whose error names a quota or
// billing limit rather than a rate (OpenAI's insufficient_quota, Google's
// RESOURCE_EXHAUSTED with a QuotaFailure), or a 400 that refuses the
// account rather than the request: Google's refusal of the key (the Gemini
// API answers an invalid or expired API key with 400 INVALID_ARGUMENT, its
// ErrorInfo reason API_KEY_INVALID or API_KEY_EXPIRED), a quota or billing
// limit (OpenAI's billing_hard_limit_reached), or Anthropic's account out
// of credit (an invalid_request_error whose only sign is its message:
// "Your credit balance is too low to access the Anthropic API").
func credentialRefused(status int, body []byte) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusPaymentRequired, http.StatusForbidden:
		return true
	case http.StatusTooManyRequests:
		return quotaError(body)
	case http.StatusBadRequest:
		return keyRefused(body) || quotaError(body) || creditExhausted(body)
	}
	return false
}

// creditExhausted reports whether an error body is Anthropic's refusal of
// an account without credit.
func creditExhausted(body []byte) bool {
	var v struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	return strings.Contains(strings.ToLower(v.Error.Message), "credit balance is too low")
}

// keyRefused reports whether an error body is Google's refusal of an API
// key: a google.rpc.ErrorInfo whose reason is API_KEY_INVALID or
// API_KEY_EXPIRED.
func keyRefused(body []byte) bool {
	var v struct {
		Error struct {
			Details []struct {
				Type   string `json:"@type"`
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	for _, d := range v.Error.Details {
		if strings.HasSuffix(d.Type, "google.rpc.ErrorInfo") && (d.Reason == "API_KEY_INVALID" || d.Reason == "API_KEY_EXPIRED") {
			return true
		}
	}
	return false
}

// quotaError reports whether an error body names a quota or billing limit:
// an error code or type containing "quota" or "billing" (OpenAI and the
// APIs that copy its shape), or Google's RESOURCE_EXHAUSTED carrying a
// google.rpc.QuotaFailure (Vertex AI's RESOURCE_EXHAUSTED without one is
// shared capacity, not the caller's quota).
func quotaError(body []byte) bool {
	var v struct {
		Error struct {
			Code    any    `json:"code"`
			Type    string `json:"type"`
			Status  string `json:"status"`
			Details []struct {
				Type string `json:"@type"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	e := &v.Error
	code, _ := e.Code.(string)
	for _, s := range []string{code, e.Type} {
		if l := strings.ToLower(s); strings.Contains(l, "quota") || strings.Contains(l, "billing") {
			return true
		}
	}
	if e.Status == "RESOURCE_EXHAUSTED" {
		for _, d := range e.Details {
			if strings.HasSuffix(d.Type, "google.rpc.QuotaFailure") {
				return true
			}
		}
	}
	return false
}

// checkAnswer runs once an attempt's request has its answer (resp, or none
// on a transport error). An error answer's body is read into memory
// (readErrorBody); a refused client credential is noted; on the call's
// first attempt, which carries the client's credential to the primary, the
// alternates that wait for it are cleared unless it was refused.
func (s *Session) checkAnswer(rd *reader, resp *http.Response) {
	if resp != nil && resp.StatusCode >= 400 {
		body := decodedErrorBody(resp, readErrorBody(resp))
		refused := credentialRefused(resp.StatusCode, body)
		rd.credentialRefused = rd.clientCredential && refused
		rd.operatorRefused = rd.operatorsOwn && refused
	}
	if rd.clears && !rd.credentialRefused {
		close(s.credentialCleared)
	}
}

// failureClass sorts an attempt's error status. A refused client
// credential ends the call with that answer (Fatal), so that no other
// credential serves it, unless every alternate of the call may serve such
// calls (serve_credential_failures).
func (s *Session) failureClass(rd *reader, status int) hedgecore.Class {
	if !rd.credentialRefused {
		return classify(status)
	}
	if len(s.pol.alternates) == 0 {
		return hedgecore.Refused // the same credential would be refused again
	}
	for i := range s.pol.alternates {
		if !s.pol.alternates[i].ServeCredentialFailures {
			return hedgecore.Refused
		}
	}
	return hedgecore.Retryable
}

// awaitCredential holds the first content (or the whole answer) of an
// attempt on an alternate with its own credential until the primary has
// answered without refusing the client's credential: a call whose own key
// is refused is never served on the operator's. It reports false when the
// attempt was dropped meanwhile (the refusal ended the call).
func (s *Session) awaitCredential(ctx context.Context, rd *reader) bool {
	if !rd.awaitsCredential {
		return true
	}
	select {
	case <-s.credentialCleared:
		return true
	case <-ctx.Done():
		return false
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/llmstream"
)

// geminiKeyInvalid is the Gemini API's answer to a key it does not take:
// HTTP 400 INVALID_ARGUMENT whose google.rpc.ErrorInfo reason is
// API_KEY_INVALID (API_KEY_EXPIRED for an expired one).
const geminiKeyInvalid = `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.",` +
	`"status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo",` +
	`"reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}}]}}`

const geminiText = `data: {"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"}}]}` + "\r\n\r\n"

// geminiCall starts a guarded Gemini call from query, with the client's
// key in x-goog-api-key.
func (h *harness) geminiCall(t *testing.T, query string) (*Session, <-chan result) {
	return h.callOf(t, "gcp.gemini", "gemini-2.5-flash", llmstream.ShapeGemini,
		"/v1beta/models/gemini-2.5-flash:streamGenerateContent?"+query, `{"contents":[]}`,
		http.Header{"X-Goog-Api-Key": {"goog-client-invalid"}})
}

// TestGeminiInvalidKeyIsARefusal: the Gemini API refuses a key that
// is not valid (or expired) with 400 API_KEY_INVALID, not 401. A hedge on
// an alternate with the operator's own key, holding content while the
// primary has not answered, is dropped when that answer comes: the client's
// key was refused (docs/security.md, "Credentials follow the upstream"),
// and the client gets the primary's answer.
func TestGeminiInvalidKeyIsARefusal(t *testing.T) {
	h := newCredentialHarness(t, Rule{Delay: 100 * time.Millisecond, MaxAttempts: 2}, Upstream{OwnCredential: true})
	s, out := h.geminiCall(t, "alt=sse")
	p := h.primary.next(t)
	h.blockUntil(t, 1)
	h.clock.Advance(100 * time.Millisecond)
	a := h.alt.next(t)
	a.stream(geminiText)
	pending(t, out) // held: the primary has not answered
	p.status(http.StatusBadRequest, geminiKeyInvalid)
	r := wait(t, out)
	require.NoError(t, r.err)
	if r.resp.StatusCode == http.StatusOK {
		a.end() // the hedge was committed: let its stream end
	}
	got, _ := io.ReadAll(r.resp.Body)
	require.NoError(t, r.resp.Body.Close())
	assert.Equal(t, http.StatusBadRequest, r.resp.StatusCode,
		"a client whose Gemini key is invalid was served on the operator's key: %q", got)
	s.Finish()
	assert.False(t, s.Won(), "the hedge on the operator's key won")
}

// TestAccountRefusalsInA400AreRefusals: OpenAI answers an account past
// its billing limit, and Anthropic one out of credit, with 400, not 401,
// 402 or 429. A hedge on an alternate with the operator's own key, holding
// content while the primary has not answered, is dropped when that answer
// comes, as for any refusal of the client's credential.
func TestAccountRefusalsInA400AreRefusals(t *testing.T) {
	for name, tt := range map[string]struct {
		shape         llmstream.Shape
		path, content string
		refusal       string
	}{
		"openai billing hard limit": {
			llmstream.ShapeChatCompletions, "/v1/chat/completions", textFrame,
			`{"error":{"message":"Billing hard limit has been reached","type":"invalid_request_error","param":null,"code":"billing_hard_limit_reached"}}`,
		},
		"anthropic credit balance": {
			llmstream.ShapeMessages, "/v1/messages",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
			`{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."},"request_id":"req_011"}`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newCredentialHarness(t, Rule{Delay: 100 * time.Millisecond, MaxAttempts: 2}, Upstream{OwnCredential: true})
			s, out := h.callOf(t, "openai", "m", tt.shape, tt.path, `{"model":"m","stream":true}`,
				http.Header{"Authorization": {"Bearer sk-client"}, "X-Api-Key": {"sk-ant-client"}})
			p := h.primary.next(t)
			h.blockUntil(t, 1)
			h.clock.Advance(100 * time.Millisecond)
			a := h.alt.next(t)
			a.stream(tt.content)
			pending(t, out) // held: the primary has not answered
			p.status(http.StatusBadRequest, tt.refusal)
			r := wait(t, out)
			require.NoError(t, r.err)
			if r.resp.StatusCode == http.StatusOK {
				a.end() // the hedge was committed: let its stream end
			}
			got, _ := io.ReadAll(r.resp.Body)
			require.NoError(t, r.resp.Body.Close())
			assert.Equal(t, http.StatusBadRequest, r.resp.StatusCode,
				"a client whose account is refused was served on the operator's key: %q", got)
			s.Finish()
			assert.False(t, s.Won(), "the hedge on the operator's key won")
		})
	}
}

// TestQueryBillingProjectStaysWithThePrimary: Google's APIs take the
// project billed for a call as the X-Goog-User-Project header or as the
// userProject ($userProject) query parameter (Google's system
// parameters). The header is a credential the alternate never gets
// without forward_client_credentials; nor does its query form (the client
// would choose which project the operator's key bills).
func TestQueryBillingProjectStaysWithThePrimary(t *testing.T) {
	h := newCredentialHarness(t, Rule{MaxAttempts: 2}, Upstream{OwnCredential: true})
	s, out := h.geminiCall(t, "alt=sse&userProject=client-project&%24userProject=client-project")
	p := h.primary.next(t)
	p.status(http.StatusServiceUnavailable, `{}`)
	a := h.alt.next(t)
	assert.Empty(t, a.req.Header.Values("X-Goog-User-Project"))
	assert.Equal(t, "alt=sse", a.req.URL.RawQuery, "the client's billing project reached the alternate in the query")
	a.status(http.StatusServiceUnavailable, `{}`)
	r := wait(t, out)
	require.NoError(t, r.err)
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
}

// TestPresignedSigV4StaysWithThePrimary: an AWS SigV4 signature in
// the query (a presigned URL: X-Amz-Credential names the access key,
// X-Amz-Signature is the credential; X-Amz-Security-Token is stripped
// already) is a credential: without forward_client_credentials an
// alternate (another party) does not get it. With a long-term key there is
// no security token, and the signature alone lets whoever holds the URL
// replay the call on the client's account until it expires.
func TestPresignedSigV4StaysWithThePrimary(t *testing.T) {
	h := newCredentialHarness(t, Rule{MaxAttempts: 2}, Upstream{OwnCredential: true})
	const query = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDCLIENT%2F20250101%2Fus-east-1%2Fbedrock%2Faws4_request" +
		"&X-Amz-Date=20250101T000000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host" +
		"&X-Amz-Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	const model = "anthropic.claude-sonnet-4-20250514-v1:0"
	s, out := h.callOf(t, "aws.bedrock", model, llmstream.ShapeBedrockConverse, "/model/"+model+"/converse-stream?"+query, `{"messages":[]}`, nil)
	h.primary.next(t).status(http.StatusServiceUnavailable, `{}`)
	a := h.alt.next(t)
	q := a.req.URL.Query()
	assert.Empty(t, q["X-Amz-Signature"], "the client's SigV4 signature reached the alternate: %s", a.req.URL.RawQuery)
	assert.Empty(t, q["X-Amz-Credential"], "the client's access key id reached the alternate: %s", a.req.URL.RawQuery)
	a.status(http.StatusServiceUnavailable, `{}`)
	r := wait(t, out)
	require.NoError(t, r.err)
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
}

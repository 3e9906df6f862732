// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/genai"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

// headerTransport adds fixed headers to every request: the Ollama client
// has no option for them.
type headerTransport struct {
	next http.RoundTripper
	h    http.Header
}

func (h headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range h.h {
		req.Header[k] = v
	}
	return h.next.RoundTrip(req)
}

func profiledClient(t *testing.T, profile string) (*http.Client, *wireTap) {
	hc, tap := tappedClient(t)
	hc.Transport = headerTransport{next: hc.Transport, h: http.Header{fakellm.HeaderProfile: {profile}}}
	return hc, tap
}

func geminiStream(vertex bool) func(t *testing.T, baseURL, profile string) sdkRun {
	return func(t *testing.T, baseURL, profile string) sdkRun {
		hc, tap := profiledClient(t, profile)
		cfg := &genai.ClientConfig{HTTPClient: hc, HTTPOptions: genai.HTTPOptions{BaseURL: baseURL + "/"}}
		if vertex {
			cfg.Backend, cfg.Project, cfg.Location = genai.BackendVertexAI, "streamstall-test", "us-central1"
		} else {
			cfg.Backend, cfg.APIKey = genai.BackendGeminiAPI, "gemini-test-secret-key"
		}
		client, err := genai.NewClient(testContext(t), cfg)
		require.NoError(t, err)
		var run sdkRun
		var text strings.Builder
		for resp, err := range client.Models.GenerateContentStream(testContext(t), "gemini-2.5-flash", genai.Text("Why do streams stall?"), nil) {
			require.NoError(t, err)
			text.WriteString(resp.Text())
			run.model, run.id = resp.ModelVersion, resp.ResponseID
		}
		run.text, run.wire = text.String(), tap.bytes()
		return run
	}
}

func ollamaChat(t *testing.T, baseURL, profile string) sdkRun {
	hc, tap := profiledClient(t, profile)
	u, err := url.Parse(baseURL)
	require.NoError(t, err)
	var run sdkRun
	var text strings.Builder
	err = api.NewClient(u, hc).Chat(testContext(t), &api.ChatRequest{
		Model:    "llama3.2",
		Messages: []api.Message{{Role: "user", Content: "Why do streams stall?"}},
	}, func(r api.ChatResponse) error {
		text.WriteString(r.Message.Content)
		run.model = r.Model
		return nil
	})
	require.NoError(t, err)
	run.text, run.wire = text.String(), tap.bytes()
	return run
}

// TestNativeSDKsThroughProxy: the official Gemini (Google AI Studio and
// Vertex AI) and Ollama Go clients stream through the proxy as they do
// directly, byte for byte, and the proxy records a span in the contract:
// one chunk event per content chunk fakellm sent, the path's model and
// provider, usage, and Ollama's own timings.
func TestNativeSDKsThroughProxy(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, baseURL, profile string) sdkRun
		op   string
		prov string
	}{
		{"gemini ai studio", geminiStream(false), "generate_content", "gcp.gemini"},
		{"gemini vertex", geminiStream(true), "generate_content", "gcp.vertex_ai"},
		{"ollama chat", ollamaChat, "chat", "ollama"},
	}
	for _, tt := range tests {
		for _, profile := range []string{fakellm.ProfileSteady, fakellm.ProfileStall, fakellm.ProfileBurst} {
			t.Run(tt.name+"/"+profile, func(t *testing.T) {
				f := newFixture(t, nil)
				direct := tt.run(t, f.upstream.URL, profile)
				assert.Equal(t, sentWhole(t, f.fake), direct.wire, "direct: the SDK read what fakellm sent")
				f.fake.Reset()

				proxied := tt.run(t, f.proxyURL, profile)
				rec := f.waitRequest(t, 0)
				assert.Equal(t, sentWhole(t, f.fake), proxied.wire, "proxied: the SDK read exactly what fakellm sent")
				assert.Equal(t, direct.text, proxied.text)
				assert.Equal(t, rec.Text, proxied.text)

				span := f.spans(t, 1)[0]
				assert.Equal(t, ptrace.StatusCodeUnset, span.Status().Code(), span.Status().Message())
				assert.Equal(t, tt.op+" "+rec.Model, span.Name())
				assert.Equal(t, tt.op, attr(t, span, semconv.AttrOperationName).Str())
				assert.Equal(t, tt.prov, attr(t, span, semconv.AttrProviderName).Str())
				assert.Equal(t, rec.Model, attr(t, span, semconv.AttrRequestModel).Str())
				assert.Equal(t, proxied.model, attr(t, span, semconv.AttrResponseModel).Str())
				assert.True(t, attr(t, span, semconv.AttrRequestStream).Bool())
				assert.Equal(t, int64(rec.OutputTokens), attr(t, span, semconv.AttrUsageOutputTokens).Int())
				assert.Equal(t, int64(rec.InputTokens), attr(t, span, semconv.AttrUsageInputTokens).Int())
				assert.Equal(t, []any{map[string]string{"gcp.gemini": "STOP", "gcp.vertex_ai": "STOP", "ollama": "stop"}[tt.prov]},
					attr(t, span, semconv.AttrResponseFinishReasons).Slice().AsRaw())
				assert.Len(t, chunkTimes(span), len(rec.ChunkTimes), "one chunk event per content chunk")
				if rec.ResponseID != "" {
					assert.Equal(t, rec.ResponseID, proxied.id)
					assert.Equal(t, rec.ResponseID, attr(t, span, semconv.AttrResponseID).Str())
				}
				if tt.prov == "ollama" {
					total, load, promptEval, eval := rec.Plan.ServerTimings()
					for name, want := range map[string]float64{
						semconv.AttrServerTotalMs: total.Seconds() * 1e3, semconv.AttrServerLoadMs: load.Seconds() * 1e3,
						semconv.AttrServerPromptEvalMs: promptEval.Seconds() * 1e3, semconv.AttrServerEvalMs: eval.Seconds() * 1e3,
					} {
						assert.InDelta(t, want, attr(t, span, name).Double(), 1e-9, name)
					}
				} else {
					_, ok := span.Attributes().Get(semconv.AttrServerTotalMs)
					assert.False(t, ok, "Gemini reports no server timings")
				}
				assertNoSecrets(t, span, rec.Text, "gemini-test-secret-key", "Why do streams stall?")
			})
		}
	}
}

// TestNativeStreamsThroughProxy: the framings no SDK asks for (Gemini's
// JSON array without alt=sse), Ollama's generate, a truncated NDJSON
// stream and error statuses, through the proxy.
func TestNativeStreamsThroughProxy(t *testing.T) {
	tests := []struct {
		name, path, body, profile string
		status                    int
		op, errType               string
	}{
		{"gemini json array", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", `{"contents":[{"parts":[{"text":"hi"}]}]}`, fakellm.ProfileStall, 200, "generate_content", ""},
		{"gemini unary", "/v1/projects/p/locations/l/publishers/google/models/gemini-2.5-flash:generateContent", `{"contents":[]}`, fakellm.ProfileSteady, 200, "generate_content", ""},
		{"ollama generate", "/api/generate", `{"model":"llama3.2","prompt":"Once"}`, fakellm.ProfileStall, 200, "text_completion", ""},
		{"ollama not streamed", "/api/chat", `{"model":"llama3.2","stream":false,"messages":[]}`, fakellm.ProfileSteady, 200, "chat", ""},
		{"ollama cut", "/api/chat", `{"model":"llama3.2","messages":[]}`, fakellm.ProfileEarlyClose, 200, "chat", "stream_truncated"},
		{"gemini 429: the status name", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", `{}`, fakellm.ProfileHTTP429, 429, "generate_content", "RESOURCE_EXHAUSTED"},
		{"ollama 500: the status code", "/api/chat", `{"model":"llama3.2","messages":[]}`, fakellm.ProfileHTTP500, 500, "chat", "500"},
		{"openai 429: the code, not the type", "/v1/chat/completions", `{"model":"gpt-4o","stream":true}`, fakellm.ProfileHTTP429, 429, "chat", "rate_limit_exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, f.proxyURL+tt.path, strings.NewReader(tt.body))
			require.NoError(t, err)
			req.Header.Set(fakellm.HeaderProfile, tt.profile)
			resp, err := testClient(t).Do(req)
			require.NoError(t, err)
			got, _ := io.ReadAll(resp.Body) // a cut stream ends in an error after its bytes
			require.NoError(t, resp.Body.Close())
			rec := f.waitRequest(t, 0)
			assert.Equal(t, tt.status, resp.StatusCode)
			assert.Equal(t, sentWhole(t, f.fake), got, "the client gets the bytes fakellm sent")

			span := f.spans(t, 1)[0]
			assert.Equal(t, tt.op, attr(t, span, semconv.AttrOperationName).Str())
			assert.Equal(t, rec.Stream, attr(t, span, semconv.AttrRequestStream).Bool())
			assert.Len(t, chunkTimes(span), len(rec.ChunkTimes))
			if tt.errType == "" {
				assert.Equal(t, ptrace.StatusCodeUnset, span.Status().Code(), span.Status().Message())
				assert.Equal(t, int64(rec.OutputTokens), attr(t, span, semconv.AttrUsageOutputTokens).Int())
				return
			}
			assert.Equal(t, ptrace.StatusCodeError, span.Status().Code())
			assert.Equal(t, tt.errType, attr(t, span, semconv.AttrErrorType).Str())
		})
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedge

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func encoded(t *testing.T, s Source, req *Request) map[string]any {
	t.Helper()
	b, err := s.(*httpSource).encode(req)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

func TestEncodeOpenAIChat(t *testing.T) {
	src := NewOpenAIChatSource(Endpoint{BaseURL: "http://127.0.0.1:1/v1/", Model: "m", ContinueFinalMessage: true})
	assert.Equal(t, "127.0.0.1:1/v1", src.Name())
	assert.Equal(t, "openai", src.Provider())
	req := &Request{System: "be brief", Messages: []Message{{Role: "user", Content: "hi"}}, MaxTokens: 9, Prefix: "Hello, "}
	assert.JSONEq(t, `{
		"model": "m", "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 9,
		"continue_final_message": true, "add_generation_prompt": false,
		"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
		             {"role": "assistant", "content": "Hello, "}]}`, mustJSON(t, encoded(t, src, req)))

	req.Prefix = ""
	m := encoded(t, src, req)
	assert.NotContains(t, m, "continue_final_message", "only continuation attempts ask to continue")
}

func TestEncodeAnthropic(t *testing.T) {
	src := NewAnthropicSource(Endpoint{Name: "a", BaseURL: "http://127.0.0.1:1/v1", Model: "c"})
	assert.Equal(t, "anthropic", src.Provider())
	req := &Request{System: "be brief", Messages: []Message{{Role: "user", Content: "hi"}}, Prefix: "Hello, \n"}
	assert.JSONEq(t, `{
		"model": "c", "stream": true, "max_tokens": 4096, "system": "be brief",
		"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello,"}]}`,
		mustJSON(t, encoded(t, src, req)))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func TestStatusErrorClasses(t *testing.T) {
	for code, fatal := range map[int]bool{
		400: true, 401: true, 403: true, 404: true, 413: true, 422: true,
		408: false, 409: false, 425: false, 429: false, 500: false, 503: false, 529: false,
	} {
		assert.Equal(t, fatal, (&StatusError{StatusCode: code}).Fatal(), "status %d", code)
	}
	assert.Equal(t, 529, streamErrorStatus("overloaded_error"))
	assert.Equal(t, 429, streamErrorStatus("rate_limit_error"))
	assert.Equal(t, 400, streamErrorStatus("invalid_request_error"))
	assert.Equal(t, 500, streamErrorStatus("api_error"))
	assert.Equal(t, 500, streamErrorStatus("something new"), "unknown errors are retryable")
}

func TestEncodeGemini(t *testing.T) {
	src := NewGeminiSource(Endpoint{BaseURL: "https://generativelanguage.googleapis.com/v1beta/", Model: "gemini-2.5-flash"})
	assert.Equal(t, "gcp.gemini", src.Provider())
	assert.Equal(t, "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", src.(*httpSource).url)
	req := &Request{
		System: "be brief", Messages: []Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "Hi."}, {Role: "user", Content: "more"}},
		MaxTokens: 9, Prefix: "Well, ",
	}
	assert.JSONEq(t, `{
		"systemInstruction": {"parts": [{"text": "be brief"}]},
		"generationConfig": {"maxOutputTokens": 9},
		"contents": [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [{"text": "Hi."}]},
		             {"role": "user", "parts": [{"text": "more"}]}, {"role": "model", "parts": [{"text": "Well, "}]}]}`,
		mustJSON(t, encoded(t, src, req)))

	vertex := NewGeminiSource(Endpoint{BaseURL: "https://aiplatform.googleapis.com/v1/projects/p/locations/global/publishers/google", Model: "gemini-2.5-pro"})
	assert.Equal(t, "gcp.vertex_ai", vertex.Provider(), "the path says Vertex AI")
}

func TestEncodeOllama(t *testing.T) {
	src := NewOllamaSource(Endpoint{BaseURL: "http://127.0.0.1:11434", Model: "llama3.2"})
	assert.Equal(t, "ollama", src.Provider())
	req := &Request{System: "be brief", Messages: []Message{{Role: "user", Content: "hi"}}, MaxTokens: 9, Prefix: "Hello, "}
	assert.JSONEq(t, `{
		"model": "llama3.2", "stream": true, "options": {"num_predict": 9},
		"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
		             {"role": "assistant", "content": "Hello, "}]}`, mustJSON(t, encoded(t, src, req)))
}

func TestGoogleStreamErrorStatus(t *testing.T) {
	for name, status := range map[string]int{
		"RESOURCE_EXHAUSTED": 429, "UNAVAILABLE": 503, "INVALID_ARGUMENT": 400,
		"UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403, "NOT_FOUND": 404, "DEADLINE_EXCEEDED": 504, "INTERNAL": 500,
	} {
		assert.Equal(t, status, streamErrorStatus(name), name)
	}
}

// TestSourceProviderFromHost: Azure OpenAI's v1 API has OpenAI's paths;
// its host names the provider, as it does for the proxy.
func TestSourceProviderFromHost(t *testing.T) {
	assert.Equal(t, "azure.ai.openai", NewOpenAIChatSource(Endpoint{BaseURL: "https://res.openai.azure.com/openai/v1", Model: "m"}).Provider())
	assert.Equal(t, "openai", NewOpenAIChatSource(Endpoint{BaseURL: "https://api.groq.com/openai/v1", Model: "m"}).Provider())
	assert.Equal(t, "mine", NewOpenAIChatSource(Endpoint{BaseURL: "https://res.openai.azure.com/openai/v1", Model: "m", Provider: "mine"}).Provider())
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCloudRequestFixtures classifies the requests anthropic-sdk-go's
// Vertex AI option and openai-go's azure package send (golden files that
// receiver/ssecapture's TestCloudSDKRequests records from the SDKs).
func TestCloudRequestFixtures(t *testing.T) {
	const model, deployment = "claude-sonnet-4-5@20250929", "gpt-4o-mini-prod"
	tests := map[string]struct {
		endpoint Endpoint
		request  Request
	}{
		"vertex_anthropic_stream.json": {
			Endpoint{Shape: ShapeMessages, Provider: ProviderVertexAI, Model: model, Stream: true},
			Request{Model: model, Stream: true},
		},
		"vertex_anthropic_unary.json": {
			Endpoint{Shape: ShapeMessages, Provider: ProviderVertexAI, Model: model},
			Request{Model: model},
		},
		// Token counting is not a call: forwarded without a span, as
		// Anthropic's own /v1/messages/count_tokens is.
		"vertex_anthropic_count_tokens.json": {},
		"azure_openai_chat_stream.json": {
			Endpoint{Shape: ShapeChatCompletions, Provider: ProviderAzureOpenAI, Deployment: deployment},
			Request{Model: deployment, Stream: true},
		},
		"azure_openai_completions.json": {
			Endpoint{Shape: ShapeCompletions, Provider: ProviderAzureOpenAI, Deployment: deployment},
			Request{Model: deployment},
		},
	}
	files, err := filepath.Glob(filepath.Join("testdata", "requests", "*.json"))
	require.NoError(t, err)
	require.Len(t, files, len(tests), "every fixture has its expectation")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			want, ok := tests[filepath.Base(file)]
			require.True(t, ok)
			b, err := os.ReadFile(file)
			require.NoError(t, err)
			var req struct {
				Path string          `json:"path"`
				Body json.RawMessage `json:"body"`
			}
			require.NoError(t, json.Unmarshal(b, &req))
			path, err := url.PathUnescape(req.Path)
			require.NoError(t, err)
			e := ParseEndpoint(path)
			assert.Equal(t, want.endpoint, e)
			if e.Shape == ShapeUnknown {
				return
			}
			got, err := e.ParseRequest(req.Body)
			require.NoError(t, err)
			assert.Equal(t, want.request, got)
		})
	}
}

func TestCloudEndpoints(t *testing.T) {
	tests := map[string]Endpoint{
		"/v1/projects/p/locations/global/publishers/anthropic/models/claude-opus-4-1@20250805:streamRawPredict": {Shape: ShapeMessages, Provider: ProviderVertexAI, Model: "claude-opus-4-1@20250805", Stream: true},
		"/gateway/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-3-5-haiku:rawPredict":     {Shape: ShapeMessages, Provider: ProviderVertexAI, Model: "claude-3-5-haiku"},
		"/v1/projects/p/locations/us-east5/publishers/anthropic/models/:streamRawPredict":                       {},
		"/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude:predict":                          {},
		"/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude":                                  {},
		"/v1/projects/p/locations/us-east5/publishers/mistralai/models/mistral-large:rawPredict":                {},
		// Gemini's methods on Anthropic's publisher, Anthropic's on Google's: neither is a call.
		"/v1/projects/p/locations/us-east5/publishers/google/models/gemini-2.5-pro:streamRawPredict": {},
		"/openai/deployments/gpt-4o/chat/completions":                                                {Shape: ShapeChatCompletions, Provider: ProviderAzureOpenAI, Deployment: "gpt-4o"},
		"/deployments/gpt-4o/chat/completions/":                                                      {Shape: ShapeChatCompletions, Provider: ProviderAzureOpenAI, Deployment: "gpt-4o"},
		"/openai/deployments/davinci/completions":                                                    {Shape: ShapeCompletions, Provider: ProviderAzureOpenAI, Deployment: "davinci"},
		"/openai/deployments//chat/completions":                                                      {Shape: ShapeChatCompletions, Provider: ProviderAzureOpenAI},
		"/openai/deployments/text-embedding-3/embeddings":                                            {},
		"/openai/deployments/gpt-4o/extensions/chat/completions":                                     {Shape: ShapeChatCompletions, Provider: ProviderAzureOpenAI, Deployment: "gpt-4o"},
		// Azure's v1 API and its Responses API are OpenAI's paths: the host tells.
		"/openai/v1/chat/completions": {Shape: ShapeChatCompletions, Provider: ProviderOpenAI},
		"/openai/responses":           {Shape: ShapeResponses, Provider: ProviderOpenAI},
	}
	for path, want := range tests {
		assert.Equal(t, want, ParseEndpoint(path), path)
	}
}

func TestEndpointOnHost(t *testing.T) {
	chat := ParseEndpoint("/openai/v1/chat/completions")
	for _, host := range []string{"myres.openai.azure.com", "MyRes.OpenAI.Azure.com.", "myres.cognitiveservices.azure.com", "proj.services.ai.azure.com", "gov.openai.azure.us"} {
		assert.Equal(t, ProviderAzureOpenAI, chat.OnHost(host).Provider, host)
	}
	for _, host := range []string{"api.openai.com", "api.groq.com", "openai.azure.com.evil.example", "127.0.0.1", ""} {
		assert.Equal(t, ProviderOpenAI, chat.OnHost(host).Provider, host)
	}
	// Another shape keeps its provider on an Azure host.
	msgs := ParseEndpoint("/v1/messages")
	assert.Equal(t, ProviderAnthropic, msgs.OnHost("myres.openai.azure.com").Provider)
	assert.Equal(t, chat.Shape, chat.OnHost("myres.openai.azure.com").Shape)
}

func TestAzureDeploymentModel(t *testing.T) {
	e := ParseEndpoint("/openai/deployments/prod-4o/chat/completions")
	got, err := e.ParseRequest([]byte(`{"messages":[],"stream":true}`))
	require.NoError(t, err)
	assert.Equal(t, Request{Model: "prod-4o", Stream: true}, got, "no model in the body: the deployment")
	got, err = e.ParseRequest([]byte(`{"model":"gpt-4o-2024-08-06","messages":[]}`))
	require.NoError(t, err)
	assert.Equal(t, Request{Model: "gpt-4o-2024-08-06"}, got, "the body's model wins")
	got, err = e.ParseRequest([]byte(`not json`))
	require.ErrorIs(t, err, ErrMalformed)
	assert.Equal(t, "prod-4o", got.Model, "a body that cannot be read: the path still names the deployment")
}

func FuzzParseEndpoint(f *testing.F) {
	for _, s := range []string{
		"/v1/projects/p/locations/l/publishers/anthropic/models/m:streamRawPredict",
		"/openai/deployments/d/chat/completions", "/openai/v1/responses",
		"/v1beta/models/gemini:streamGenerateContent", "/deployments/", ":rawPredict", "/publishers/anthropic/models/:",
	} {
		f.Add(s, "myres.openai.azure.com")
	}
	f.Fuzz(func(t *testing.T, path, host string) {
		e := ParseEndpoint(path).OnHost(host)
		if e.Shape == ShapeUnknown {
			require.Equal(t, Endpoint{}, e)
			return
		}
		require.NotEmpty(t, e.Provider)
		require.NotEmpty(t, e.Shape.Operation())
		_, _ = e.ParseRequest([]byte(path))
	})
}

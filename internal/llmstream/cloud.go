// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import "strings"

// ProviderAzureOpenAI is Azure OpenAI's gen_ai.provider.name (GenAI
// semantic conventions).
const ProviderAzureOpenAI = "azure.ai.openai"

// vertexAnthropicEndpoint recognises Anthropic's Messages API as Vertex AI
// serves it: ".../publishers/anthropic/models/{model}:streamRawPredict" (a
// stream) or ":rawPredict", the model in the path and not in the body.
// Vertex's token counting ("models/count-tokens:rawPredict") is not a call.
func vertexAnthropicEndpoint(path string) (Endpoint, bool) {
	slash := strings.LastIndexByte(path, '/')
	if slash < 0 || !strings.HasSuffix(path[:slash], "/publishers/anthropic/models") {
		return Endpoint{}, false
	}
	model, method, _ := strings.Cut(path[slash+1:], ":")
	if model == "" || model == "count-tokens" || method != "streamRawPredict" && method != "rawPredict" {
		return Endpoint{}, false
	}
	return Endpoint{Shape: ShapeMessages, Provider: ProviderVertexAI, Model: model, Stream: method == "streamRawPredict"}, true
}

// azureEndpoint recognises Azure OpenAI's deployment paths,
// ".../deployments/{deployment}/chat/completions" and ".../completions"
// under any prefix (Azure's is "/openai"; its api-version query is not part
// of the path). OpenAI's own API has no deployments, so the path alone says
// Azure.
func azureEndpoint(path string) (Endpoint, bool) {
	const marker = "/deployments/"
	i := strings.LastIndex(path, marker)
	if i < 0 {
		return Endpoint{}, false
	}
	deployment, op, _ := strings.Cut(path[i+len(marker):], "/")
	var s Shape
	switch {
	case op == "chat/completions", strings.HasSuffix(op, "/chat/completions"):
		// ".../extensions/chat/completions" too: Azure's chat on your data.
		s = ShapeChatCompletions
	case op == "completions":
		s = ShapeCompletions
	default:
		return Endpoint{}, false
	}
	return Endpoint{Shape: s, Provider: ProviderAzureOpenAI, Deployment: deployment}, true
}

// azureOpenAIHosts end the host names of Azure OpenAI resources: Azure
// OpenAI, Azure AI Services and Azure AI Foundry, in the public cloud and
// in the US Government and China clouds.
var azureOpenAIHosts = []string{
	".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com",
	".openai.azure.us", ".openai.azure.cn",
}

// OnHost refines what the path said with the host the request goes to:
// OpenAI's paths on an Azure OpenAI resource (its v1 API,
// "/openai/v1/chat/completions", or "/openai/responses") are Azure OpenAI,
// which the path alone cannot tell from OpenAI's API mounted under a
// prefix (Groq serves it under "/openai/v1" too). Behind a host of its own
// (an API gateway), the receiver's proxy.provider names the provider.
//
// The clouds' own OpenAI-compatible endpoints are the clouds' too: Bedrock's
// ("https://bedrock-runtime.{region}.amazonaws.com/openai/v1"), Vertex AI's
// (on "{region}-aiplatform.googleapis.com") and the Gemini API's
// ("https://generativelanguage.googleapis.com/v1beta/openai"). Bedrock's
// Mantle endpoint ("https://bedrock-mantle.{region}.api.aws", the default
// of openai-go's and anthropic-sdk-go's Bedrock clients) serves OpenAI's
// APIs under "/openai/v1" and Anthropic's Messages under "/anthropic": both
// are Bedrock's, as those SDKs name them. Anthropic's API served by a
// cloud under Anthropic's own name (Azure AI Foundry's "/anthropic/", the
// Anthropic AWS gateway) stays anthropic, as anthropic-sdk-go names it.
func (e Endpoint) OnHost(host string) Endpoint {
	if e.Provider != ProviderOpenAI && e.Provider != ProviderAnthropic {
		return e
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if h, _, ok := strings.Cut(host, ":"); ok {
		host = h
	}
	if strings.HasPrefix(host, "bedrock-mantle.") && strings.HasSuffix(host, ".api.aws") {
		e.Provider = ProviderBedrock
		return e
	}
	if e.Provider != ProviderOpenAI {
		return e
	}
	for _, suffix := range azureOpenAIHosts {
		if strings.HasSuffix(host, suffix) {
			e.Provider = ProviderAzureOpenAI
			return e
		}
	}
	switch {
	case strings.HasPrefix(host, "bedrock-runtime.") && strings.HasSuffix(host, ".amazonaws.com"):
		e.Provider = ProviderBedrock
	case host == "aiplatform.googleapis.com" || strings.HasSuffix(host, "-aiplatform.googleapis.com"):
		e.Provider = ProviderVertexAI
	case host == "generativelanguage.googleapis.com":
		e.Provider = ProviderGemini
	}
	return e
}

// vertexOpenAIPath reports whether path is under Vertex AI's OpenAI-
// compatible endpoint, ".../projects/{p}/locations/{l}/endpoints/openapi/":
// the path alone names a Vertex AI project, whatever host serves it.
func vertexOpenAIPath(path string) bool {
	i := strings.Index(path, "/endpoints/openapi/")
	return i > 0 && strings.Contains(path[:i], "/projects/") && strings.Contains(path[:i], "/locations/")
}

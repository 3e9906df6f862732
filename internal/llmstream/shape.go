// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package llmstream holds streamstall's one definition of what a content
// chunk is (docs/contract.md section 3), for each streaming API shape it understands, and
// the metadata (ids, model, finish reasons, usage, errors) those streams carry.
// The sse_capture proxy and the hedging client both classify frames here, so
// they can never disagree on what counts.
package llmstream

import (
	"strings"

	"github.com/streamstall/streamstall/internal/sse"
)

// Shape is the API a request or a stream speaks.
type Shape uint8

const (
	ShapeUnknown Shape = iota
	// ShapeChatCompletions is OpenAI's /v1/chat/completions (and compatibles).
	ShapeChatCompletions
	// ShapeCompletions is OpenAI's legacy /v1/completions.
	ShapeCompletions
	// ShapeResponses is OpenAI's /v1/responses.
	ShapeResponses
	// ShapeMessages is Anthropic's /v1/messages.
	ShapeMessages
	// ShapeGemini is Google's generateContent and streamGenerateContent, on
	// Google AI Studio and on Vertex AI alike.
	ShapeGemini
	// ShapeOllamaChat is Ollama's native /api/chat.
	ShapeOllamaChat
	// ShapeOllamaGenerate is Ollama's native /api/generate.
	ShapeOllamaGenerate
	// ShapeBedrockConverse is AWS Bedrock's Converse and ConverseStream.
	ShapeBedrockConverse
	// ShapeBedrockInvoke is AWS Bedrock's InvokeModel and
	// InvokeModelWithResponseStream: the model's own API inside Bedrock's.
	ShapeBedrockInvoke

	// shapes counts the shapes, for tests that go through them all.
	shapes
)

// Providers the shapes imply (gen_ai.provider.name, GenAI semantic
// conventions; ollama is not among their well-known values).
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
	ProviderGemini    = "gcp.gemini"
	ProviderVertexAI  = "gcp.vertex_ai"
	ProviderOllama    = "ollama"
)

// Endpoint is what a request path says of an LLM call: its shape, and for
// the API that names them in the path (Gemini), the model and whether a
// stream was asked for.
type Endpoint struct {
	Shape Shape
	// Provider is the gen_ai.provider.name the path implies: Gemini's path
	// tells Vertex AI from Google AI Studio.
	Provider string
	// Model is the model the path names, "" when the body names it.
	Model string
	// Deployment is the Azure OpenAI deployment the path names: the
	// request model when the body names none.
	Deployment string
	// Stream is true when the path asks for a stream (Gemini's
	// streamGenerateContent); the other shapes say it in the body.
	Stream bool
}

// ParseEndpoint detects the API of a request from its path. Suffixes are
// matched so that gateways mounting an API under a prefix
// ("/openai/v1/chat/completions") are understood too; Anthropic's path keeps
// its "/v1" so that other APIs' ".../messages" collections are not mistaken
// for it. Gemini is recognised by
// its method suffix on a model resource, under any version and prefix:
// ".../models/{model}:streamGenerateContent" (Google AI Studio, also
// tunedModels) and ".../publishers/google/models/{model}:generateContent" or
// ".../projects/{p}/locations/{l}/endpoints/{id}:..." (Vertex AI). Ollama's
// native API is "/api/chat" and "/api/generate", under any prefix. AWS
// Bedrock's is ".../model/{modelId}/converse-stream" (and converse, invoke,
// invoke-with-response-stream), the model id percent-decoded.
// Anthropic's API on Vertex AI and Azure OpenAI's deployments are
// recognised by their paths too (cloud.go).
func ParseEndpoint(path string) Endpoint {
	path = strings.TrimRight(path, "/")
	if e, ok := geminiEndpoint(path); ok {
		return e
	}
	if e, ok := bedrockEndpoint(path); ok {
		return e
	}
	if e, ok := vertexAnthropicEndpoint(path); ok {
		return e
	}
	if e, ok := azureEndpoint(path); ok {
		return e
	}
	s := ShapeUnknown
	switch {
	case strings.HasSuffix(path, "/api/chat"):
		s = ShapeOllamaChat
	case strings.HasSuffix(path, "/api/generate"):
		s = ShapeOllamaGenerate
	case strings.HasSuffix(path, "/chat/completions"):
		s = ShapeChatCompletions
	case strings.HasSuffix(path, "/completions"):
		s = ShapeCompletions
	case strings.HasSuffix(path, "/responses"):
		s = ShapeResponses
	case strings.HasSuffix(path, "/v1/messages"):
		s = ShapeMessages
	}
	e := Endpoint{Shape: s, Provider: s.Provider()}
	if e.Provider == ProviderOpenAI && vertexOpenAIPath(path) {
		e.Provider = ProviderVertexAI
	}
	return e
}

func geminiEndpoint(path string) (Endpoint, bool) {
	slash := strings.LastIndexByte(path, '/')
	if slash < 0 {
		return Endpoint{}, false
	}
	model, method, ok := strings.Cut(path[slash+1:], ":")
	if !ok || model == "" {
		return Endpoint{}, false
	}
	e := Endpoint{Shape: ShapeGemini, Provider: ProviderGemini, Model: model}
	switch method {
	case "generateContent":
	case "streamGenerateContent":
		e.Stream = true
	default:
		return Endpoint{}, false
	}
	parent := path[:slash]
	switch parent[strings.LastIndexByte(parent, '/')+1:] {
	case "models", "tunedModels":
	case "endpoints":
		e.Provider = ProviderVertexAI
	default:
		return Endpoint{}, false
	}
	if strings.Contains(parent+"/", "/publishers/") || strings.Contains(parent+"/", "/projects/") {
		e.Provider = ProviderVertexAI
	}
	return e, true
}

// StreamFraming says how a response to a call of shape s is streamed, or
// false when it is one whole body. Server-Sent Events whenever the media
// type says so, whatever the shape; otherwise only a successful answer to
// a streaming request is a stream: Ollama's is NDJSON, Gemini's (asked
// without alt=sse) a JSON array sent element by element, Bedrock's an AWS
// event stream (whatever the status when the media type says so).
func StreamFraming(s Shape, stream bool, status int, mediaType string) (sse.Framing, bool) {
	switch {
	case mediaType == "text/event-stream":
		return sse.FramingSSE, true
	case mediaType == "application/vnd.amazon.eventstream":
		return sse.FramingEventStream, true
	case !stream || status < 200 || status > 299:
		return 0, false
	case mediaType == "application/x-ndjson", s == ShapeOllamaChat, s == ShapeOllamaGenerate:
		return sse.FramingNDJSON, true
	case s == ShapeGemini:
		return sse.FramingJSONArray, true
	case s.bedrock():
		return sse.FramingEventStream, true
	}
	return 0, false
}

// Operation returns the gen_ai.operation.name of the shape, as the GenAI
// semantic conventions name it: the Responses, Messages and Ollama chat
// APIs are chat operations, the legacy completions API and Ollama's
// generate are text_completion, Gemini's is generate_content.
func (s Shape) Operation() string {
	switch s {
	case ShapeChatCompletions, ShapeResponses, ShapeMessages, ShapeOllamaChat, ShapeBedrockConverse, ShapeBedrockInvoke:
		return "chat"
	case ShapeCompletions, ShapeOllamaGenerate:
		return "text_completion"
	case ShapeGemini:
		return "generate_content"
	}
	return ""
}

// Provider returns the gen_ai.provider.name the shape implies when nothing
// better is configured: the vendor that defined the API (for Gemini,
// Google AI Studio's; ParseEndpoint tells Vertex AI apart).
func (s Shape) Provider() string {
	switch s {
	case ShapeChatCompletions, ShapeCompletions, ShapeResponses:
		return ProviderOpenAI
	case ShapeMessages:
		return ProviderAnthropic
	case ShapeGemini:
		return ProviderGemini
	case ShapeOllamaChat, ShapeOllamaGenerate:
		return ProviderOllama
	case ShapeBedrockConverse, ShapeBedrockInvoke:
		return ProviderBedrock
	}
	return ""
}

func (s Shape) String() string {
	switch s {
	case ShapeChatCompletions:
		return "chat_completions"
	case ShapeCompletions:
		return "completions"
	case ShapeResponses:
		return "responses"
	case ShapeMessages:
		return "messages"
	case ShapeGemini:
		return "gemini"
	case ShapeOllamaChat:
		return "ollama_chat"
	case ShapeOllamaGenerate:
		return "ollama_generate"
	case ShapeBedrockConverse:
		return "bedrock_converse"
	case ShapeBedrockInvoke:
		return "bedrock_invoke"
	}
	return "unknown"
}

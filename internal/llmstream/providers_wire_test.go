// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

// Provider wire formats as the official SDKs and the vendors' docs give
// them; the comment on each test cites its ground truth.

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/sse"
)

func classifyOne(t *testing.T, shape Shape, ev *sse.Event) Frame {
	t.Helper()
	f, err := Classify(shape, ev)
	require.NoError(t, err)
	return f
}

func invokeChunkEvent(native string) *sse.Event {
	payload := `{"bytes":"` + base64.StdEncoding.EncodeToString([]byte(native)) + `","p":"abcdefghijklmnop"}`
	return &sse.Event{Type: []byte("chunk"), MessageType: []byte("event"), Data: []byte(payload)}
}

// TestResponsesShellCallCommandDeltaIsToolCallContent: the Responses
// API streams the command a shell tool call runs as
// response.shell_call_command.delta events. Ground truth: openai-go v3.102.0
// responses/response.go, ResponseStreamEventUnion ("Any of ...
// response.shell_call_command.delta ...") and
// ResponseShellCallCommandDeltaEvent{Delta string `json:"delta"` "The shell
// command delta that was appended"}. It is model-generated tool input, as
// response.function_call_arguments.delta and
// response.custom_tool_call_input.delta are (both counted as tool_call).
func TestResponsesShellCallCommandDeltaIsToolCallContent(t *testing.T) {
	f := classifyOne(t, ShapeResponses, &sse.Event{
		Type: []byte("response.shell_call_command.delta"),
		Data: []byte(`{"type":"response.shell_call_command.delta","command_index":0,"delta":"ls -la /tmp","output_index":1,"sequence_number":7,"obfuscation":"Qx"}`),
	})
	assert.Equal(t, KindContent, f.Kind, "a shell command delta is generated tool-call content")
	assert.Equal(t, semconv.ChunkKindToolCall, f.ChunkKind)
}

// TestBedrockInvokeOpenAIModelChunks: on Bedrock, OpenAI's gpt-oss
// models (openai.gpt-oss-20b-1:0, openai.gpt-oss-120b-1:0) take and return
// OpenAI Chat Completions bodies through InvokeModel and
// InvokeModelWithResponseStream: AWS Bedrock user guide, "OpenAI models"
// (model-parameters-openai): "In an InvokeModel or OpenAI Chat Completions
// request, include the fields in the request body" and "The response body of
// the OpenAI models conforms to the chat completion object returned by
// OpenAI". Streamed, each chunk's bytes are a chat.completion.chunk
// (openai-go ChatCompletionChunk: choices[].delta.content,
// choices[].finish_reason, usage). The last one carries Bedrock's
// amazon-bedrock-invocationMetrics as every native stream does.
func TestBedrockInvokeOpenAIModelChunks(t *testing.T) {
	f := classifyOne(t, ShapeBedrockInvoke, invokeChunkEvent(
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1754400000,"model":"openai.gpt-oss-120b-1:0","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}`))
	assert.Equal(t, KindContent, f.Kind, "a chat.completion.chunk delta in a Bedrock chunk is content")
	assert.Equal(t, semconv.ChunkKindText, f.ChunkKind)

	f = classifyOne(t, ShapeBedrockInvoke, invokeChunkEvent(
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1754400000,"model":"openai.gpt-oss-120b-1:0","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"amazon-bedrock-invocationMetrics":{"inputTokenCount":12,"outputTokenCount":40,"invocationLatency":900,"firstByteLatency":300}}`))
	assert.Equal(t, []string{"stop"}, f.Meta.FinishReasons, "the chunk's finish_reason is the finish reason")
	assert.Equal(t, "openai.gpt-oss-120b-1:0", f.Meta.ResponseModel)

	m, err := ParseResponse(ShapeBedrockInvoke, []byte(`{"id":"chatcmpl-2","object":"chat.completion","model":"openai.gpt-oss-20b-1:0","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3}}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"stop"}, m.FinishReasons, "InvokeModel's whole chat.completion")
	assert.Equal(t, int64(3), m.OutputTokens)
}

// TestVertexGeminiStreamedFunctionCallArgumentsAreContent: Gemini on
// Vertex AI streams a function call's arguments when the request's
// toolConfig.functionCallingConfig.streamFunctionCallArguments is true.
// Ground truth: google.golang.org/genai v1.77.0 types.go,
// FunctionCallingConfig.StreamFunctionCallArguments ("arguments of a single
// function call will be streamed out in multiple parts/contents/responses.
// Partial parameter results will be returned in the FunctionCall.partial_args
// field") and FunctionCall{PartialArgs []*PartialArg `json:"partialArgs"`,
// WillContinue *bool `json:"willContinue"`}, PartialArg{JsonPath,
// StringValue, ...}. The frames after the first carry no name and no args,
// only partialArgs: each is a tool-call delta, as Chat Completions'
// tool_calls[].function.arguments fragments are.
func TestVertexGeminiStreamedFunctionCallArgumentsAreContent(t *testing.T) {
	f := classifyOne(t, ShapeGemini, &sse.Event{Data: []byte(
		`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"partialArgs":[{"jsonPath":"$.location","stringValue":"Bos","willContinue":true}],"willContinue":true}}]}}],"modelVersion":"gemini-3-pro-preview","responseId":"r1"}`)})
	assert.Equal(t, KindContent, f.Kind, "a streamed function call argument fragment is tool-call content")
	assert.Equal(t, semconv.ChunkKindToolCall, f.ChunkKind)
}

// TestVertexAnthropicGoogleErrorType: Anthropic on Vertex AI answers
// Vertex's own refusals (quota, project not allowed) with Google's error
// object, not Anthropic's: HTTP 429
// {"error":{"code":429,"message":"Quota exceeded for
// aiplatform.googleapis.com/online_prediction_requests_per_base_model with
// base model: anthropic-claude-...","status":"RESOURCE_EXHAUSTED"}} on
// .../publishers/anthropic/models/{model}:streamRawPredict, and often the
// same wrapped in a JSON array (anthropics/claude-code#1378 shows the 429 on
// :streamRawPredict; cline/cline#651 and Aider-AI/aider#1912 quote the body,
// as an array). The repo's own rule (Meta.ErrorType: "for Google, the status
// name: RESOURCE_EXHAUSTED"; the Gemini shape on the same provider
// gcp.vertex_ai reads it so) gives RESOURCE_EXHAUSTED, in both forms.
func TestVertexAnthropicGoogleErrorType(t *testing.T) {
	const obj = `{"error":{"code":429,"message":"Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model with base model: anthropic-claude-sonnet-4.","status":"RESOURCE_EXHAUSTED"}}`
	gem, err := ParseResponse(ShapeGemini, []byte(obj))
	require.NoError(t, err)
	require.Equal(t, "RESOURCE_EXHAUSTED", gem.ErrorType, "Gemini on Vertex reads Google's status")

	m, err := ParseResponse(ShapeMessages, []byte(obj))
	require.NoError(t, err)
	assert.Equal(t, "RESOURCE_EXHAUSTED", m.ErrorType, "Anthropic on Vertex, same Vertex error object")

	m, err = ParseResponse(ShapeMessages, []byte(`[`+obj+`]`))
	require.NoError(t, err)
	assert.Equal(t, "RESOURCE_EXHAUSTED", m.ErrorType, "the array form Vertex also sends")
}

// TestOpenAICompatibleCloudEndpointsProvider: the clouds serve OpenAI's
// Chat Completions under paths and hosts that say which cloud it is, as the
// repo already reads for Azure (OnHost):
//   - AWS Bedrock: base_url https://bedrock-runtime.{region}.amazonaws.com/openai/v1
//     (AWS Bedrock user guide, "OpenAI models", OpenAI SDK example);
//   - Vertex AI: .../v1/projects/{p}/locations/{l}/endpoints/openapi/chat/completions
//     (Vertex AI "OpenAI compatibility"; the path alone names a Vertex project);
//   - Gemini API: https://generativelanguage.googleapis.com/v1beta/openai/chat/completions.
//
// gen_ai.provider.name's well-known values name them aws.bedrock,
// gcp.vertex_ai and gcp.gemini.
func TestOpenAICompatibleCloudEndpointsProvider(t *testing.T) {
	for _, c := range []struct{ host, path, want string }{
		{"bedrock-runtime.us-west-2.amazonaws.com", "/openai/v1/chat/completions", ProviderBedrock},
		{"us-central1-aiplatform.googleapis.com", "/v1/projects/p/locations/us-central1/endpoints/openapi/chat/completions", ProviderVertexAI},
		{"gateway.internal", "/v1/projects/p/locations/us-central1/endpoints/openapi/chat/completions", ProviderVertexAI},
		{"generativelanguage.googleapis.com", "/v1beta/openai/chat/completions", ProviderGemini},
	} {
		e := ParseEndpoint(c.path).OnHost(c.host)
		assert.Equal(t, ShapeChatCompletions, e.Shape, c.path)
		assert.Equal(t, c.want, e.Provider, "%s%s", c.host, c.path)
	}
}

// TestBedrockInvokeReadsCohereText: Cohere's models on
// Bedrock stream their text in fields classifyText never reads.
//   - Command / Command Light (cohere.command-text-v14,
//     cohere.command-light-text-v14): each chunk's bytes carry
//     generations[0].text (awsdocs/aws-doc-sdk-examples
//     python/example_code/bedrock-runtime/models/cohere_command/
//     command_invoke_model_with_response_stream.py:
//     `if "generations" in chunk: print(chunk["generations"][0]["text"])`,
//     and vercel/ai packages/core/tests/snapshots/cohere.ts
//     cohereBedrockChunks = [{generations:[{finish_reason:'COMPLETE',id,text}]}]).
//   - Command R / R+ (cohere.command-r-v1:0): a top-level text with
//     is_finished and finish_reason (langchain-ai/langchain-aws
//     libs/aws/langchain_aws/llms/bedrock.py provider_to_output_key_map
//     "cohere": "text", stopping on chunk_obj["is_finished"]; lobe-chat's
//     BedrockCohereStreamChunk {text, finish_reason, generation_id, ...}
//     citing model-parameters-cohere-command-r-plus.html).
//
// Unread, a healthy Cohere stream would have no content at all: no TTFT,
// and the guard's ttft_timeout would cut it.
func TestBedrockInvokeReadsCohereText(t *testing.T) {
	for name, native := range map[string]string{
		"command generations": `{"generations":[{"id":"0c72c609-c8ac-4601-a323-653db56c8d80","text":" Hi! How"}]}`,
		"command r text":      `{"is_finished":false,"event_type":"text-generation","text":"Hello"}`,
		"command stream text": `{"text":" Hello","is_finished":false}`,
	} {
		t.Run(name, func(t *testing.T) {
			f := classifyOne(t, ShapeBedrockInvoke, invokeChunkEvent(native))
			assert.Equal(t, KindContent, f.Kind, "a Cohere chunk with generated text is content")
			assert.Equal(t, semconv.ChunkKindText, f.ChunkKind)
		})
	}
	// The last Command R event says why it ended.
	f := classifyOne(t, ShapeBedrockInvoke, invokeChunkEvent(
		`{"is_finished":true,"event_type":"stream-end","finish_reason":"COMPLETE","amazon-bedrock-invocationMetrics":{"inputTokenCount":9,"outputTokenCount":12,"invocationLatency":640,"firstByteLatency":210}}`))
	assert.Equal(t, KindDone, f.Kind)
	assert.Equal(t, []string{"COMPLETE"}, f.Meta.FinishReasons, "Cohere's finish_reason is the finish reason")
}

// TestBedrockInvokeReadsDeepSeekChoices: DeepSeek-R1 on Bedrock
// (us.deepseek.r1-v1:0) answers InvokeModel and
// InvokeModelWithResponseStream with {"choices":[{"text":string,
// "stop_reason":string}]} (AWS Bedrock user guide, "DeepSeek models",
// https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-deepseek.html,
// Response body; stop_reason "length: ... max_tokens in the call to
// InvokeModel (or InvokeModelWithResponseStream, if you are streaming
// output)"). There is no "object" member: it is not a gpt-oss
// chat.completion.chunk.
func TestBedrockInvokeReadsDeepSeekChoices(t *testing.T) {
	f := classifyOne(t, ShapeBedrockInvoke, invokeChunkEvent(`{"choices":[{"text":"Okay, the user","stop_reason":null}]}`))
	assert.Equal(t, KindContent, f.Kind, "a DeepSeek chunk with text is content")

	f = classifyOne(t, ShapeBedrockInvoke, invokeChunkEvent(
		`{"choices":[{"text":"","stop_reason":"stop"}],"amazon-bedrock-invocationMetrics":{"inputTokenCount":14,"outputTokenCount":320,"invocationLatency":5100,"firstByteLatency":700}}`))
	assert.Equal(t, KindDone, f.Kind)
	assert.Equal(t, []string{"stop"}, f.Meta.FinishReasons, "choices[].stop_reason is the finish reason")

	m, err := ParseResponse(ShapeBedrockInvoke, []byte(`{"choices":[{"text":"Hello there.","stop_reason":"length"}]}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"length"}, m.FinishReasons, "InvokeModel's whole DeepSeek answer")
}

// TestChatAudioTranscriptIsContent: with modalities ["text","audio"]
// (gpt-4o-audio-preview, gpt-4o-mini-audio-preview), Chat Completions
// streams the answer in choices[].delta.audio, content staying null.
// Ground truth: openai-go v3.102.0 chatcompletion.go,
// ChatCompletionChunkChoiceDelta{Audio ChatCompletionChunkChoiceDeltaAudio
// `json:"audio"`} and ChatCompletionChunkChoiceDeltaAudio ("A partial audio
// response. Audio chunks may carry an ID, base64 data, or transcript text":
// ID, Data, ExpiresAt, Transcript `json:"transcript"` "Transcript text from
// this audio chunk"), counted as text as the Responses API's
// response.audio.transcript.delta is.
func TestChatAudioTranscriptIsContent(t *testing.T) {
	f := classifyOne(t, ShapeChatCompletions, ev("",
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4o-audio-preview-2025-06-03","choices":[{"index":0,"delta":{"audio":{"id":"audio_1","transcript":"Hello"}},"finish_reason":null}]}`))
	assert.Equal(t, KindContent, f.Kind, "an audio transcript delta is generated content")
	assert.Equal(t, semconv.ChunkKindText, f.ChunkKind)
}

// TestBedrockMantleIsBedrock: Amazon Bedrock's "Mantle" endpoint is
// the default base URL of openai-go's Bedrock client and serves Anthropic's
// Messages API for anthropic-sdk-go's Bedrock Mantle client. Ground truth:
//   - openai-go v3.102.0 bedrock/bedrock.go: EndpointMantle is the default
//     ("Mantle remains the default"), "Mantle defaults to
//     https://bedrock-mantle.{region}.api.aws/openai/v1" (bedrock/README.md
//     table: bedrock.EndpointMantle (default));
//   - anthropic-sdk-go v2.15.0 bedrock/bedrockmantle.go: base URL
//     "https://bedrock-mantle.%s.api.aws/anthropic", "Only the Messages API
//     (/v1/messages) and its subpaths are supported".
//
// Both SDKs name the provider aws.bedrock there.
func TestBedrockMantleIsBedrock(t *testing.T) {
	for _, c := range []struct {
		path  string
		shape Shape
	}{
		{"/openai/v1/chat/completions", ShapeChatCompletions},
		{"/openai/v1/responses", ShapeResponses},
		{"/anthropic/v1/messages", ShapeMessages},
	} {
		e := ParseEndpoint(c.path).OnHost("bedrock-mantle.us-east-1.api.aws")
		assert.Equal(t, c.shape, e.Shape, c.path)
		assert.Equal(t, ProviderBedrock, e.Provider, "bedrock-mantle.us-east-1.api.aws%s", c.path)
	}
}

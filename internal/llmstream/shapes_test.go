// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/sse"
)

func TestParseEndpoint(t *testing.T) {
	tests := map[string]Endpoint{
		"/v1beta/models/gemini-2.5-flash:streamGenerateContent":                                               {Shape: ShapeGemini, Provider: ProviderGemini, Model: "gemini-2.5-flash", Stream: true},
		"/v1beta/models/gemini-2.5-flash:generateContent":                                                     {Shape: ShapeGemini, Provider: ProviderGemini, Model: "gemini-2.5-flash"},
		"/gateway/v1/models/gemini-2.0-flash:streamGenerateContent/":                                          {Shape: ShapeGemini, Provider: ProviderGemini, Model: "gemini-2.0-flash", Stream: true},
		"/v1beta/tunedModels/my-model-7:streamGenerateContent":                                                {Shape: ShapeGemini, Provider: ProviderGemini, Model: "my-model-7", Stream: true},
		"/v1/projects/p1/locations/us-central1/publishers/google/models/gemini-2.5-pro:streamGenerateContent": {Shape: ShapeGemini, Provider: ProviderVertexAI, Model: "gemini-2.5-pro", Stream: true},
		"/v1beta1/projects/p1/locations/global/publishers/google/models/gemini-2.5-pro:generateContent":       {Shape: ShapeGemini, Provider: ProviderVertexAI, Model: "gemini-2.5-pro"},
		"/v1/publishers/google/models/gemini-2.5-flash:streamGenerateContent":                                 {Shape: ShapeGemini, Provider: ProviderVertexAI, Model: "gemini-2.5-flash", Stream: true},
		"/v1/projects/p1/locations/us-central1/endpoints/4242:streamGenerateContent":                          {Shape: ShapeGemini, Provider: ProviderVertexAI, Model: "4242", Stream: true},
		"/api/chat":             {Shape: ShapeOllamaChat, Provider: ProviderOllama},
		"/ollama/api/generate/": {Shape: ShapeOllamaGenerate, Provider: ProviderOllama},
		"/v1/chat/completions":  {Shape: ShapeChatCompletions, Provider: ProviderOpenAI},
		"/v1/messages":          {Shape: ShapeMessages, Provider: ProviderAnthropic},
		"/v1beta/models/gemini-2.5-flash:countTokens":  {},
		"/v1beta/models/gemini-2.5-flash:embedContent": {},
		"/v1beta/models/:streamGenerateContent":        {},
		"/v1beta/files/f:streamGenerateContent":        {},
		"/v1beta/models/gemini-2.5-flash":              {},
		"gemini:streamGenerateContent":                 {},
		"/api/tags":                                    {},
		"/api/chat/x":                                  {},
	}
	for path, want := range tests {
		assert.Equal(t, want, ParseEndpoint(path), path)
	}
	assert.Equal(t, "generate_content", ShapeGemini.Operation())
	assert.Equal(t, "chat", ShapeOllamaChat.Operation())
	assert.Equal(t, "text_completion", ShapeOllamaGenerate.Operation())
	for s := ShapeChatCompletions; s < shapes; s++ {
		assert.NotEqual(t, "unknown", s.String())
		assert.NotEmpty(t, s.Provider())
		assert.NotEmpty(t, s.Operation())
	}
}

func TestEndpointParseRequest(t *testing.T) {
	tests := []struct {
		name string
		e    Endpoint
		body string
		want Request
	}{
		{
			"gemini: model and stream from the path", ParseEndpoint("/v1beta/models/gemini-2.5-flash:streamGenerateContent"),
			`{"contents":[{"parts":[{"text":"secret"}]}],"model":"other"}`,
			Request{Model: "gemini-2.5-flash", Stream: true},
		},
		{"gemini unary", ParseEndpoint("/v1beta/models/gemini-2.5-flash:generateContent"), `not json`, Request{Model: "gemini-2.5-flash"}},
		{"ollama streams by default", ParseEndpoint("/api/chat"), `{"model":"llama3.2","messages":[]}`, Request{Model: "llama3.2", Stream: true}},
		{"ollama stream false", ParseEndpoint("/api/generate"), `{"model":"llama3.2","prompt":"x","stream":false}`, Request{Model: "llama3.2"}},
		{"openai streams when asked", ParseEndpoint("/v1/chat/completions"), `{"model":"gpt-4o","stream":true}`, Request{Model: "gpt-4o", Stream: true}},
		{"openai default", ParseEndpoint("/v1/chat/completions"), `{"model":"gpt-4o"}`, Request{Model: "gpt-4o"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.e.ParseRequest([]byte(tt.body))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := ParseEndpoint("/api/chat").ParseRequest([]byte(`{`))
	require.ErrorIs(t, err, ErrMalformed)
}

func TestStreamFraming(t *testing.T) {
	tests := []struct {
		shape     Shape
		stream    bool
		status    int
		mediaType string
		want      sse.Framing
		streamed  bool
	}{
		{ShapeChatCompletions, true, 200, "text/event-stream", sse.FramingSSE, true},
		{ShapeMessages, true, 529, "text/event-stream", sse.FramingSSE, true},
		{ShapeChatCompletions, false, 200, "application/json", 0, false},
		{ShapeGemini, true, 200, "text/event-stream", sse.FramingSSE, true},
		{ShapeGemini, true, 200, "application/json", sse.FramingJSONArray, true},
		{ShapeGemini, true, 429, "application/json", 0, false},
		{ShapeGemini, false, 200, "application/json", 0, false},
		{ShapeOllamaChat, true, 200, "application/x-ndjson", sse.FramingNDJSON, true},
		{ShapeOllamaGenerate, true, 200, "", sse.FramingNDJSON, true},
		{ShapeOllamaChat, false, 200, "application/json", 0, false},
		{ShapeOllamaChat, true, 404, "application/json", 0, false},
		{ShapeChatCompletions, true, 200, "application/x-ndjson", sse.FramingNDJSON, true},
	}
	for _, tt := range tests {
		f, ok := StreamFraming(tt.shape, tt.stream, tt.status, tt.mediaType)
		assert.Equal(t, tt.streamed, ok, "%s %v %d %s", tt.shape, tt.stream, tt.status, tt.mediaType)
		if ok {
			assert.Equal(t, tt.want, f, "%s %v %d %s", tt.shape, tt.stream, tt.status, tt.mediaType)
		}
	}
}

func TestClassifyGeminiAndOllama(t *testing.T) {
	tests := []struct {
		name  string
		shape Shape
		data  string
		kind  Kind
		chunk string
		delta string
	}{
		{"gemini thought signature only", ShapeGemini, `{"candidates":[{"content":{"parts":[{"text":"","thoughtSignature":"Cq8B"}]}}]}`, KindMeta, "", ""},
		{"gemini answer beside a thought", ShapeGemini, `{"candidates":[{"content":{"parts":[{"text":"hm","thought":true},{"text":"A"},{"text":"B"}]}}]}`, KindContent, semconv.ChunkKindText, "AB"},
		{"gemini text before a call", ShapeGemini, `{"candidates":[{"content":{"parts":[{"text":"A"},{"functionCall":{"name":"f","args":{"x":1}}}]}}]}`, KindContent, semconv.ChunkKindText, "A"},
		{"gemini function call without args", ShapeGemini, `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"}}]}}]}`, KindContent, semconv.ChunkKindToolCall, ""},
		{"gemini executable code", ShapeGemini, `{"candidates":[{"content":{"parts":[{"executableCode":{"language":"PYTHON","code":"print(1)"}}]}}]}`, KindContent, semconv.ChunkKindToolCall, "print(1)"},
		{"gemini code result is no generation", ShapeGemini, `{"candidates":[{"content":{"parts":[{"codeExecutionResult":{"outcome":"OUTCOME_OK","output":"1"}}]}}]}`, KindMeta, "", ""},
		{"gemini first candidate with content", ShapeGemini, `{"candidates":[{"finishReason":"STOP"},{"content":{"parts":[{"text":"x"}]}}]}`, KindContent, semconv.ChunkKindText, "x"},
		{"gemini usage only", ShapeGemini, `{"usageMetadata":{"promptTokenCount":3}}`, KindMeta, "", ""},
		{"gemini empty data", ShapeGemini, ``, KindMeta, "", ""},
		{"ollama empty content", ShapeOllamaChat, `{"model":"m","message":{"role":"assistant","content":""},"done":false}`, KindMeta, "", ""},
		{"ollama content on the last frame", ShapeOllamaChat, `{"message":{"content":"end"},"done":true,"done_reason":"stop"}`, KindContent, semconv.ChunkKindText, "end"},
		{"ollama done without a reason", ShapeOllamaGenerate, `{"response":"","done":true}`, KindDone, "", ""},
		{"ollama generate tool call", ShapeOllamaGenerate, `{"response":"","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}],"done":false}`, KindContent, semconv.ChunkKindToolCall, `{"a":1}`},
		{"ollama error object", ShapeOllamaChat, `{"error":{"message":"x","type":"server_error"}}`, KindError, "", ""},
		{"ollama error null", ShapeOllamaChat, `{"error":null,"message":{"content":"a"}}`, KindContent, semconv.ChunkKindText, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Classify(tt.shape, ev("", tt.data))
			require.NoError(t, err)
			assert.Equal(t, tt.kind, f.Kind, "kind %s", f.Kind)
			assert.Equal(t, tt.chunk, f.ChunkKind)
			assert.Equal(t, tt.delta, f.Delta)
		})
	}
	f, err := Classify(ShapeOllamaChat, ev("", `{"error":{"message":"x","type":"server_error"}}`))
	require.NoError(t, err)
	assert.Equal(t, "server_error", f.Meta.ErrorType)
	f, err = Classify(ShapeOllamaChat, ev("", `{"error":"boom"}`))
	require.NoError(t, err)
	assert.Equal(t, ErrorTypeUnknown, f.Meta.ErrorType, "an error frame always has an error type")
	f, err = Classify(ShapeGemini, &sse.Event{Comment: true, Data: []byte(" keepalive")})
	require.NoError(t, err)
	assert.Equal(t, KindKeepalive, f.Kind)
}

func TestMetaMergeServerTimings(t *testing.T) {
	var m Meta
	m.Merge(&Meta{Server: ServerTimings{Total: 9, Eval: 4}})
	m.Merge(&Meta{ResponseModel: "x"})
	assert.Equal(t, ServerTimings{Total: 9, Eval: 4}, m.Server, "a frame without timings keeps the reported ones")
}

// FuzzStreamFramings: a Gemini array, an Ollama NDJSON body or a Bedrock
// event stream (Converse or InvokeModel) classifies to the same frames and
// metadata however the reads split it, and never as content without a
// chunk kind.
func FuzzStreamFramings(f *testing.F) {
	f.Add(uint8(0), []byte(`[{"candidates":[{"content":{"parts":[{"text":"a"}]}}]},{"candidates":[{"finishReason":"STOP"}]}]`), uint16(9))
	f.Add(uint8(1), []byte("{\"message\":{\"content\":\"a\"},\"done\":false}\n{\"done\":true,\"eval_count\":1}\n"), uint16(5))
	f.Add(uint8(0), []byte(`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}`), uint16(3))
	f.Add(uint8(2), encodeStream(f, bedrockStreams["bedrock_converse_reasoning_tool.eventstream"]), uint16(100))
	f.Add(uint8(5), encodeStream(f, bedrockStreams["bedrock_invoke_claude.eventstream"]), uint16(61))
	f.Fuzz(func(t *testing.T, which uint8, body []byte, split uint16) {
		var shape Shape
		var framing sse.Framing
		switch which % 6 {
		case 0, 3:
			shape, framing = ShapeGemini, sse.FramingJSONArray
		case 1, 4:
			shape, framing = ShapeOllamaChat, sse.FramingNDJSON
		case 2:
			shape, framing = ShapeBedrockConverse, sse.FramingEventStream
		default:
			shape, framing = ShapeBedrockInvoke, sse.FramingEventStream
		}
		run := func(s int) (frames []Frame, m Meta) {
			sp := sse.NewSplitter(framing, 1<<10, func(ev *sse.Event) {
				fr, _ := Classify(shape, ev)
				if fr.Kind == KindContent {
					assert.NotEmpty(t, fr.ChunkKind)
				}
				m.Merge(&fr.Meta)
				frames = append(frames, fr)
			})
			sp.Feed(body[:s])
			sp.Feed(body[s:])
			sp.Flush()
			return frames, m
		}
		s := 0
		if len(body) > 0 {
			s = int(split) % (len(body) + 1)
		}
		wantFrames, wantMeta := run(len(body))
		gotFrames, gotMeta := run(s)
		assert.Equal(t, wantFrames, gotFrames)
		assert.Equal(t, wantMeta, gotMeta)
	})
}

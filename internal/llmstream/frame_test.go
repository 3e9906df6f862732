// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/sse"
)

func ev(typ, data string) *sse.Event {
	return &sse.Event{Type: []byte(typ), Data: []byte(data), Retry: -1}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name  string
		shape Shape
		ev    *sse.Event
		kind  Kind
		chunk string
		delta string
		meta  Meta
	}{
		// Any shape.
		{name: "comment", shape: ShapeChatCompletions, ev: &sse.Event{Comment: true, Data: []byte(" keepalive")}, kind: KindKeepalive},
		{name: "event ping", shape: ShapeChatCompletions, ev: ev("ping", "{}"), kind: KindKeepalive},
		{name: "done", shape: ShapeChatCompletions, ev: ev("", "[DONE]"), kind: KindDone},
		{name: "empty data", shape: ShapeChatCompletions, ev: ev("", ""), kind: KindMeta},
		{name: "unknown shape", shape: ShapeUnknown, ev: ev("", `{"choices":[{"delta":{"content":"x"}}]}`), kind: KindMeta},

		// OpenAI chat completions.
		{
			name: "chat role only", shape: ShapeChatCompletions,
			ev:   ev("", `{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4o-2024","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"finish_reason":null}],"usage":null}`),
			kind: KindMeta, meta: Meta{ResponseID: "chatcmpl-1", ResponseModel: "gpt-4o-2024"},
		},
		{
			name: "chat text", shape: ShapeChatCompletions,
			ev:   ev("", `{"id":"chatcmpl-1","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`),
			kind: KindContent, chunk: semconv.ChunkKindText, delta: "Hel", meta: Meta{ResponseID: "chatcmpl-1", ResponseModel: "gpt-4o"},
		},
		{
			name: "chat refusal", shape: ShapeChatCompletions,
			ev:   ev("", `{"choices":[{"delta":{"refusal":"no"}}]}`),
			kind: KindContent, chunk: semconv.ChunkKindText, delta: "no",
		},
		{
			name: "chat tool call start", shape: ShapeChatCompletions,
			ev:   ev("", `{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`),
			kind: KindContent, chunk: semconv.ChunkKindToolCall,
		},
		{
			name: "chat tool call args", shape: ShapeChatCompletions,
			ev:   ev("", `{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"loc"}}]}}]}`),
			kind: KindContent, chunk: semconv.ChunkKindToolCall, delta: `{"loc`,
		},
		{
			name: "chat empty tool call", shape: ShapeChatCompletions,
			ev:   ev("", `{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{}}]}}]}`),
			kind: KindMeta,
		},
		{
			name: "chat legacy function call", shape: ShapeChatCompletions,
			ev:   ev("", `{"choices":[{"delta":{"function_call":{"arguments":"{}"}}}]}`),
			kind: KindContent, chunk: semconv.ChunkKindToolCall, delta: "{}",
		},
		{
			name: "chat reasoning_content", shape: ShapeChatCompletions,
			ev:   ev("", `{"choices":[{"delta":{"content":null,"reasoning_content":"hmm"}}]}`),
			kind: KindContent, chunk: semconv.ChunkKindReasoning, delta: "hmm",
		},
		{
			name: "chat reasoning", shape: ShapeChatCompletions,
			ev:   ev("", `{"choices":[{"delta":{"reasoning":"hmm"}}]}`),
			kind: KindContent, chunk: semconv.ChunkKindReasoning, delta: "hmm",
		},
		{
			name: "chat reasoning of another type", shape: ShapeChatCompletions,
			ev:   ev("", `{"choices":[{"delta":{"reasoning":{"effort":"low"},"content":"a"}}]}`),
			kind: KindContent, chunk: semconv.ChunkKindText, delta: "a",
		},
		{
			name: "chat finish", shape: ShapeChatCompletions,
			ev:   ev("", `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{},"finish_reason":"length"}]}`),
			kind: KindMeta, meta: Meta{FinishReasons: []string{"stop", "length"}},
		},
		{
			name: "chat usage frame", shape: ShapeChatCompletions,
			ev:   ev("", `{"id":"c","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}}`),
			kind: KindMeta, meta: Meta{ResponseID: "c", InputTokens: 12, OutputTokens: 34, HasInputTokens: true, HasOutputTokens: true},
		},
		{
			name: "chat error", shape: ShapeChatCompletions,
			ev:   ev("", `{"error":{"message":"overloaded","type":"server_error","code":null}}`),
			kind: KindError, meta: Meta{ErrorType: "server_error", ErrorMessage: "overloaded"},
		},
		{
			name: "chat error with code only", shape: ShapeChatCompletions,
			ev:   ev("", `{"error":{"message":"m","code":503}}`),
			kind: KindError, meta: Meta{ErrorType: "503", ErrorMessage: "m"},
		},

		// OpenAI completions.
		{
			name: "completions text", shape: ShapeCompletions,
			ev:   ev("", `{"id":"cmpl-1","object":"text_completion","model":"gpt-3.5-turbo-instruct","choices":[{"text":" world","index":0,"logprobs":null,"finish_reason":null}]}`),
			kind: KindContent, chunk: semconv.ChunkKindText, delta: " world", meta: Meta{ResponseID: "cmpl-1", ResponseModel: "gpt-3.5-turbo-instruct"},
		},
		{
			name: "completions empty text", shape: ShapeCompletions,
			ev:   ev("", `{"choices":[{"text":"","finish_reason":"stop"}]}`),
			kind: KindMeta, meta: Meta{FinishReasons: []string{"stop"}},
		},

		// OpenAI Responses.
		{
			name: "responses created", shape: ShapeResponses,
			ev:   ev("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-4.1","usage":null}}`),
			kind: KindMeta, meta: Meta{ResponseID: "resp_1", ResponseModel: "gpt-4.1"},
		},
		{
			name: "responses text delta", shape: ShapeResponses,
			ev:   ev("response.output_text.delta", `{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","sequence_number":4}`),
			kind: KindContent, chunk: semconv.ChunkKindText, delta: "Hi",
		},
		{
			name: "responses type from event field", shape: ShapeResponses,
			ev:   ev("response.output_text.delta", `{"delta":"Hi"}`),
			kind: KindContent, chunk: semconv.ChunkKindText, delta: "Hi",
		},
		{
			name: "responses function args", shape: ShapeResponses,
			ev:   ev("", `{"type":"response.function_call_arguments.delta","delta":"{\"a\""}`),
			kind: KindContent, chunk: semconv.ChunkKindToolCall, delta: `{"a"`,
		},
		{
			name: "responses reasoning summary", shape: ShapeResponses,
			ev:   ev("", `{"type":"response.reasoning_summary_text.delta","delta":"think"}`),
			kind: KindContent, chunk: semconv.ChunkKindReasoning, delta: "think",
		},
		{
			name: "responses text done is not content", shape: ShapeResponses,
			ev:   ev("", `{"type":"response.output_text.done","text":"Hi there"}`),
			kind: KindMeta,
		},
		{
			name: "responses empty delta", shape: ShapeResponses,
			ev:   ev("", `{"type":"response.output_text.delta","delta":""}`),
			kind: KindMeta,
		},
		{
			name: "responses completed", shape: ShapeResponses,
			ev:   ev("response.completed", `{"type":"response.completed","response":{"id":"resp_1","model":"gpt-4.1","status":"completed","output":[{"content":[{"text":"secret"}]}],"usage":{"input_tokens":5,"output_tokens":7,"total_tokens":12}}}`),
			kind: KindDone, meta: Meta{ResponseID: "resp_1", ResponseModel: "gpt-4.1", FinishReasons: []string{"completed"}, InputTokens: 5, OutputTokens: 7, HasInputTokens: true, HasOutputTokens: true},
		},
		{
			name: "responses incomplete", shape: ShapeResponses,
			ev:   ev("", `{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}`),
			kind: KindDone, meta: Meta{FinishReasons: []string{"max_output_tokens"}},
		},
		{
			name: "responses failed", shape: ShapeResponses,
			ev:   ev("", `{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"boom"}}}`),
			kind: KindError, meta: Meta{FinishReasons: []string{"failed"}, ErrorType: "server_error", ErrorMessage: "boom"},
		},
		{
			name: "responses error event", shape: ShapeResponses,
			ev:   ev("error", `{"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null}`),
			kind: KindError, meta: Meta{ErrorType: "rate_limit_exceeded", ErrorMessage: "slow down"},
		},

		// Anthropic messages.
		{
			name: "messages start", shape: ShapeMessages,
			ev:   ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":3,"cache_read_input_tokens":2,"output_tokens":1}}}`),
			kind: KindMeta, meta: Meta{ResponseID: "msg_1", ResponseModel: "claude-sonnet-4-5", InputTokens: 30, OutputTokens: 1, HasInputTokens: true, HasOutputTokens: true},
		},
		{
			name: "messages block start", shape: ShapeMessages,
			ev:   ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
			kind: KindMeta,
		},
		{name: "messages ping", shape: ShapeMessages, ev: ev("ping", `{"type": "ping"}`), kind: KindKeepalive},
		{name: "messages ping without event field", shape: ShapeMessages, ev: ev("", `{"type": "ping"}`), kind: KindKeepalive},
		{
			name: "messages text delta", shape: ShapeMessages,
			ev:   ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`),
			kind: KindContent, chunk: semconv.ChunkKindText, delta: "Hello",
		},
		{
			name: "messages input json delta", shape: ShapeMessages,
			ev:   ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": "}}`),
			kind: KindContent, chunk: semconv.ChunkKindToolCall, delta: `{"city": `,
		},
		{
			name: "messages empty input json delta", shape: ShapeMessages,
			ev:   ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`),
			kind: KindMeta,
		},
		{
			name: "messages thinking delta", shape: ShapeMessages,
			ev:   ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me"}}`),
			kind: KindContent, chunk: semconv.ChunkKindReasoning, delta: "Let me",
		},
		{
			name: "messages signature delta", shape: ShapeMessages,
			ev:   ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}`),
			kind: KindMeta,
		},
		{
			name: "messages delta", shape: ShapeMessages,
			ev:   ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`),
			kind: KindMeta, meta: Meta{FinishReasons: []string{"end_turn"}, OutputTokens: 15, HasOutputTokens: true},
		},
		{name: "messages stop", shape: ShapeMessages, ev: ev("message_stop", `{"type":"message_stop"}`), kind: KindDone},
		{
			name: "messages error", shape: ShapeMessages,
			ev:   ev("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
			kind: KindError, meta: Meta{ErrorType: "overloaded_error", ErrorMessage: "Overloaded"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Classify(tt.shape, tt.ev)
			require.NoError(t, err)
			assert.Equal(t, tt.kind, f.Kind, "kind %s", f.Kind)
			assert.Equal(t, tt.chunk, f.ChunkKind)
			assert.Equal(t, tt.delta, f.Delta)
			assert.Equal(t, tt.meta, f.Meta)
		})
	}
}

func TestClassifyMalformed(t *testing.T) {
	for shape := ShapeChatCompletions; shape < shapes; shape++ {
		f, err := Classify(shape, ev("", `{"choices":`))
		require.ErrorIs(t, err, ErrMalformed)
		assert.Equal(t, KindMeta, f.Kind, "a malformed frame is never content")
	}
}

func TestMetaMerge(t *testing.T) {
	var m Meta
	for _, data := range []string{
		`{"type":"message_start","message":{"id":"msg_1","model":"claude","usage":{"input_tokens":10,"output_tokens":1}}}`,
		`{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":42}}`,
	} {
		f, err := Classify(ShapeMessages, ev("", data))
		require.NoError(t, err)
		m.Merge(&f.Meta)
	}
	assert.Equal(t, Meta{
		ResponseID: "msg_1", ResponseModel: "claude", FinishReasons: []string{"max_tokens"},
		InputTokens: 10, OutputTokens: 42, HasInputTokens: true, HasOutputTokens: true,
	}, m)
}

func TestShapeFromOpenAIAndAnthropicPaths(t *testing.T) {
	tests := map[string]Shape{
		"/v1/chat/completions":         ShapeChatCompletions,
		"/openai/v1/chat/completions/": ShapeChatCompletions,
		"/v1/completions":              ShapeCompletions,
		"/v1/responses":                ShapeResponses,
		"/v1/messages":                 ShapeMessages,
		"/v1/threads/t/messages":       ShapeUnknown,
		"/v1/embeddings":               ShapeUnknown,
		"":                             ShapeUnknown,
	}
	for path, want := range tests {
		assert.Equal(t, want, ParseEndpoint(path).Shape, path)
	}
	assert.Equal(t, "chat", ShapeChatCompletions.Operation())
	assert.Equal(t, "text_completion", ShapeCompletions.Operation())
	assert.Equal(t, "chat", ShapeResponses.Operation())
	assert.Equal(t, "chat", ShapeMessages.Operation())
	assert.Empty(t, ShapeUnknown.Operation())
	assert.Equal(t, "openai", ShapeResponses.Provider())
	assert.Equal(t, "anthropic", ShapeMessages.Provider())
	assert.Equal(t, "messages", ShapeMessages.String())
}

func TestParseRequest(t *testing.T) {
	chat := ParseEndpoint("/v1/chat/completions")
	r, err := chat.ParseRequest([]byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"secret"}],"stream":true}`))
	require.NoError(t, err)
	assert.Equal(t, Request{Model: "gpt-4o", Stream: true}, r)
	r, err = chat.ParseRequest([]byte(`{"model":42,"stream":"yes"}`))
	require.NoError(t, err, "odd types leave fields empty")
	assert.Equal(t, Request{}, r)
	_, err = chat.ParseRequest([]byte(`not json`))
	require.ErrorIs(t, err, ErrMalformed)
}

// TestParseRequestReadsExactNames: the model and stream flag are read as the
// upstreams read them, by their exact names, the last one winning; a member
// that differs only in case is another member to them, and to the proxy.
func TestParseRequestReadsExactNames(t *testing.T) {
	chat := ParseEndpoint("/v1/chat/completions")
	for _, tt := range []struct {
		body string
		want Request
	}{
		{`{"model":"gpt-4o","stream":true,"Model":"cheap-mini"}`, Request{Model: "gpt-4o", Stream: true}},
		{`{"MODEL":"cheap-mini","model":"gpt-4o"}`, Request{Model: "gpt-4o"}},
		{`{"stream":false,"messages":[],"Stream":true}`, Request{}},
		{`{"model":"a","model":"b","stream":true,"stream":false}`, Request{Model: "b"}},
		{`{"mod\u0065l":"gpt-4o","stre\u0061m":true}`, Request{Model: "gpt-4o", Stream: true}},
		{`{"model":"gpt-4o","model":42,"stream":true,"stream":null}`, Request{Model: "gpt-4o"}},
		{`{"x":{"model":"nested","stream":true},"model":"top"}`, Request{Model: "top"}},
		{`[{"model":"gpt-4o","stream":true}]`, Request{}},
	} {
		got, err := chat.ParseRequest([]byte(tt.body))
		require.NoError(t, err, tt.body)
		assert.Equal(t, tt.want, got, tt.body)
	}
	for _, body := range []string{`{"model":"gpt-4o"} {"model":"x"}`, `{"model":"gpt-4o"`, `{"model":"gpt-4o",}`, `{"model" "x"}`, ``} {
		_, err := chat.ParseRequest([]byte(body))
		require.ErrorIs(t, err, ErrMalformed, body)
	}
}

// FuzzReadRequestMembers: the exact reader takes what encoding/json takes,
// and reads what it reads wherever no member's name folds onto another's.
func FuzzReadRequestMembers(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-4o","stream":true}`, `{"Model":"x","model":"y"}`, `{"stream":"true"}`, `{"stream":null}`,
		`[1,2]`, `"x"`, `{"a":[{"b":{}}],"model":"\u00e9"}`, `{"model":"gpt-4o"} x`, `{"model":1e999}`,
		"{ \"model\" :\t\"x\" ,\n\"stream\" : true }", `{"mod\u0065l":"x","a\"b":[1,{"c":"]}"}],"stream":false}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		got, err := readRequestMembers([]byte(body))
		if valid := json.Valid([]byte(body)); valid != (err == nil) {
			t.Fatalf("%q: valid %v, error %v", body, valid, err)
		}
		if err != nil {
			return
		}
		var members map[string]json.RawMessage
		if json.Unmarshal([]byte(body), &members) != nil {
			return // not an object
		}
		seen := map[string]bool{}
		dec := json.NewDecoder(strings.NewReader(body))
		_, _ = dec.Token()
		for dec.More() {
			tok, _ := dec.Token()
			key := strings.ToLower(tok.(string))
			if (key == "model" || key == "stream") && (seen[key] || key != tok) {
				return // a repeated or case-folded name: encoding/json folds it
			}
			seen[key] = true
			var skip json.RawMessage
			_ = dec.Decode(&skip)
		}
		var want requestMembers
		_ = decode([]byte(body), &struct {
			Model  *string `json:"model"`
			Stream **bool  `json:"stream"`
		}{&want.Model, &want.Stream})
		if got.Model != want.Model || (got.Stream == nil) != (want.Stream == nil) || got.Stream != nil && *got.Stream != *want.Stream {
			t.Fatalf("%q: got %+v, encoding/json %+v", body, got, want)
		}
	})
}

func TestParseResponse(t *testing.T) {
	tests := []struct {
		name  string
		shape Shape
		body  string
		want  Meta
	}{
		{
			"chat", ShapeChatCompletions, `{"id":"chatcmpl-9","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"secret"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":12}}`,
			Meta{ResponseID: "chatcmpl-9", ResponseModel: "gpt-4o", FinishReasons: []string{"stop"}, InputTokens: 9, OutputTokens: 12, HasInputTokens: true, HasOutputTokens: true},
		},
		{
			"responses", ShapeResponses, `{"id":"resp_9","model":"gpt-4.1","status":"completed","output":[],"usage":{"input_tokens":3,"output_tokens":4}}`,
			Meta{ResponseID: "resp_9", ResponseModel: "gpt-4.1", FinishReasons: []string{"completed"}, InputTokens: 3, OutputTokens: 4, HasInputTokens: true, HasOutputTokens: true},
		},
		{
			"messages", ShapeMessages, `{"id":"msg_9","model":"claude","stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":6}}`,
			Meta{ResponseID: "msg_9", ResponseModel: "claude", FinishReasons: []string{"tool_use"}, InputTokens: 5, OutputTokens: 6, HasInputTokens: true, HasOutputTokens: true},
		},
		{
			"messages error", ShapeMessages, `{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}`,
			Meta{ErrorType: "rate_limit_error", ErrorMessage: "slow"},
		},
		{
			"openai error: its code before its type", ShapeChatCompletions, `{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}`,
			Meta{ErrorType: "invalid_api_key", ErrorMessage: "bad key"},
		},
		{
			"openai 429", ShapeChatCompletions, `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			Meta{ErrorType: "rate_limit_exceeded", ErrorMessage: "Rate limit reached for requests"},
		},
		{
			"openai error without code", ShapeResponses, `{"error":{"message":"m","type":"server_error","code":null}}`,
			Meta{ErrorType: "server_error", ErrorMessage: "m"},
		},
		{
			"error naming nothing: the caller falls back on the status", ShapeChatCompletions, `{"error":{"message":"m"}}`,
			Meta{ErrorMessage: "m"},
		},
		{"unknown shape error", ShapeUnknown, `{"error":{"code":"x"}}`, Meta{ErrorType: "x"}},
		{
			"gemini", ShapeGemini, `{"candidates":[{"content":{"parts":[{"text":"secret"}],"role":"model"},"finishReason":"MAX_TOKENS"}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":9,"thoughtsTokenCount":3,"toolUsePromptTokenCount":2},"modelVersion":"gemini-2.5-pro","responseId":"r1"}`,
			Meta{ResponseID: "r1", ResponseModel: "gemini-2.5-pro", FinishReasons: []string{"MAX_TOKENS"}, InputTokens: 6, OutputTokens: 12, HasInputTokens: true, HasOutputTokens: true},
		},
		{
			"gemini error: its status name before its code", ShapeGemini, `{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}`,
			Meta{ErrorType: "RESOURCE_EXHAUSTED", ErrorMessage: "Resource has been exhausted"},
		},
		{"gemini error in an array", ShapeGemini, `[{"error":{"code":400,"message":"bad"}}]`, Meta{ErrorType: "400", ErrorMessage: "bad"}},
		{
			"ollama chat", ShapeOllamaChat, `{"model":"llama3.2","created_at":"2026-11-29T12:00:00Z","message":{"role":"assistant","content":"secret"},"done_reason":"stop","done":true,"total_duration":5,"load_duration":1,"prompt_eval_count":3,"prompt_eval_duration":2,"eval_count":7,"eval_duration":2}`,
			Meta{
				ResponseModel: "llama3.2", FinishReasons: []string{"stop"}, InputTokens: 3, OutputTokens: 7, HasInputTokens: true, HasOutputTokens: true,
				Server: ServerTimings{Total: 5, Load: 1, PromptEval: 2, Eval: 2},
			},
		},
		{"ollama error: a message only", ShapeOllamaGenerate, `{"error":"model 'x' not found"}`, Meta{ErrorMessage: "model 'x' not found"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseResponse(tt.shape, []byte(tt.body))
			require.NoError(t, err)
			assert.Equal(t, tt.want, m)
		})
	}
	_, err := ParseResponse(ShapeMessages, []byte(`<html>`))
	require.ErrorIs(t, err, ErrMalformed)
}

func FuzzClassify(f *testing.F) {
	f.Add(uint8(1), "", `{"choices":[{"delta":{"content":"x"}}]}`)
	f.Add(uint8(3), "response.output_text.delta", `{"type":"response.output_text.delta","delta":"x"}`)
	f.Add(uint8(4), "content_block_delta", `{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}`)
	f.Add(uint8(4), "", `{"type":"message_start","message":{"usage":{"input_tokens":1}}}`)
	f.Add(uint8(2), "", `[DONE]`)
	f.Add(uint8(ShapeGemini), "", `{"candidates":[{"content":{"parts":[{"text":"a","thought":true},{"functionCall":{"name":"f","args":{}}}]}}],"usageMetadata":{"promptTokenCount":1}}`)
	f.Add(uint8(ShapeGemini), "", `{"error":{"code":503,"status":"UNAVAILABLE"}}`)
	f.Add(uint8(ShapeOllamaChat), "", `{"model":"m","message":{"content":"","tool_calls":[{"function":{"name":"f","arguments":{}}}]},"done":false}`)
	f.Add(uint8(ShapeOllamaGenerate), "", `{"response":"","done":true,"done_reason":"stop","eval_count":3}`)
	f.Add(uint8(ShapeOllamaChat), "", `{"error":{"message":"x","code":1}}`)
	f.Add(uint8(ShapeBedrockConverse), "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"x"}}}`)
	f.Add(uint8(ShapeBedrockConverse), "metadata", `{"usage":{"inputTokens":1,"outputTokens":2},"metrics":{"latencyMs":3}}`)
	f.Add(uint8(ShapeBedrockInvoke), "chunk", `{"bytes":"eyJ0eXBlIjoibWVzc2FnZV9zdG9wIn0="}`)
	f.Fuzz(func(t *testing.T, shape uint8, typ, data string) {
		s := Shape(shape % uint8(shapes))
		fr, err := Classify(s, ev(typ, data))
		if err != nil {
			assert.Equal(t, KindMeta, fr.Kind)
		}
		if fr.Kind == KindContent {
			assert.Contains(t, []string{semconv.ChunkKindText, semconv.ChunkKindToolCall, semconv.ChunkKindReasoning}, fr.ChunkKind)
		} else {
			assert.Empty(t, fr.ChunkKind)
			assert.Empty(t, fr.Delta)
		}
		_, _ = ParseResponse(s, []byte(data))
		_, _ = Endpoint{Shape: s}.ParseRequest([]byte(data))
	})
}

func BenchmarkClassify(b *testing.B) {
	frames := []struct {
		name  string
		shape Shape
		ev    *sse.Event
	}{
		{"chat", ShapeChatCompletions, ev("", `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_4d82a7f2","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}],"usage":null}`)},
		{"responses", ShapeResponses, ev("response.output_text.delta", `{"type":"response.output_text.delta","item_id":"msg_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654","output_index":0,"content_index":0,"delta":" world","sequence_number":7}`)},
		{"messages", ShapeMessages, ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" world"}}`)},
		{"gemini", ShapeGemini, ev("", `{"candidates":[{"content":{"parts":[{"text":" world"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":8,"totalTokenCount":8},"modelVersion":"gemini-2.5-flash","responseId":"nKdLadqXLvOgz7IPkuLx-Ao"}`)},
		{"ollama", ShapeOllamaChat, ev("", `{"model":"llama3.2","created_at":"2026-11-29T12:00:00.512Z","message":{"role":"assistant","content":" world"},"done":false}`)},
	}
	for _, fr := range frames {
		b.Run(fr.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if f, _ := Classify(fr.shape, fr.ev); f.Kind != KindContent {
					b.Fatal("not content")
				}
			}
		})
	}
}

// TestChatFastPath pins which frames the fast chat classifier takes: every
// ordinary frame, escapes and all (else the proxy pays encoding/json's price
// per chunk), and nothing it cannot classify exactly as encoding/json does.
func TestChatFastPath(t *testing.T) {
	takes := map[string]Frame{
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}],"usage":null}`: {
			Kind: KindContent, ChunkKind: semconv.ChunkKindText, Delta: " world", Meta: Meta{ResponseID: "chatcmpl-1", ResponseModel: "gpt-4o"},
		},
		`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null}}]}`: {Meta: Meta{ResponseID: "c"}},
		"{ \"choices\" : [ { \"delta\" : { \"content\" : \"a\\\"b\\\\c\\/\\n\\t\\u00e9\\ud83d\\ude00\" } } ] }\r\n": {
			Kind: KindContent, ChunkKind: semconv.ChunkKindText, Delta: "a\"b\\c/\n\té😀",
		},
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`:                                             {Meta: Meta{FinishReasons: []string{"stop"}}},
		`{"choices":[{"text":"Once","index":0,"finish_reason":null,"logprobs":null}]}`:                            {Kind: KindContent, ChunkKind: semconv.ChunkKindText, Delta: "Once"},
		`{"choices":[{"delta":{"reasoning_content":"hmm","content":null}}]}`:                                      {Kind: KindContent, ChunkKind: semconv.ChunkKindReasoning, Delta: "hmm"},
		`{"choices":[{"delta":{"content":"x","tool_calls":null}}],"x":[1,-2.5e3,true,false,null,{"y":"\u0041"}]}`: {Kind: KindContent, ChunkKind: semconv.ChunkKindText, Delta: "x"},
		`{"choices":null,"model":null}`:                                                                           {},
	}
	for data, want := range takes {
		var f Frame
		require.True(t, classifyChatFast([]byte(data), &f), "fast path refused %s", data)
		assert.Equal(t, want, f, data)
	}
	for _, data := range []string{
		`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
		`{"error":{"message":"overloaded","type":"server_error"}}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}`,
		`{"id":"a","id":"b"}`, `{"ID":"a"}`, `{"\u0069d":"a"}`, `{"choices":[{"delta":{"Content":"k"}}]}`,
		`{"choices":[{"delta":{"content":"\ud83d"}}]}`, "{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}",
		`{"choices":[{"delta":{"content":5}}]}`, `{"choices":[null]}`, `{"id":"a"} x`, `{"id":"a",}`, `{"n":01}`,
		`{"n":-}`, `{"n":1.}`, `{"n":1e}`, `{"s":"a` + "\t" + `b"}`, `[1]`, ``,
		`{"x":` + strings.Repeat("[", maxSkipDepth+2) + strings.Repeat("]", maxSkipDepth+2) + `}`,
	} {
		var f Frame
		assert.False(t, classifyChatFast([]byte(data), &f), "fast path took %s", data)
	}
}

// FuzzChatFastPath: whenever the fast chat classifier takes a frame, it
// classifies it exactly as the encoding/json one does.
func FuzzChatFastPath(f *testing.F) {
	for _, s := range []string{
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`,
		`{"choices":[{"delta":{"role":"assistant","content":"","refusal":null}}],"usage":null}`,
		`{"choices":[{"text":" world","finish_reason":"stop"},{"delta":{"reasoning_content":"x"}}]}`,
		`{"ID":"x","choices":[]}`, `{"id":"a","id":"b"}`, `{"choices":[{"delta":{"content":"\u00e9\ud83d\ude00"}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{}"}}]}}]}`, `{"choices":null,"model":null}`,
		`{"choices":[{"delta":{"content":"\xff"}}]}`, `[1]`, `{"Choices":[{"delta":{"content":"k"}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast Frame
		if !classifyChatFast(data, &fast) {
			return
		}
		var slow Frame
		require.NoError(t, classifyChat(data, &slow), "the fast path took a frame encoding/json rejects")
		require.Equal(t, slow, fast)
	})
}

func BenchmarkClassifyChatSlowPath(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_4d82a7f2","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	b.ReportAllocs()
	for b.Loop() {
		var f Frame
		if err := classifyChat(data, &f); err != nil || f.Kind != KindContent {
			b.Fatal("not content")
		}
	}
}

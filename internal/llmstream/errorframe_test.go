// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/sse"
)

const (
	frameMessage = `stream stalled: no content for 30s ("quoted")`
	// upstreamText is content the upstream sent before the stall: it must
	// never reach the error's message.
	upstreamText = "Hel"
)

// Openers of each shape's stream, as the client got them before a stall:
// whole frames, ending on a frame boundary.
var (
	chatOpener      = `data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hel"}}]}`
	responsesOpener = "event: response.output_text.delta\n" +
		`data: {"type":"response.output_text.delta","sequence_number":41,"item_id":"m1","output_index":0,"content_index":0,"delta":"Hel"}`
	messagesOpener = "event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`
	geminiElement     = `{"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash"}`
	ollamaChatLine    = `{"model":"llama3.2","created_at":"2026-11-29T12:00:00.5Z","message":{"role":"assistant","content":"Hel"},"done":false}`
	ollamaGenLine     = `{"model":"llama3.2","created_at":"2026-11-29T12:00:00.5Z","response":"Hel","done":false}`
	geminiSSEOpener   = "data: " + geminiElement
	completionsOpener = `data: {"id":"c1","object":"text_completion","choices":[{"text":"Hel","index":0}]}`
)

// errorFrameCase is the bytes a client got of a stream before the guard's
// error frame: golden says where the whole is kept.
type errorFrameCase struct {
	golden  string
	shape   Shape
	framing sse.Framing
	sent    string
	// cut: the bytes end inside a frame, which Server-Sent Events leave as
	// malformed as the upstream did (a JSON array's element and an NDJSON
	// line are completed): only the error frame after it is checked.
	cut bool
}

var errorFrameCases = []errorFrameCase{
	{"chat_after_event", ShapeChatCompletions, sse.FramingSSE, chatOpener + "\n\n", false},
	{"chat_after_line", ShapeChatCompletions, sse.FramingSSE, chatOpener + "\n", false},
	{"chat_after_crlf_line", ShapeChatCompletions, sse.FramingSSE, chatOpener + "\r\n", false},
	{"chat_after_cr", ShapeChatCompletions, sse.FramingSSE, chatOpener + "\r", false},
	{"chat_after_crlf_event", ShapeChatCompletions, sse.FramingSSE, chatOpener + "\r\n\r\n", false},
	{"chat_after_keepalive_line", ShapeChatCompletions, sse.FramingSSE, chatOpener + "\n\n: keepalive\n", false},
	{"chat_mid_line", ShapeChatCompletions, sse.FramingSSE, chatOpener[:40], true},
	{"chat_nothing_sent", ShapeChatCompletions, sse.FramingSSE, "", false},
	{"completions_after_line", ShapeCompletions, sse.FramingSSE, completionsOpener + "\n", false},
	{"responses_after_event", ShapeResponses, sse.FramingSSE, responsesOpener + "\n\n", false},
	{"responses_after_line", ShapeResponses, sse.FramingSSE, responsesOpener + "\n", false},
	{"responses_nothing_sent", ShapeResponses, sse.FramingSSE, "", false},
	{"messages_after_event", ShapeMessages, sse.FramingSSE, messagesOpener + "\n\n", false},
	{"messages_after_line", ShapeMessages, sse.FramingSSE, messagesOpener + "\n", false},
	{"messages_after_event_line", ShapeMessages, sse.FramingSSE, "event: content_block_delta\n", false},
	{"gemini_sse_after_event", ShapeGemini, sse.FramingSSE, geminiSSEOpener + "\r\n\r\n", false},
	{"gemini_sse_after_line", ShapeGemini, sse.FramingSSE, geminiSSEOpener + "\n", false},
	{"gemini_array_after_element", ShapeGemini, sse.FramingJSONArray, "[" + geminiElement, false},
	{"gemini_array_after_comma", ShapeGemini, sse.FramingJSONArray, "[" + geminiElement + "\n,", false},
	{"gemini_array_open", ShapeGemini, sse.FramingJSONArray, "[", false},
	{"gemini_array_nothing_sent", ShapeGemini, sse.FramingJSONArray, "", false},
	{"gemini_array_closed", ShapeGemini, sse.FramingJSONArray, "[" + geminiElement + "]", false},
	{"gemini_array_mid_key", ShapeGemini, sse.FramingJSONArray, "[" + geminiElement[:30], true},
	{"gemini_array_mid_text", ShapeGemini, sse.FramingJSONArray, "[" + geminiElement[:strings.Index(geminiElement, "Hel")+2], true},
	{"gemini_array_after_colon", ShapeGemini, sse.FramingJSONArray, "[" + geminiElement[:strings.Index(geminiElement, `"modelVersion":`)+15], true},
	{"ollama_chat_after_line", ShapeOllamaChat, sse.FramingNDJSON, ollamaChatLine + "\n", false},
	{"ollama_chat_mid_line", ShapeOllamaChat, sse.FramingNDJSON, ollamaChatLine[:30], true},
	{"ollama_chat_white_space_line", ShapeOllamaChat, sse.FramingNDJSON, ollamaChatLine + "\n  ", false},
	{"ollama_generate_after_line", ShapeOllamaGenerate, sse.FramingNDJSON, ollamaGenLine + "\r\n", false},
}

// frameEnd ends a frame in each framing.
var frameEnd = map[sse.Framing]string{sse.FramingSSE: "\n\n", sse.FramingNDJSON: "\n"}

// events splits a body in its framing and classifies each event.
func events(t *testing.T, shape Shape, framing sse.Framing, body []byte) ([]Frame, [][]byte) {
	t.Helper()
	var frames []Frame
	var data [][]byte
	sp := sse.NewSplitter(framing, 0, func(ev *sse.Event) {
		f, _ := Classify(shape, ev)
		frames = append(frames, f)
		data = append(data, bytes.Clone(ev.Data))
	})
	sp.Feed(body)
	sp.Flush()
	return frames, data
}

// TestErrorFrameGolden holds each shape's error frame after the bytes a
// stream may have ended in, as the client gets the whole: the frame starts
// on a frame boundary, the frames before it are what they were, and the
// frame is the shape's error with the guard's message and nothing of the
// upstream's content in it.
func TestErrorFrameGolden(t *testing.T) {
	for _, tc := range errorFrameCases {
		t.Run(tc.golden, func(t *testing.T) {
			b := NewBoundary(tc.shape, tc.framing)
			b.Track([]byte(tc.sent))
			whole := append([]byte(tc.sent), b.ErrorFrame(http.StatusGatewayTimeout, "stall_timeout", frameMessage)...)

			// Tracked a byte at a time, the frame is the same.
			byByte := NewBoundary(tc.shape, tc.framing)
			for i := range len(tc.sent) {
				byByte.Track([]byte{tc.sent[i]})
			}
			assert.Equal(t, string(whole[len(tc.sent):]), string(byByte.ErrorFrame(http.StatusGatewayTimeout, "stall_timeout", frameMessage)))

			golden := filepath.Join("testdata", "errorframes", tc.golden+".golden")
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
				require.NoError(t, os.WriteFile(golden, whole, 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run with -update to create it")
			assert.Equal(t, string(want), string(whole))

			if tc.golden == "gemini_array_closed" {
				assert.Empty(t, bytes.TrimSpace(whole[len(tc.sent):]), "nothing can follow a closed array")
				return
			}
			// The frames the client got, as the upstream meant them.
			before, _ := events(t, tc.shape, tc.framing, append([]byte(tc.sent), frameEnd[tc.framing]...))
			frames, data := events(t, tc.shape, tc.framing, whole)
			require.NotEmpty(t, frames)
			last := frames[len(frames)-1]
			assert.Equal(t, KindError, last.Kind, "%q", data[len(data)-1])
			assert.Equal(t, frameMessage, last.Meta.ErrorMessage)
			assert.NotContains(t, string(data[len(data)-1]), upstreamText, "the error event is its own")
			if !tc.cut {
				require.Len(t, frames, len(before)+1, "the frames before the error are untouched")
				for i := range before {
					assert.Equal(t, before[i].Kind, frames[i].Kind)
				}
			}
			if tc.framing == sse.FramingJSONArray {
				assert.True(t, json.Valid(whole), "the array is closed: %s", whole)
			}
		})
	}
}

func TestErrorFrameFields(t *testing.T) {
	frame := func(shape Shape, framing sse.Framing, sent string, status int) map[string]any {
		b := NewBoundary(shape, framing)
		b.Track([]byte(sent))
		_, data := events(t, shape, framing, append([]byte(sent), b.ErrorFrame(status, "stall_timeout", "m")...))
		var m map[string]any
		require.NoError(t, json.Unmarshal(data[len(data)-1], &m))
		return m
	}
	t.Run("responses carries the next sequence_number", func(t *testing.T) {
		m := frame(ShapeResponses, sse.FramingSSE, responsesOpener+"\n\n", http.StatusGatewayTimeout)
		assert.Equal(t, map[string]any{
			"type": "error", "code": "stall_timeout", "message": "m", "param": nil, "sequence_number": 42.0,
			"error": map[string]any{"message": "m", "type": "server_error", "param": nil, "code": "stall_timeout"},
		}, m)
		assert.Equal(t, 0.0, frame(ShapeResponses, sse.FramingSSE, "", http.StatusGatewayTimeout)["sequence_number"])
	})
	t.Run("chat", func(t *testing.T) {
		assert.Equal(t, map[string]any{"error": map[string]any{
			"message": "m", "type": "server_error", "param": nil, "code": "stall_timeout",
		}}, frame(ShapeChatCompletions, sse.FramingSSE, "", http.StatusGatewayTimeout))
	})
	t.Run("messages", func(t *testing.T) {
		assert.Equal(t, map[string]any{"type": "error", "error": map[string]any{"type": "timeout_error", "message": "m"}},
			frame(ShapeMessages, sse.FramingSSE, "", http.StatusGatewayTimeout))
		assert.Equal(t, "overloaded_error",
			frame(ShapeMessages, sse.FramingSSE, "", http.StatusServiceUnavailable)["error"].(map[string]any)["type"])
	})
	t.Run("gemini", func(t *testing.T) {
		want := map[string]any{"error": map[string]any{"code": 504.0, "message": "m", "status": "DEADLINE_EXCEEDED"}}
		assert.Equal(t, want, frame(ShapeGemini, sse.FramingSSE, "", http.StatusGatewayTimeout))
		assert.Equal(t, want, frame(ShapeGemini, sse.FramingJSONArray, "[", http.StatusGatewayTimeout))
		assert.Equal(t, "UNAVAILABLE",
			frame(ShapeGemini, sse.FramingSSE, "", http.StatusServiceUnavailable)["error"].(map[string]any)["status"])
	})
	t.Run("ollama", func(t *testing.T) {
		for _, shape := range []Shape{ShapeOllamaChat, ShapeOllamaGenerate} {
			assert.Equal(t, map[string]any{"error": "m"}, frame(shape, sse.FramingNDJSON, "", http.StatusGatewayTimeout))
		}
	})
}

// TestEveryShapeHasAnErrorFrame: the shapes a proxy may guard are every
// shape but the unknown one.
func TestEveryShapeHasAnErrorFrame(t *testing.T) {
	for s := range shapes {
		assert.Equal(t, s != ShapeUnknown, HasErrorFrame(s), s.String())
	}
}

func TestErrorBody(t *testing.T) {
	for s := range shapes {
		t.Run(s.String(), func(t *testing.T) {
			body := ErrorBody(s, http.StatusGatewayTimeout, "ttft_timeout", "no content in 10s")
			require.True(t, json.Valid(body))
			if s == ShapeBedrockConverse || s == ShapeBedrockInvoke {
				// Bedrock's body is the message; its type is a header.
				assert.JSONEq(t, `{"message":"no content in 10s"}`, string(body))
				name, value := ErrorHeader(s, http.StatusGatewayTimeout)
				assert.Equal(t, "X-Amzn-Errortype", name)
				assert.Equal(t, "ModelTimeoutException", value)
				return
			}
			name, _ := ErrorHeader(s, http.StatusGatewayTimeout)
			assert.Empty(t, name, "the other APIs' error type is in the body")
			m, err := ParseResponse(s, body)
			require.NoError(t, err)
			if s != ShapeOllamaChat && s != ShapeOllamaGenerate {
				assert.NotEmpty(t, m.ErrorType, "Ollama's error has no type")
			}
			assert.Equal(t, "no content in 10s", m.ErrorMessage)
		})
	}
	assert.JSONEq(t, `{"type":"error","error":{"type":"timeout_error","message":"m"}}`,
		string(ErrorBody(ShapeMessages, http.StatusGatewayTimeout, "ttft_timeout", "m")))
	assert.JSONEq(t, `{"error":{"message":"m","type":"server_error","param":null,"code":"ttft_timeout"}}`,
		string(ErrorBody(ShapeChatCompletions, http.StatusGatewayTimeout, "ttft_timeout", "m")))
	assert.JSONEq(t, `{"error":{"code":504,"message":"m","status":"DEADLINE_EXCEEDED"}}`,
		string(ErrorBody(ShapeGemini, http.StatusGatewayTimeout, "ttft_timeout", "m")))
	assert.JSONEq(t, `{"error":"m"}`, string(ErrorBody(ShapeOllamaChat, http.StatusGatewayTimeout, "ttft_timeout", "m")))
}

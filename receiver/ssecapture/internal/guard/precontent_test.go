// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/llmstream"
)

// precontentCase is one API's stream: frames that carry no content (the
// guard holds them and commits to nothing), the first content chunk, and
// an error the provider reports inside a 200 stream before any content.
type precontentCase struct {
	name      string
	shape     llmstream.Shape
	mediaType string
	idle      []string
	content   string
	err       string
}

var precontentCases = []precontentCase{
	{
		name: "chat", shape: llmstream.ShapeChatCompletions, mediaType: "text/event-stream",
		idle: []string{
			": ping\n\n",
			"event: ping\ndata: {}\n\n",
			`data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n",
			`data: {"id":"c1","choices":[{"index":0,"delta":{"content":""}}]}` + "\n\n",
			`data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0}]}}]}` + "\n\n",
			`data: {"id":"c1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":0}}` + "\n\n",
			"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{}}]}\n\n",
		},
		content: `data: {"id":"c1","choices":[{"index":0,"delta":{"content":" "}}]}` + "\n\n",
		err:     `data: {"error":{"message":"The server had an error","type":"server_error","code":null}}` + "\n\n",
	},
	{
		name: "chat tool call", shape: llmstream.ShapeChatCompletions, mediaType: "text/event-stream",
		idle:    []string{`data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}` + "\n\n"},
		content: `data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":""}}]}}]}` + "\n\n",
		err:     `data: {"error":{"message":"overloaded","type":"server_error"}}` + "\n\n",
	},
	{
		name: "responses", shape: llmstream.ShapeResponses, mediaType: "text/event-stream",
		idle: []string{
			"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\",\"model\":\"gpt-4o\"}}\n\n",
			"event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"response\":{\"id\":\"r1\"}}\n\n",
			"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"message\"}}\n\n",
			"event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\"}\n\n",
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"\"}\n\n",
			"event: response.web_search_call.searching\ndata: {\"type\":\"response.web_search_call.searching\"}\n\n",
		},
		content: "event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response.reasoning_summary_text.delta\",\"delta\":\"hm\"}\n\n",
		err:     "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"x\",\"sequence_number\":3}\n\n",
	},
	{
		name: "responses failed", shape: llmstream.ShapeResponses, mediaType: "text/event-stream",
		idle:    []string{"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\"}}\n\n"},
		content: "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n",
		err:     "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"r1\",\"status\":\"failed\"}}\n\n",
	},
	{
		name: "messages", shape: llmstream.ShapeMessages, mediaType: "text/event-stream",
		idle: []string{
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"model\":\"claude\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
			"event: ping\ndata: {\"type\": \"ping\"}\n\n",
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\"}}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"abc\"}}\n\n",
		},
		content: "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hm\"}}\n\n",
		err:     "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
	},
	{
		name: "gemini sse", shape: llmstream.ShapeGemini, mediaType: "text/event-stream",
		idle: []string{
			`data: {"candidates":[{"content":{"parts":[{"text":""}],"role":"model"}}]}` + "\r\n\r\n",
			`data: {"usageMetadata":{"promptTokenCount":3},"modelVersion":"gemini-2.5-flash"}` + "\r\n\r\n",
		},
		content: `data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}],"role":"model"}}]}` + "\r\n\r\n",
		err:     `data: {"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}` + "\r\n\r\n",
	},
	{
		name: "gemini array", shape: llmstream.ShapeGemini, mediaType: "application/json",
		idle: []string{
			"[{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\"}],\"role\":\"model\"}}]}\n",
			",\r\n{\"usageMetadata\":{\"promptTokenCount\":3}}\n",
		},
		content: ",\r\n{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi\"}],\"role\":\"model\"}}]}\n",
		err:     ",\r\n{\"error\":{\"code\":503,\"message\":\"overloaded\",\"status\":\"UNAVAILABLE\"}}\n",
	},
	{
		name: "ollama", shape: llmstream.ShapeOllamaChat, mediaType: "application/x-ndjson",
		idle: []string{
			`{"model":"llama3","message":{"role":"assistant","content":""},"done":false}` + "\n",
			`{"model":"llama3","message":{"role":"assistant","content":"","thinking":""},"done":false}` + "\n",
		},
		content: `{"model":"llama3","message":{"role":"assistant","content":"","thinking":"hm"},"done":false}` + "\n",
		err:     `{"error":"model runner has unexpectedly stopped"}` + "\n",
	},
	{
		name: "bedrock converse", shape: llmstream.ShapeBedrockConverse, mediaType: "application/vnd.amazon.eventstream",
		idle: []string{
			bedrockMessage("event", ":event-type", "messageStart", `{"role":"assistant"}`),
			bedrockMessage("event", ":event-type", "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":""}}`),
			bedrockMessage("event", ":event-type", "contentBlockStart", `{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"t","name":"f"}}}`),
		},
		content: bedrockMessage("event", ":event-type", "contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{"}}}`),
		err:     bedrockMessage("exception", ":exception-type", "throttlingException", `{"message":"Too many tokens"}`),
	},
}

// bedrockMessage is one message of an AWS event stream.
func bedrockMessage(messageType, typeHeader, typ, payload string) string {
	var h eventstream.Headers
	h.Set(":message-type", eventstream.StringValue(messageType))
	h.Set(typeHeader, eventstream.StringValue(typ))
	h.Set(":content-type", eventstream.StringValue("application/json"))
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, eventstream.Message{Headers: h, Payload: []byte(payload)}); err != nil {
		panic(err)
	}
	return b.String()
}

// callShape starts a guarded call of shape; the result comes on the channel.
func (h *harness) callShape(t *testing.T, shape llmstream.Shape) <-chan result {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	in, _ := url.Parse("/v1/x")
	body := []byte(`{"model":"m","stream":true}`)
	s := h.guard.NewSession(h.stopping, "p", "m", shape, in, body, h.clock.Now().UnixNano())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://primary.example/v1/x", strings.NewReader(string(body)))
	require.NoError(t, err)
	out := make(chan result, 1)
	go func() {
		resp, err := s.RoundTrip(req, h.primary)
		out <- result{resp, err}
		if resp != nil {
			t.Cleanup(func() { _ = resp.Body.Close(); s.Finish() })
		}
	}()
	return out
}

// TestFramesWithoutContentCommitNothing: for every API, keepalives, pings,
// empty and role-only deltas, usage-only chunks and the like hold the
// attempt (the client gets nothing yet); the first content chunk, whatever
// its kind (a space, a tool call's start, reasoning), commits it with
// every byte it held.
func TestFramesWithoutContentCommitNothing(t *testing.T) {
	for _, tc := range precontentCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Rule{MaxAttempts: 2})
			out := h.callShape(t, tc.shape)
			p := h.primary.next(t)
			p.streamWith(http.Header{"Content-Type": {tc.mediaType}}, tc.idle...)
			pending(t, out)
			p.write(tc.content)
			r := wait(t, out)
			require.NoError(t, r.err)
			want := strings.Join(tc.idle, "") + tc.content
			assert.Equal(t, want, readN(t, r.resp.Body, len(want)), "every held byte, then the content")
			h.alt.none(t)
		})
	}
}

// TestErrorFrameBeforeContentFailsOver: an error the provider reports
// inside a 200 stream before any content (OpenAI's error object or
// response.failed, Anthropic's overloaded_error, Google's UNAVAILABLE,
// Ollama's error line) is a failed attempt: the alternate gets the call at
// once, and the client gets only the alternate's bytes.
func TestErrorFrameBeforeContentFailsOver(t *testing.T) {
	for _, tc := range precontentCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Rule{MaxAttempts: 2})
			out := h.callShape(t, tc.shape)
			p := h.primary.next(t)
			p.streamWith(http.Header{"Content-Type": {tc.mediaType}}, append(tc.idle[:1:1], tc.err)...)
			a := h.alt.next(t)
			// The failed attempt's body is closed at once (net/http then
			// closes its connection), not held for the length of the call.
			assert.Eventually(t, func() bool {
				_, err := p.w.Write([]byte(": x\n\n"))
				return err != nil
			}, 5*time.Second, 5*time.Millisecond, "the failed attempt's body is closed")
			a.streamWith(http.Header{"Content-Type": {tc.mediaType}}, tc.idle[0], tc.content)
			r := wait(t, out)
			require.NoError(t, r.err)
			want := tc.idle[0] + tc.content
			assert.Equal(t, want, readN(t, r.resp.Body, len(want)))
		})
	}
}

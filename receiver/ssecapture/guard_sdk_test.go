// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/llmstream"
)

// The openers of each shape's stream: what an upstream sends before the
// guard's error frame ends it.
var streamOpeners = map[llmstream.Shape]string{
	llmstream.ShapeChatCompletions: `data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hel"}}]}` + "\n\n: keepalive\n\n",
	llmstream.ShapeResponses: "event: response.output_text.delta\n" +
		`data: {"type":"response.output_text.delta","item_id":"m1","output_index":0,"content_index":0,"delta":"Hel","sequence_number":1}` + "\n\n",
	llmstream.ShapeMessages: "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"claude-x","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}` + "\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n",
}

const stallMessage = "stream stalled: no content chunk for 30s (sse_capture guard, stall_timeout)"

// serveBytes answers every request with status, content type and body.
func serveBytes(t *testing.T, status int, contentType string, body []byte) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func stallFrame(shape llmstream.Shape) []byte {
	return append([]byte(streamOpeners[shape]), llmstream.ErrorFrame(shape, http.StatusGatewayTimeout, "stall_timeout", stallMessage, false)...)
}

// TestSDKsRaiseOnTheGuardsErrorFrame: each official SDK raises its error
// type for the stream, with the guard's message, on the frame that ends a
// stalled stream.
func TestSDKsRaiseOnTheGuardsErrorFrame(t *testing.T) {
	t.Run("openai chat", func(t *testing.T) {
		url := serveBytes(t, http.StatusOK, "text/event-stream", stallFrame(llmstream.ShapeChatCompletions))
		client := openai.NewClient(openaioption.WithBaseURL(url+"/v1/"), openaioption.WithAPIKey("k"), openaioption.WithMaxRetries(0))
		stream := client.Chat.Completions.NewStreaming(testContext(t), openai.ChatCompletionNewParams{
			Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		n := 0
		for stream.Next() {
			n++
		}
		assert.Equal(t, 1, n, "the content before the frame is delivered")
		se, ok := errors.AsType[*ssestream.StreamError](stream.Err())
		require.True(t, ok, "%T %v", stream.Err(), stream.Err())
		assert.Contains(t, se.Message, stallMessage)
	})
	t.Run("openai responses", func(t *testing.T) {
		url := serveBytes(t, http.StatusOK, "text/event-stream", stallFrame(llmstream.ShapeResponses))
		client := openai.NewClient(openaioption.WithBaseURL(url+"/v1/"), openaioption.WithAPIKey("k"), openaioption.WithMaxRetries(0))
		stream := client.Responses.NewStreaming(testContext(t), responses.ResponseNewParams{
			Model: "gpt-4.1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
		})
		for stream.Next() {
		}
		se, ok := errors.AsType[*ssestream.StreamError](stream.Err())
		require.True(t, ok, "%T %v", stream.Err(), stream.Err())
		assert.Contains(t, se.Message, stallMessage)
	})
	t.Run("anthropic messages", func(t *testing.T) {
		url := serveBytes(t, http.StatusOK, "text/event-stream", stallFrame(llmstream.ShapeMessages))
		client := anthropic.NewClient(anthropicoption.WithBaseURL(url), anthropicoption.WithAPIKey("k"), anthropicoption.WithMaxRetries(0))
		stream := client.Messages.NewStreaming(testContext(t), anthropic.MessageNewParams{
			Model: "claude-x", MaxTokens: 16, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
		})
		for stream.Next() {
		}
		ae, ok := errors.AsType[*anthropic.Error](stream.Err())
		require.True(t, ok, "%T %v", stream.Err(), stream.Err())
		assert.Contains(t, ae.Error(), stallMessage)
		assert.Contains(t, ae.RawJSON(), "timeout_error")
	})
}

// TestSDKsRaiseOnTheGuards504: the body of the 504 a call gets when no
// attempt delivered content within ttft_timeout is each SDK's API error.
func TestSDKsRaiseOnTheGuards504(t *testing.T) {
	const msg = "no content chunk within ttft_timeout (10s) on any of 2 attempts"
	t.Run("openai chat", func(t *testing.T) {
		url := serveBytes(t, http.StatusGatewayTimeout, "application/json",
			llmstream.ErrorBody(llmstream.ShapeChatCompletions, http.StatusGatewayTimeout, "ttft_timeout", msg))
		client := openai.NewClient(openaioption.WithBaseURL(url+"/v1/"), openaioption.WithAPIKey("k"), openaioption.WithMaxRetries(0))
		stream := client.Chat.Completions.NewStreaming(testContext(t), openai.ChatCompletionNewParams{
			Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		for stream.Next() {
		}
		oe, ok := errors.AsType[*openai.Error](stream.Err())
		require.True(t, ok, "%T %v", stream.Err(), stream.Err())
		assert.Equal(t, http.StatusGatewayTimeout, oe.StatusCode)
		assert.Equal(t, "ttft_timeout", oe.Code)
		assert.Equal(t, msg, oe.Message)
	})
	t.Run("anthropic messages", func(t *testing.T) {
		url := serveBytes(t, http.StatusGatewayTimeout, "application/json",
			llmstream.ErrorBody(llmstream.ShapeMessages, http.StatusGatewayTimeout, "ttft_timeout", msg))
		client := anthropic.NewClient(anthropicoption.WithBaseURL(url), anthropicoption.WithAPIKey("k"), anthropicoption.WithMaxRetries(0))
		stream := client.Messages.NewStreaming(testContext(t), anthropic.MessageNewParams{
			Model: "claude-x", MaxTokens: 16, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
		})
		for stream.Next() {
		}
		ae, ok := errors.AsType[*anthropic.Error](stream.Err())
		require.True(t, ok, "%T %v", stream.Err(), stream.Err())
		assert.Equal(t, http.StatusGatewayTimeout, ae.StatusCode)
		assert.Contains(t, ae.Error(), msg)
	})
}

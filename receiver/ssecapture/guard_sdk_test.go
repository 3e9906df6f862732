// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"google.golang.org/genai"
)

// The content an upstream sends before it stalls: none of it may reach
// the message of the error the client gets.
const (
	firstText  = "Alpha"
	secondText = "Bravo"
)

// stalledOpener is what an upstream of the shape sends before it stalls:
// one whole content frame, then a second one whose frame is left open, as
// an upstream that writes the blank line after an event with the next one
// leaves it (for NDJSON, whose frames are whole lines, a second line).
type stalledOpener struct {
	path, contentType, body string
}

var stalledOpeners = map[string]stalledOpener{
	"chat": {
		"/v1/chat/completions", "text/event-stream",
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"` + firstText + `"}}]}` + "\n\n" +
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"` + secondText + `"}}]}` + "\n",
	},
	"responses": {
		"/v1/responses", "text/event-stream",
		"event: response.created\n" +
			`data: {"type":"response.created","sequence_number":0,"response":{"id":"r1","object":"response","created_at":1,"status":"in_progress","model":"gpt-4.1","output":[]}}` + "\n\n" +
			"event: response.output_item.added\n" +
			`data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"m1","type":"message","status":"in_progress","role":"assistant","content":[]}}` + "\n\n" +
			"event: response.content_part.added\n" +
			`data: {"type":"response.content_part.added","sequence_number":2,"item_id":"m1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}` + "\n\n" +
			"event: response.output_text.delta\n" +
			`data: {"type":"response.output_text.delta","sequence_number":3,"item_id":"m1","output_index":0,"content_index":0,"delta":"` + firstText + `"}` + "\n\n" +
			"event: response.output_text.delta\n" +
			`data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"m1","output_index":0,"content_index":0,"delta":"` + secondText + `"}` + "\n",
	},
	"messages": {
		"/v1/messages", "text/event-stream",
		"event: message_start\n" +
			`data: {"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"claude-x","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}` + "\n\n" +
			"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + firstText + `"}}` + "\n\n" +
			"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + secondText + `"}}` + "\n",
	},
	"gemini": {
		"/v1beta/models/gemini-2.5-flash:streamGenerateContent", "text/event-stream",
		`data: {"candidates":[{"content":{"parts":[{"text":"` + firstText + `"}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash"}` + "\r\n\r\n" +
			`data: {"candidates":[{"content":{"parts":[{"text":"` + secondText + `"}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash"}` + "\r\n",
	},
	"gemini json array": {
		"/v1beta/models/gemini-2.5-flash:streamGenerateContent", "application/json",
		`[{"candidates":[{"content":{"parts":[{"text":"` + firstText + `"}],"role":"model"},"index":0}]}` + "\n" +
			`,{"candidates":[{"content":{"parts":[{"text":"` + secondText + `"}],"role":"model"},"index":0}]}`,
	},
	"ollama chat": {
		"/api/chat", "application/x-ndjson",
		`{"model":"llama3.2","created_at":"2026-11-29T12:00:00Z","message":{"role":"assistant","content":"` + firstText + `"},"done":false}` + "\n" +
			`{"model":"llama3.2","created_at":"2026-11-29T12:00:01Z","message":{"role":"assistant","content":"` + secondText + `"},"done":false}` + "\n",
	},
	"ollama generate": {
		"/api/generate", "application/x-ndjson",
		`{"model":"llama3.2","created_at":"2026-11-29T12:00:00Z","response":"` + firstText + `","done":false}` + "\n" +
			`{"model":"llama3.2","created_at":"2026-11-29T12:00:01Z","response":"` + secondText + `","done":false}` + "\n",
	},
}

// stallingUpstream answers every request with the opener, then holds the
// stream open without a byte until the request is cancelled.
func stallingUpstream(t *testing.T, o stalledOpener) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", o.contentType)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(o.body))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// guardedProxy starts the receiver's proxy in front of upstream with a
// guard g configures, and returns its base URL.
func guardedProxy(t *testing.T, upstream string, g func(*GuardConfig)) string {
	t.Helper()
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	pc := cfg.Proxy.GetOrInsertDefault()
	pc.NetAddr.Endpoint = "127.0.0.1:0"
	pc.Upstream.Endpoint = upstream
	g(pc.Guard.GetOrInsertDefault())
	require.NoError(t, cfg.Validate())
	rcv := startReceiver(t, cfg, new(consumertest.TracesSink), componenttest.NewNopHost(), nil)
	return "http://" + rcv.addrs["proxy"].String()
}

// guardStallTimeout is the stall_timeout of the SDK tests: the stall frame
// comes this long after the opener.
const guardStallTimeout = 300 * time.Millisecond

// sdkStreamRun is what an SDK made of a guarded stream: the content it
// delivered and the error it ended with.
type sdkStreamRun struct {
	texts []string
	err   error
}

var stallRuns = map[string]func(t *testing.T, baseURL string) sdkStreamRun{
	"chat": func(t *testing.T, baseURL string) (run sdkStreamRun) {
		client := openai.NewClient(openaioption.WithBaseURL(baseURL+"/v1/"), openaioption.WithAPIKey("k"), openaioption.WithMaxRetries(0))
		s := client.Chat.Completions.NewStreaming(testContext(t), openai.ChatCompletionNewParams{
			Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		for s.Next() {
			run.texts = append(run.texts, s.Current().Choices[0].Delta.Content)
		}
		run.err = s.Err()
		return run
	},
	"responses": func(t *testing.T, baseURL string) (run sdkStreamRun) {
		client := openai.NewClient(openaioption.WithBaseURL(baseURL+"/v1/"), openaioption.WithAPIKey("k"), openaioption.WithMaxRetries(0))
		s := client.Responses.NewStreaming(testContext(t), responses.ResponseNewParams{
			Model: "gpt-4.1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
		})
		for s.Next() {
			if ev := s.Current(); ev.Type == "response.output_text.delta" {
				run.texts = append(run.texts, ev.Delta)
			}
		}
		run.err = s.Err()
		return run
	},
	"messages": func(t *testing.T, baseURL string) (run sdkStreamRun) {
		client := anthropic.NewClient(anthropicoption.WithBaseURL(baseURL), anthropicoption.WithAPIKey("k"), anthropicoption.WithMaxRetries(0))
		s := client.Messages.NewStreaming(testContext(t), anthropic.MessageNewParams{
			Model: "claude-x", MaxTokens: 16, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
		})
		for s.Next() {
			if ev := s.Current(); ev.Type == "content_block_delta" {
				run.texts = append(run.texts, ev.Delta.Text)
			}
		}
		run.err = s.Err()
		return run
	},
	"gemini": func(t *testing.T, baseURL string) (run sdkStreamRun) {
		client, err := genai.NewClient(testContext(t), &genai.ClientConfig{
			Backend: genai.BackendGeminiAPI, APIKey: "k", HTTPOptions: genai.HTTPOptions{BaseURL: baseURL + "/"},
		})
		require.NoError(t, err)
		for resp, err := range client.Models.GenerateContentStream(testContext(t), "gemini-2.5-flash", genai.Text("hi"), nil) {
			if err != nil {
				run.err = err
				break
			}
			run.texts = append(run.texts, resp.Text())
		}
		return run
	},
	"gemini json array": func(t *testing.T, baseURL string) (run sdkStreamRun) {
		// No SDK asks for the array: a client that decodes its elements as
		// they come, and stops at an error element, as Google's REST
		// clients do.
		resp, body := post(t, testClient(t), baseURL+stalledOpeners["gemini json array"].path, `{}`, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var elems []struct {
			Candidates []struct {
				Content struct {
					Parts []struct{ Text string }
				}
			}
			Error *genai.APIError
		}
		require.NoError(t, json.Unmarshal(body, &elems), "the array is closed: %s", body)
		for _, e := range elems {
			if e.Error != nil {
				run.err = *e.Error
				break
			}
			var text strings.Builder
			for _, c := range e.Candidates {
				for _, p := range c.Content.Parts {
					text.WriteString(p.Text)
				}
			}
			run.texts = append(run.texts, text.String())
		}
		return run
	},
	"ollama chat": func(t *testing.T, baseURL string) (run sdkStreamRun) {
		u, err := url.Parse(baseURL)
		require.NoError(t, err)
		run.err = api.NewClient(u, testClient(t)).Chat(testContext(t), &api.ChatRequest{
			Model: "llama3.2", Messages: []api.Message{{Role: "user", Content: "hi"}},
		}, func(r api.ChatResponse) error {
			run.texts = append(run.texts, r.Message.Content)
			return nil
		})
		return run
	},
	"ollama generate": func(t *testing.T, baseURL string) (run sdkStreamRun) {
		u, err := url.Parse(baseURL)
		require.NoError(t, err)
		run.err = api.NewClient(u, testClient(t)).Generate(testContext(t), &api.GenerateRequest{Model: "llama3.2", Prompt: "hi"},
			func(r api.GenerateResponse) error {
				run.texts = append(run.texts, r.Response)
				return nil
			})
		return run
	},
}

// assertTypedStreamError checks that err is the SDK's own error for an
// error the API reported in the stream, not a decoding failure.
func assertTypedStreamError(t *testing.T, name string, err error) {
	t.Helper()
	var syntax *json.SyntaxError
	assert.NotErrorAs(t, err, &syntax, "not a JSON syntax error")
	switch name {
	case "chat", "responses":
		_, ok := errors.AsType[*ssestream.StreamError](err)
		assert.True(t, ok, "%T %v", err, err)
	case "messages":
		ae, ok := errors.AsType[*anthropic.Error](err)
		if assert.True(t, ok, "%T %v", err, err) {
			assert.Contains(t, ae.RawJSON(), "timeout_error")
		}
	case "gemini", "gemini json array":
		ae, ok := errors.AsType[genai.APIError](err)
		if assert.True(t, ok, "%T %v", err, err) {
			assert.Equal(t, http.StatusGatewayTimeout, ae.Code)
			assert.Equal(t, "DEADLINE_EXCEEDED", ae.Status)
		}
	default:
		// Ollama's client raises an in-stream error as the message alone.
		require.Error(t, err)
		assert.True(t, strings.HasPrefix(err.Error(), "stream stalled: "), "the guard's message, not a decoding error: %v", err)
	}
}

// TestSDKsRaiseOnTheGuardsStallFrame: through the guarded proxy, on every
// shape, each official SDK's stream parser delivers the content before a
// stall and then raises its own error type for an error the API reported,
// with the guard's message and none of the upstream's text in it, also
// when the upstream stalled inside a frame it had begun (a whole `data:`
// line without the blank line that ends its event).
func TestSDKsRaiseOnTheGuardsStallFrame(t *testing.T) {
	for name, run := range stallRuns {
		t.Run(name, func(t *testing.T) {
			proxyURL := guardedProxy(t, stallingUpstream(t, stalledOpeners[name]), func(g *GuardConfig) {
				g.StallTimeout = AutoDuration(guardStallTimeout)
			})
			got := run(t, proxyURL)
			assert.Equal(t, []string{firstText, secondText}, got.texts, "the content before the stall is delivered")
			assertTypedStreamError(t, name, got.err)
			require.ErrorContains(t, got.err, "stream stalled")
			assert.NotContains(t, got.err.Error(), firstText)
			assert.NotContains(t, got.err.Error(), secondText)
			if name == "responses" {
				se, _ := errors.AsType[*ssestream.StreamError](got.err)
				require.NotNil(t, se)
				var ev struct {
					SequenceNumber int64 `json:"sequence_number"`
				}
				require.NoError(t, json.Unmarshal(se.Event.Data, &ev))
				assert.Equal(t, int64(5), ev.SequenceNumber, "the one after the stream's last")
			}
		})
	}
}

// silentUpstream answers every request with a stream that never carries
// content: the headers, then nothing.
func silentUpstream(t *testing.T, contentType string) string {
	return stallingUpstream(t, stalledOpener{contentType: contentType})
}

// TestSDKsRaiseOnTheGuards504: a call whose attempts had no content within
// ttft_timeout gets a 504 in its API's error body, which each official SDK
// raises as its API error with the status and the guard's message.
func TestSDKsRaiseOnTheGuards504(t *testing.T) {
	const ttft = 200 * time.Millisecond
	proxy := func(t *testing.T, contentType string) string {
		return guardedProxy(t, silentUpstream(t, contentType), func(g *GuardConfig) {
			g.TTFTTimeout, g.Hedge.MaxAttempts = ttft, 1
		})
	}
	const want = "no content within ttft_timeout"
	t.Run("openai chat", func(t *testing.T) {
		got := stallRuns["chat"](t, proxy(t, "text/event-stream"))
		oe, ok := errors.AsType[*openai.Error](got.err)
		require.True(t, ok, "%T %v", got.err, got.err)
		assert.Equal(t, http.StatusGatewayTimeout, oe.StatusCode)
		assert.Equal(t, "ttft_timeout", oe.Code)
		assert.Contains(t, oe.Message, want)
	})
	t.Run("anthropic messages", func(t *testing.T) {
		got := stallRuns["messages"](t, proxy(t, "text/event-stream"))
		ae, ok := errors.AsType[*anthropic.Error](got.err)
		require.True(t, ok, "%T %v", got.err, got.err)
		assert.Equal(t, http.StatusGatewayTimeout, ae.StatusCode)
		assert.Contains(t, ae.Error(), want)
	})
	t.Run("gemini", func(t *testing.T) {
		got := stallRuns["gemini"](t, proxy(t, "text/event-stream"))
		ae, ok := errors.AsType[genai.APIError](got.err)
		require.True(t, ok, "%T %v", got.err, got.err)
		assert.Equal(t, http.StatusGatewayTimeout, ae.Code)
		assert.Equal(t, "DEADLINE_EXCEEDED", ae.Status)
		assert.Contains(t, ae.Message, want)
	})
	t.Run("ollama", func(t *testing.T) {
		got := stallRuns["ollama chat"](t, proxy(t, "application/x-ndjson"))
		se, ok := errors.AsType[api.StatusError](got.err)
		require.True(t, ok, "%T %v", got.err, got.err)
		assert.Equal(t, http.StatusGatewayTimeout, se.StatusCode)
		assert.Contains(t, se.ErrorMessage, want)
	})
}

// TestSDKsReadAFrameCutInTheMiddle: when the upstream stalls in the middle
// of an NDJSON line or a JSON array element, the guard completes it before
// its error, so that Ollama's client and a reader of Gemini's array decode
// what came (the cut text) and then raise the error, rather than a
// decoding failure that quotes the upstream's bytes.
func TestSDKsReadAFrameCutInTheMiddle(t *testing.T) {
	for _, name := range []string{"ollama chat", "ollama generate", "gemini json array"} {
		t.Run(name, func(t *testing.T) {
			o := stalledOpeners[name]
			o.body = o.body[:strings.LastIndex(o.body, secondText)+3]
			proxyURL := guardedProxy(t, stallingUpstream(t, o), func(g *GuardConfig) {
				g.StallTimeout = AutoDuration(guardStallTimeout)
			})
			got := stallRuns[name](t, proxyURL)
			assert.Equal(t, []string{firstText, secondText[:3]}, got.texts, "the cut text is decoded")
			assertTypedStreamError(t, name, got.err)
			assert.NotContains(t, got.err.Error(), secondText[:3])
		})
	}
}

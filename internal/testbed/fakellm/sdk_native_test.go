// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"
)

// geminiClient is the official Go SDK pointed at fakellm, as Google AI Studio or as Vertex AI.
func geminiClient(t *testing.T, hs *httptest.Server, vertex bool) *genai.Client {
	t.Helper()
	cfg := &genai.ClientConfig{
		HTTPClient:  testHTTPClient(t),
		HTTPOptions: genai.HTTPOptions{BaseURL: hs.URL + "/"},
	}
	if vertex {
		cfg.Backend, cfg.Project, cfg.Location = genai.BackendVertexAI, "streamstall-test", "us-central1"
	} else {
		cfg.Backend, cfg.APIKey = genai.BackendGeminiAPI, "test-key"
	}
	c, err := genai.NewClient(testContext(t), cfg)
	require.NoError(t, err)
	return c
}

func ollamaClient(t *testing.T, hs *httptest.Server) *api.Client {
	t.Helper()
	u, err := url.Parse(hs.URL)
	require.NoError(t, err)
	return api.NewClient(u, testHTTPClient(t))
}

func TestGeminiStreamingSDK(t *testing.T) {
	for _, vertex := range []bool{false, true} {
		for _, profile := range []string{ProfileSteady, ProfileStall, ProfileStallKeepalive, ProfileBurst, ProfileSlowFirst} {
			name := map[bool]string{false: "ai_studio", true: "vertex"}[vertex] + "/" + profile
			t.Run(name, func(t *testing.T) {
				srv, hs := startServer(t, Config{Profile: profile, TimeFactor: fastFactor, Chunks: 12, Seed: 7})
				client := geminiClient(t, hs, vertex)
				var text strings.Builder
				frames := 0
				var last *genai.GenerateContentResponse
				for resp, err := range client.Models.GenerateContentStream(testContext(t), "gemini-2.5-flash", genai.Text("Why do streams stall?"), nil) {
					require.NoError(t, err)
					frames++
					text.WriteString(resp.Text())
					assert.Equal(t, "gemini-2.5-flash", resp.ModelVersion)
					last = resp
				}
				rec := waitOne(t, srv)
				assert.Equal(t, "gemini", rec.API)
				assert.Equal(t, "gemini-2.5-flash", rec.Model)
				assert.True(t, rec.Stream)
				assert.Equal(t, rec.Text, text.String())
				require.NotNil(t, last)
				assert.Equal(t, genai.FinishReasonStop, last.Candidates[0].FinishReason)
				assert.Equal(t, int32(12), last.UsageMetadata.CandidatesTokenCount)
				assert.Equal(t, int32(rec.InputTokens), last.UsageMetadata.PromptTokenCount)
				assert.Equal(t, rec.ResponseID, last.ResponseID)
				assert.Len(t, rec.ChunkTimes, 12)
				assert.Zero(t, rec.Keepalives(), "Gemini sends no keepalives: its SDK cannot read them")
				assert.Equal(t, 13, frames, "12 content frames and the finish frame")
				assert.Equal(t, 13, rec.Frames)
				assert.True(t, rec.Completed)
				if vertex {
					assert.Equal(t, "/v1beta1/projects/streamstall-test/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent", rec.Path)
				} else {
					assert.Equal(t, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", rec.Path)
				}
				assert.Contains(t, string(srv.Sent(0)), "}\r\n\r\ndata: ", "events end with CRLF CRLF, as Google's do")
			})
		}
	}
}

func TestGeminiReasoningAndToolsSDK(t *testing.T) {
	srv, hs := startServer(t, Config{TimeFactor: fastFactor, Chunks: 8, Seed: 5})
	client := geminiClient(t, hs, false)
	cfg := &genai.GenerateContentConfig{ThinkingConfig: &genai.ThinkingConfig{IncludeThoughts: true}}
	var thoughts, text strings.Builder
	var usage *genai.GenerateContentResponseUsageMetadata
	for resp, err := range client.Models.GenerateContentStream(testContext(t), "gemini-2.5-pro", genai.Text("Think first."), cfg) {
		require.NoError(t, err)
		for _, p := range resp.Candidates[0].Content.Parts {
			if p.Thought {
				thoughts.WriteString(p.Text)
			}
		}
		text.WriteString(resp.Text())
		usage = resp.UsageMetadata
	}
	rec := waitOne(t, srv)
	assert.Equal(t, ContentReasoning, rec.Content)
	assert.Equal(t, rec.Text, text.String())
	assert.NotEmpty(t, thoughts.String())
	assert.Equal(t, int32(4), usage.ThoughtsTokenCount)
	assert.Equal(t, int32(4), usage.CandidatesTokenCount)

	srv.Reset()
	tools := &genai.GenerateContentConfig{Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "get_weather"}}}}}
	var calls []*genai.FunctionCall
	for resp, err := range client.Models.GenerateContentStream(testContext(t), "gemini-2.5-flash", genai.Text("Weather?"), tools) {
		require.NoError(t, err)
		calls = append(calls, resp.FunctionCalls()...)
	}
	rec = waitOne(t, srv)
	assert.Equal(t, ContentToolCall, rec.Content)
	require.Len(t, calls, 8, "one whole call a chunk")
	assert.Equal(t, "get_weather", calls[0].Name)
	assert.Contains(t, calls[0].Args, "query")
}

func TestGeminiUnarySDK(t *testing.T) {
	srv, hs := startServer(t, Config{Profile: `{"ttft_ms":1}`, Chunks: 5, Seed: 9})
	resp, err := geminiClient(t, hs, true).Models.GenerateContent(testContext(t), "gemini-2.5-flash", genai.Text("hi"), nil)
	require.NoError(t, err)
	rec := waitOne(t, srv)
	assert.False(t, rec.Stream)
	assert.Equal(t, rec.Text, resp.Text())
	assert.Equal(t, int32(5), resp.UsageMetadata.CandidatesTokenCount)
	assert.Equal(t, rec.ResponseID, resp.ResponseID)
}

// TestGeminiJSONArrayStream: without alt=sse (which the SDKs always set) the stream is one JSON
// array of GenerateContentResponse, each element written and flushed as it is due.
func TestGeminiJSONArrayStream(t *testing.T) {
	srv, hs := startServer(t, Config{Profile: `{"ttft_ms":1,"gaps_ms":[1,1,1]}`, Seed: 4})
	resp := postJSON(testContext(t), t, hs.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent", `{"contents":[{"parts":[{"text":"hi"}]}]}`, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/json; charset=UTF-8", resp.Header.Get("Content-Type"))
	var body bytes.Buffer
	_, err := body.ReadFrom(resp.Body)
	require.NoError(t, err)
	var elems []genai.GenerateContentResponse
	require.NoError(t, json.Unmarshal(body.Bytes(), &elems), "%s", body.Bytes())
	rec := waitOne(t, srv)
	require.Len(t, elems, 5)
	var text strings.Builder
	for i := range elems {
		text.WriteString(elems[i].Text())
	}
	assert.Equal(t, rec.Text, text.String())
	assert.Equal(t, genai.FinishReasonStop, elems[4].Candidates[0].FinishReason)
	assert.Equal(t, 5, rec.Frames)
	assert.Len(t, rec.ChunkTimes, 4)
}

func TestGeminiAndOllamaErrorsSDK(t *testing.T) {
	for _, tc := range []struct {
		profile      string
		status       int
		googleStatus string
	}{
		{ProfileHTTP429, 429, "RESOURCE_EXHAUSTED"},
		{ProfileHTTP500, 500, "INTERNAL"},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			srv, hs := startServer(t, Config{Profile: tc.profile, TimeFactor: fastFactor})
			for _, err := range geminiClient(t, hs, false).Models.GenerateContentStream(testContext(t), "gemini-2.5-flash", genai.Text("hi"), nil) {
				var gerr genai.APIError
				require.ErrorAs(t, err, &gerr)
				assert.Equal(t, tc.status, gerr.Code)
				assert.Equal(t, tc.googleStatus, gerr.Status)
				assert.NotEmpty(t, gerr.Message)
				break
			}
			stream := true
			err := ollamaClient(t, hs).Chat(testContext(t), &api.ChatRequest{
				Model: "llama3.2", Stream: &stream,
				Messages: []api.Message{{Role: "user", Content: "hi"}},
			}, func(api.ChatResponse) error { return nil })
			var oerr api.StatusError
			require.ErrorAs(t, err, &oerr)
			assert.Equal(t, tc.status, oerr.StatusCode)
			assert.NotEmpty(t, oerr.ErrorMessage)
			reqs, err := srv.WaitFor(testContext(t), 2)
			require.NoError(t, err)
			for _, r := range reqs {
				assert.Equal(t, tc.status, r.Status)
				assert.Empty(t, r.ChunkTimes)
			}
		})
	}
}

func TestOllamaChatSDK(t *testing.T) {
	for _, profile := range []string{ProfileSteady, ProfileStall, ProfileStallKeepalive, ProfileBurst, ProfileSlowFirst} {
		t.Run(profile, func(t *testing.T) {
			srv, hs := startServer(t, Config{Profile: profile, TimeFactor: fastFactor, Chunks: 12, Seed: 7})
			var text strings.Builder
			var final api.ChatResponse
			frames := 0
			err := ollamaClient(t, hs).Chat(testContext(t), &api.ChatRequest{
				Model:    "llama3.2",
				Messages: []api.Message{{Role: "user", Content: "Why do streams stall?"}},
			}, func(r api.ChatResponse) error {
				frames++
				assert.Equal(t, "llama3.2", r.Model)
				text.WriteString(r.Message.Content)
				if r.Done {
					final = r
				}
				return nil
			})
			require.NoError(t, err)
			rec := waitOne(t, srv)
			assert.Equal(t, "ollama.chat", rec.API)
			assert.True(t, rec.Stream, "Ollama streams unless asked not to")
			assert.Equal(t, rec.Text, text.String())
			assert.Equal(t, 13, frames)
			assert.Equal(t, 13, rec.Frames)
			assert.Zero(t, rec.Keepalives(), "Ollama sends no keepalives: its client cannot read them")
			assert.True(t, final.Done)
			assert.Equal(t, "stop", final.DoneReason)
			assert.Equal(t, 12, final.EvalCount)
			assert.Equal(t, rec.InputTokens, final.PromptEvalCount)
			offsets := rec.Plan.Offsets()
			total, load, promptEval, eval := rec.Plan.ServerTimings()
			assert.Equal(t, offsets[len(offsets)-1], total)
			assert.Equal(t, total, final.TotalDuration)
			assert.Equal(t, load, final.LoadDuration)
			assert.Equal(t, promptEval, final.PromptEvalDuration)
			assert.Equal(t, eval, final.EvalDuration)
			assert.Len(t, rec.ChunkTimes, 12)
			assert.True(t, rec.Completed)
		})
	}
}

func TestOllamaThinkingToolsAndGenerateSDK(t *testing.T) {
	srv, hs := startServer(t, Config{TimeFactor: fastFactor, Chunks: 6, Seed: 3})
	client := ollamaClient(t, hs)
	var thinking, text strings.Builder
	err := client.Chat(testContext(t), &api.ChatRequest{
		Model: "qwen3", Think: &api.ThinkValue{Value: true},
		Messages: []api.Message{{Role: "user", Content: "hi"}},
	}, func(r api.ChatResponse) error {
		thinking.WriteString(r.Message.Thinking)
		text.WriteString(r.Message.Content)
		return nil
	})
	require.NoError(t, err)
	rec := waitOne(t, srv)
	assert.Equal(t, ContentReasoning, rec.Content)
	assert.Equal(t, rec.Text, text.String())
	assert.NotEmpty(t, thinking.String())

	srv.Reset()
	var calls []api.ToolCall
	err = client.Chat(testContext(t), &api.ChatRequest{
		Model:    "llama3.2",
		Tools:    api.Tools{{Type: "function", Function: api.ToolFunction{Name: "get_weather"}}},
		Messages: []api.Message{{Role: "user", Content: "Weather?"}},
	}, func(r api.ChatResponse) error {
		calls = append(calls, r.Message.ToolCalls...)
		return nil
	})
	require.NoError(t, err)
	rec = waitOne(t, srv)
	assert.Equal(t, ContentToolCall, rec.Content)
	require.Len(t, calls, 6, "one whole call a chunk")
	assert.Equal(t, "get_weather", calls[0].Function.Name)
	_, ok := calls[0].Function.Arguments.Get("query")
	assert.True(t, ok)

	srv.Reset()
	text.Reset()
	err = client.Generate(testContext(t), &api.GenerateRequest{Model: "llama3.2", Prompt: "Once"}, func(r api.GenerateResponse) error {
		text.WriteString(r.Response)
		return nil
	})
	require.NoError(t, err)
	rec = waitOne(t, srv)
	assert.Equal(t, "ollama.generate", rec.API)
	assert.Equal(t, rec.Text, text.String())
	assert.Len(t, rec.ChunkTimes, 6)

	srv.Reset()
	stream := false
	var whole []api.ChatResponse
	err = client.Chat(testContext(t), &api.ChatRequest{
		Model: "llama3.2", Stream: &stream,
		Messages: []api.Message{{Role: "user", Content: "hi"}},
	}, func(r api.ChatResponse) error {
		whole = append(whole, r)
		return nil
	})
	require.NoError(t, err)
	rec = waitOne(t, srv)
	assert.False(t, rec.Stream)
	require.Len(t, whole, 1)
	assert.Equal(t, rec.Text, whole[0].Message.Content)
	assert.Equal(t, 6, whole[0].EvalCount)
}

func TestEarlyCloseBreaksNativeSDKStreams(t *testing.T) {
	srv, hs := startServer(t, Config{Profile: ProfileEarlyClose, TimeFactor: fastFactor, Chunks: 10, Seed: 11})
	finished := false
	var gerr error
	for resp, err := range geminiClient(t, hs, false).Models.GenerateContentStream(testContext(t), "gemini-2.5-flash", genai.Text("hi"), nil) {
		if err != nil {
			gerr = err
			continue
		}
		finished = finished || resp.Candidates[0].FinishReason != ""
	}
	done := false
	oerr := ollamaClient(t, hs).Chat(testContext(t), &api.ChatRequest{
		Model:    "llama3.2",
		Messages: []api.Message{{Role: "user", Content: "hi"}},
	}, func(r api.ChatResponse) error {
		done = done || r.Done
		return nil
	})
	reqs, err := srv.WaitFor(testContext(t), 2)
	require.NoError(t, err)
	for _, r := range reqs {
		assert.True(t, r.Aborted)
		assert.Less(t, r.Chunks(), 10)
	}
	// Gemini's SDK reports the broken read, and never saw a finish reason: that is how a proxy
	// tells its truncated stream from a complete one (Gemini has no terminal frame). Ollama's
	// client reports nothing (its scanner's error goes unchecked): only the missing done frame
	// shows the stream was cut.
	require.ErrorIs(t, gerr, io.ErrUnexpectedEOF)
	assert.False(t, finished, "no finish reason in a stream cut short")
	require.NoError(t, oerr)
	assert.False(t, done, "the last frame never arrived")
}

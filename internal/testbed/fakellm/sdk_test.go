// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fastFactor runs the named profiles 1000x faster: a 55 s stall lasts about 55 ms.
const fastFactor = 0.001

// startServer serves a fakellm Server on loopback for the duration of the test.
func startServer(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	srv, err := New(cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return srv, hs
}

// testHTTPClient has its own transport so that no idle connection outlives the test.
func testHTTPClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func openAIClient(t *testing.T, hs *httptest.Server, opts ...openaioption.RequestOption) openai.Client {
	return openai.NewClient(append([]openaioption.RequestOption{
		openaioption.WithBaseURL(hs.URL + "/v1/"), openaioption.WithAPIKey("sk-test"),
		openaioption.WithMaxRetries(0), openaioption.WithHTTPClient(testHTTPClient(t)),
	}, opts...)...)
}

func anthropicClient(t *testing.T, hs *httptest.Server, opts ...anthropicoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]anthropicoption.RequestOption{
		anthropicoption.WithBaseURL(hs.URL), anthropicoption.WithAPIKey("sk-ant-test"),
		anthropicoption.WithMaxRetries(0), anthropicoption.WithHTTPClient(testHTTPClient(t)),
	}, opts...)...)
}

func chatParams(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:         model,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Why do streams stall?")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
}

func messageParams(model string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     model,
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Why do streams stall?"))},
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitOne returns the record of the single request a test made, once finished.
func waitOne(t *testing.T, srv *Server) Request {
	t.Helper()
	reqs, err := srv.WaitFor(testContext(t), 1)
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	return reqs[0]
}

func TestOpenAIChatStreamingSDK(t *testing.T) {
	for _, profile := range []string{ProfileSteady, ProfileStall, ProfileStallKeepalive, ProfileBurst, ProfileSlowFirst} {
		t.Run(profile, func(t *testing.T) {
			srv, hs := startServer(t, Config{Profile: profile, TimeFactor: fastFactor, Chunks: 12, Seed: 7})
			client := openAIClient(t, hs)
			stream := client.Chat.Completions.NewStreaming(testContext(t), chatParams("gpt-4o-mini"))
			var acc openai.ChatCompletionAccumulator
			contentFrames, usageFrames := 0, 0
			var text strings.Builder
			for stream.Next() {
				chunk := stream.Current()
				acc.AddChunk(chunk)
				assert.Equal(t, "gpt-4o-mini", chunk.Model)
				assert.Equal(t, "chat.completion.chunk", string(chunk.Object))
				if len(chunk.Choices) == 0 {
					usageFrames++
					continue
				}
				if c := chunk.Choices[0].Delta.Content; c != "" {
					contentFrames++
					text.WriteString(c)
				}
			}
			require.NoError(t, stream.Err())
			require.NoError(t, stream.Close())

			rec := waitOne(t, srv)
			assert.Equal(t, 12, contentFrames)
			assert.Equal(t, 1, usageFrames)
			assert.Equal(t, rec.Text, text.String())
			assert.Equal(t, rec.Text, acc.Choices[0].Message.Content)
			assert.Equal(t, "stop", acc.Choices[0].FinishReason)
			assert.Equal(t, int64(12), acc.Usage.CompletionTokens)
			assert.Equal(t, rec.ResponseID, acc.ID)
			assert.True(t, rec.Completed)
			assert.False(t, rec.Disconnected)
			assert.Equal(t, profile, rec.Profile)
			assert.Len(t, rec.ChunkTimes, 12)
			// role frame, 12 content frames, finish frame, usage frame, [DONE], plus keepalives
			assert.Equal(t, 16+rec.Keepalives(), rec.Frames)
			assert.Len(t, srv.Sent(0), rec.Bytes)
		})
	}
}

func TestAnthropicMessagesStreamingSDK(t *testing.T) {
	for _, profile := range []string{ProfileSteady, ProfileStall, ProfileStallKeepalive, ProfileBurst, ProfileSlowFirst} {
		t.Run(profile, func(t *testing.T) {
			srv, hs := startServer(t, Config{Profile: profile, TimeFactor: fastFactor, Chunks: 12, Seed: 7})
			client := anthropicClient(t, hs)
			stream := client.Messages.NewStreaming(testContext(t), messageParams("claude-sonnet-4-5"))
			var msg anthropic.Message
			deltas := 0
			var text strings.Builder
			for stream.Next() {
				ev := stream.Current()
				require.NoError(t, msg.Accumulate(ev))
				if d, ok := ev.AsAny().(anthropic.ContentBlockDeltaEvent); ok {
					if td, ok := d.Delta.AsAny().(anthropic.TextDelta); ok {
						deltas++
						text.WriteString(td.Text)
					}
				}
			}
			require.NoError(t, stream.Err())
			require.NoError(t, stream.Close())

			rec := waitOne(t, srv)
			assert.Equal(t, 12, deltas)
			assert.Equal(t, rec.Text, text.String())
			require.Len(t, msg.Content, 1)
			assert.Equal(t, rec.Text, msg.Content[0].Text)
			assert.Equal(t, anthropic.StopReasonEndTurn, msg.StopReason)
			assert.Equal(t, int64(12), msg.Usage.OutputTokens)
			assert.Equal(t, int64(rec.InputTokens), msg.Usage.InputTokens)
			assert.Equal(t, "claude-sonnet-4-5", msg.Model)
			assert.Equal(t, rec.ResponseID, msg.ID)
			assert.True(t, rec.Completed)
			assert.Len(t, rec.ChunkTimes, 12)
			// The real API pings once right after the first block opens.
			assert.GreaterOrEqual(t, rec.Keepalives(), 1)
			// message_start, block start, 12 deltas, block stop, message_delta, message_stop, plus pings
			assert.Equal(t, 17+rec.Keepalives(), rec.Frames)
		})
	}
}

func TestOpenAIResponsesStreamingSDK(t *testing.T) {
	srv, hs := startServer(t, Config{Profile: ProfileStall, TimeFactor: fastFactor, Chunks: 9, Seed: 3})
	client := openAIClient(t, hs)
	stream := client.Responses.NewStreaming(testContext(t), responses.ResponseNewParams{
		Model: "gpt-4.1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Why do streams stall?")},
	})
	deltas, seq := 0, int64(0)
	var text strings.Builder
	var completed responses.Response
	for stream.Next() {
		ev := stream.Current()
		assert.Equal(t, seq, ev.SequenceNumber)
		seq++
		switch e := ev.AsAny().(type) {
		case responses.ResponseTextDeltaEvent:
			deltas++
			text.WriteString(e.Delta)
		case responses.ResponseCompletedEvent:
			completed = e.Response
		}
	}
	require.NoError(t, stream.Err())
	rec := waitOne(t, srv)
	assert.Equal(t, 9, deltas)
	assert.Equal(t, rec.Text, text.String())
	assert.Equal(t, rec.Text, completed.OutputText())
	assert.Equal(t, responses.ResponseStatusCompleted, completed.Status)
	assert.Equal(t, int64(9), completed.Usage.OutputTokens)
	assert.Equal(t, rec.ResponseID, completed.ID)
	assert.Len(t, rec.ChunkTimes, 9)
	assert.NotEmpty(t, rec.Plan.StallAfter)
}

func TestErrorProfilesParseAsSDKErrors(t *testing.T) {
	for _, tc := range []struct {
		profile       string
		status        int
		openAIType    string
		anthropicType string
	}{
		{ProfileHTTP429, 429, "requests", "rate_limit_error"},
		{ProfileHTTP500, 500, "server_error", "api_error"},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			srv, hs := startServer(t, Config{Profile: tc.profile, TimeFactor: fastFactor})
			oc := openAIClient(t, hs)
			stream := oc.Chat.Completions.NewStreaming(testContext(t), chatParams("gpt-4o"))
			assert.False(t, stream.Next())
			var oerr *openai.Error
			require.ErrorAs(t, stream.Err(), &oerr)
			assert.Equal(t, tc.status, oerr.StatusCode)
			assert.Equal(t, tc.openAIType, oerr.Type)
			assert.NotEmpty(t, oerr.Message)
			if tc.status == 429 {
				assert.Equal(t, "rate_limit_exceeded", oerr.Code)
				assert.Equal(t, "1", oerr.Response.Header.Get("Retry-After"))
				assert.Equal(t, "2", oerr.Response.Header.Get("Retry-After-Ms"))
			}

			ac := anthropicClient(t, hs)
			_, err := ac.Messages.New(testContext(t), messageParams("claude-x"))
			var aerr *anthropic.Error
			require.ErrorAs(t, err, &aerr)
			assert.Equal(t, tc.status, aerr.StatusCode)
			assert.Equal(t, tc.anthropicType, string(aerr.Type()))
			assert.NotEmpty(t, aerr.RequestID)

			reqs, err := srv.WaitFor(testContext(t), 2)
			require.NoError(t, err)
			for _, r := range reqs {
				assert.Equal(t, tc.status, r.Status)
				assert.Empty(t, r.ChunkTimes)
				assert.True(t, r.Completed)
			}
		})
	}
}

func TestEarlyCloseBreaksSDKStreams(t *testing.T) {
	srv, hs := startServer(t, Config{Profile: ProfileEarlyClose, TimeFactor: fastFactor, Chunks: 10, Seed: 11})
	oc := openAIClient(t, hs)
	stream := oc.Chat.Completions.NewStreaming(testContext(t), chatParams("gpt-4o"))
	contentFrames := 0
	for stream.Next() {
		if len(stream.Current().Choices) > 0 && stream.Current().Choices[0].Delta.Content != "" {
			contentFrames++
		}
	}
	require.Error(t, stream.Err())
	assert.ErrorIs(t, stream.Err(), io.ErrUnexpectedEOF)

	ac := anthropicClient(t, hs)
	astream := ac.Messages.NewStreaming(testContext(t), messageParams("claude-x"))
	for astream.Next() {
		_, stopped := astream.Current().AsAny().(anthropic.MessageStopEvent)
		assert.False(t, stopped, "message_stop must never arrive")
	}
	require.Error(t, astream.Err())

	reqs, err := srv.WaitFor(testContext(t), 2)
	require.NoError(t, err)
	for _, r := range reqs {
		assert.True(t, r.Aborted)
		assert.False(t, r.Completed)
		assert.Equal(t, r.Plan.CloseAfterChunk, r.Chunks())
		assert.Less(t, r.Chunks(), 10)
	}
	assert.Equal(t, reqs[0].Chunks(), contentFrames)
	assert.NotContains(t, string(srv.Sent(0)), "[DONE]")
	assert.NotContains(t, string(srv.Sent(1)), "message_stop")
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenAIChatToolCallStream(t *testing.T) {
	srv, hs := startServer(t, Config{TimeFactor: fastFactor, Chunks: 8})
	params := chatParams("gpt-4o")
	params.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Parameters: shared.FunctionParameters{"type": "object"},
	})}
	oc := openAIClient(t, hs)
	stream := oc.Chat.Completions.NewStreaming(testContext(t), params)
	var acc openai.ChatCompletionAccumulator
	toolFrames := 0
	finished := false
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		if len(chunk.Choices) > 0 && len(chunk.Choices[0].Delta.ToolCalls) > 0 {
			toolFrames++
		}
		if _, ok := acc.JustFinishedToolCall(); ok {
			finished = true
		}
	}
	require.NoError(t, stream.Err())
	rec := waitOne(t, srv)
	assert.Equal(t, ContentToolCall, rec.Content)
	assert.Equal(t, 8, toolFrames)
	assert.Len(t, rec.ChunkTimes, 8)
	assert.True(t, finished)
	require.Len(t, acc.Choices[0].Message.ToolCalls, 1)
	call := acc.Choices[0].Message.ToolCalls[0]
	assert.Equal(t, "get_weather", call.Function.Name)
	assert.True(t, strings.HasPrefix(call.ID, "call_"))
	var args map[string]string
	require.NoError(t, json.Unmarshal([]byte(call.Function.Arguments), &args))
	assert.NotEmpty(t, args["query"])
	assert.Equal(t, "tool_calls", acc.Choices[0].FinishReason)
	assert.Empty(t, rec.Text)
}

func TestOpenAIChatReasoningStream(t *testing.T) {
	srv, hs := startServer(t, Config{Profile: ProfileReasoning, TimeFactor: fastFactor, Chunks: 9})
	oc := openAIClient(t, hs)
	stream := oc.Chat.Completions.NewStreaming(testContext(t), chatParams("deepseek-reasoner"))
	reasoningFrames, textFrames := 0, 0
	var usage openai.CompletionUsage
	for stream.Next() {
		chunk := stream.Current()
		if len(chunk.Choices) == 0 {
			usage = chunk.Usage
			continue
		}
		d := chunk.Choices[0].Delta
		if f, ok := d.JSON.ExtraFields["reasoning_content"]; ok && f.Raw() != "" {
			var s string
			require.NoError(t, json.Unmarshal([]byte(f.Raw()), &s))
			assert.NotEmpty(t, s)
			reasoningFrames++
		}
		if d.Content != "" {
			textFrames++
		}
	}
	require.NoError(t, stream.Err())
	rec := waitOne(t, srv)
	assert.Equal(t, 4, reasoningFrames)
	assert.Equal(t, 5, textFrames)
	assert.Len(t, rec.ChunkTimes, 9)
	assert.Equal(t, int64(4), usage.CompletionTokensDetails.ReasoningTokens)
}

func TestAnthropicToolUseStream(t *testing.T) {
	srv, hs := startServer(t, Config{TimeFactor: fastFactor, Chunks: 6})
	params := messageParams("claude-sonnet-4-5")
	params.Tools = []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{}, "get_weather")}
	ac := anthropicClient(t, hs)
	stream := ac.Messages.NewStreaming(testContext(t), params)
	var msg anthropic.Message
	jsonDeltas := 0
	for stream.Next() {
		ev := stream.Current()
		require.NoError(t, msg.Accumulate(ev))
		if d, ok := ev.AsAny().(anthropic.ContentBlockDeltaEvent); ok {
			if _, ok := d.Delta.AsAny().(anthropic.InputJSONDelta); ok {
				jsonDeltas++
			}
		}
	}
	require.NoError(t, stream.Err())
	rec := waitOne(t, srv)
	assert.Equal(t, 6, jsonDeltas)
	assert.Len(t, rec.ChunkTimes, 6)
	require.Len(t, msg.Content, 1)
	block := msg.Content[0]
	assert.Equal(t, "tool_use", block.Type)
	assert.Equal(t, "get_weather", block.Name)
	assert.True(t, strings.HasPrefix(block.ID, "toolu_01"))
	var input map[string]string
	require.NoError(t, json.Unmarshal(block.Input, &input))
	assert.NotEmpty(t, input["query"])
	assert.Equal(t, anthropic.StopReasonToolUse, msg.StopReason)
}

func TestAnthropicThinkingStream(t *testing.T) {
	srv, hs := startServer(t, Config{TimeFactor: fastFactor, Chunks: 10})
	params := messageParams("claude-sonnet-4-5")
	params.Thinking = anthropic.ThinkingConfigParamOfEnabled(1024)
	ac := anthropicClient(t, hs)
	stream := ac.Messages.NewStreaming(testContext(t), params)
	var msg anthropic.Message
	thinking, text := 0, 0
	for stream.Next() {
		ev := stream.Current()
		require.NoError(t, msg.Accumulate(ev))
		if d, ok := ev.AsAny().(anthropic.ContentBlockDeltaEvent); ok {
			switch d.Delta.AsAny().(type) {
			case anthropic.ThinkingDelta:
				thinking++
			case anthropic.TextDelta:
				text++
			}
		}
	}
	require.NoError(t, stream.Err())
	rec := waitOne(t, srv)
	assert.Equal(t, ContentReasoning, rec.Content)
	assert.Equal(t, 5, thinking)
	assert.Equal(t, 5, text)
	assert.Len(t, rec.ChunkTimes, 10)
	require.Len(t, msg.Content, 2)
	assert.Equal(t, "thinking", msg.Content[0].Type)
	assert.NotEmpty(t, msg.Content[0].Thinking)
	assert.NotEmpty(t, msg.Content[0].Signature)
	assert.Equal(t, rec.Text, msg.Content[1].Text)
}

func TestOpenAIResponsesToolAndReasoningStreams(t *testing.T) {
	srv, hs := startServer(t, Config{TimeFactor: fastFactor, Chunks: 6})
	oc := openAIClient(t, hs)
	params := responses.ResponseNewParams{
		Model: "gpt-4.1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("weather?")},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object"}, false)},
	}
	stream := oc.Responses.NewStreaming(testContext(t), params)
	argDeltas := 0
	var completed responses.Response
	for stream.Next() {
		switch e := stream.Current().AsAny().(type) {
		case responses.ResponseFunctionCallArgumentsDeltaEvent:
			argDeltas++
		case responses.ResponseCompletedEvent:
			completed = e.Response
		}
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, 6, argDeltas)
	require.Len(t, completed.Output, 1)
	call := completed.Output[0].AsFunctionCall()
	assert.Equal(t, "get_weather", call.Name)
	assert.True(t, json.Valid([]byte(call.Arguments)))

	stream = oc.Responses.NewStreaming(testContext(t), responses.ResponseNewParams{
		Model: "gpt-oss-120b",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("think")},
	}, openaioption.WithHeader(HeaderContent, ContentReasoning))
	reasoning, text := 0, 0
	for stream.Next() {
		switch e := stream.Current().AsAny().(type) {
		case responses.ResponseReasoningTextDeltaEvent:
			reasoning++
		case responses.ResponseTextDeltaEvent:
			text++
		case responses.ResponseCompletedEvent:
			completed = e.Response
		}
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, 3, reasoning)
	assert.Equal(t, 3, text)
	require.Len(t, completed.Output, 2)
	assert.Equal(t, "reasoning", completed.Output[0].Type)
	assert.Equal(t, int64(3), completed.Usage.OutputTokensDetails.ReasoningTokens)

	reqs, err := srv.WaitFor(testContext(t), 2)
	require.NoError(t, err)
	assert.Equal(t, reqs[1].Text, completed.OutputText())
	for _, r := range reqs {
		assert.Len(t, r.ChunkTimes, 6)
	}
}

func TestOpenAICompletionsStream(t *testing.T) {
	srv, hs := startServer(t, Config{Profile: ProfileStall, TimeFactor: fastFactor, Chunks: 7})
	oc := openAIClient(t, hs)
	stream := oc.Completions.NewStreaming(testContext(t), openai.CompletionNewParams{
		Model:         "gpt-3.5-turbo-instruct",
		Prompt:        openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var text strings.Builder
	frames := 0
	var usage openai.CompletionUsage
	for stream.Next() {
		c := stream.Current()
		if len(c.Choices) == 0 {
			usage = c.Usage
			continue
		}
		if c.Choices[0].Text != "" {
			frames++
			text.WriteString(c.Choices[0].Text)
		}
	}
	require.NoError(t, stream.Err())
	rec := waitOne(t, srv)
	assert.Equal(t, 7, frames)
	assert.Equal(t, rec.Text, text.String())
	assert.Equal(t, int64(7), usage.CompletionTokens)
}

func TestNonStreamingResponsesParse(t *testing.T) {
	// Without streaming the whole planned generation time passes before the single JSON body.
	srv, hs := startServer(t, Config{Profile: `{"ttft_ms":20,"gaps_ms":[10,10]}`})
	oc := openAIClient(t, hs)
	ac := anthropicClient(t, hs)
	ctx := testContext(t)

	started := time.Now()
	chat, err := oc.Chat.Completions.New(ctx, chatParams("gpt-4o"))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(started), 40*time.Millisecond)
	comp, err := oc.Completions.New(ctx, openai.CompletionNewParams{
		Model: "gpt-3.5-turbo-instruct", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")},
	})
	require.NoError(t, err)
	resp, err := oc.Responses.New(ctx, responses.ResponseNewParams{
		Model: "gpt-4.1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	require.NoError(t, err)
	msg, err := ac.Messages.New(ctx, messageParams("claude-haiku-4-5"), anthropicoption.WithRequestTimeout(5*time.Second))
	require.NoError(t, err)

	reqs, err := srv.WaitFor(ctx, 4)
	require.NoError(t, err)
	assert.Equal(t, reqs[0].Text, chat.Choices[0].Message.Content)
	assert.Equal(t, int64(3), chat.Usage.CompletionTokens)
	assert.Equal(t, "chat.completion", string(chat.Object))
	assert.Equal(t, reqs[1].Text, comp.Choices[0].Text)
	assert.Equal(t, reqs[2].Text, resp.OutputText())
	assert.Equal(t, reqs[3].Text, msg.Content[0].Text)
	assert.Equal(t, "claude-haiku-4-5", msg.Model)
	for _, r := range reqs {
		assert.False(t, r.Stream)
		assert.True(t, r.Completed)
		assert.Empty(t, r.ChunkTimes, "a non-streaming response has no content frames")
		assert.Zero(t, r.Frames)
		assert.GreaterOrEqual(t, r.End.Sub(r.Start), 40*time.Millisecond)
	}
}

func TestNonStreamingEarlyCloseFails(t *testing.T) {
	srv, hs := startServer(t, Config{Profile: `{"ttft_ms":5,"gaps_ms":[5,5],"close_after_chunk":2}`})
	oc := openAIClient(t, hs)
	_, err := oc.Chat.Completions.New(testContext(t), chatParams("gpt-4o"))
	require.Error(t, err)
	rec := waitOne(t, srv)
	assert.True(t, rec.Aborted)
	assert.Zero(t, rec.Status)
	assert.Empty(t, srv.Sent(0))
}

func TestStallKeepalivesFallInsideTheSilences(t *testing.T) {
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		t.Run(path, func(t *testing.T) {
			// 100x faster than life: 50 ms keepalives in silences of about half a second.
			srv, hs := startServer(t, Config{Profile: ProfileStallKeepalive, TimeFactor: 0.01, Seed: 9, Chunks: 10})
			resp := postJSON(testContext(t), t, hs.URL+path, chatStreamBody, nil)
			frames, err := readFrames(t, resp.Body, nil)
			require.ErrorIs(t, err, io.EOF)
			rec := waitOne(t, srv)
			require.NotEmpty(t, rec.Plan.StallAfter)
			assert.Equal(t, 50*time.Millisecond, rec.Plan.KeepaliveEvery)
			t.Logf("stalls after chunks %v: %v", rec.Plan.StallAfter, rec.Plan.Gaps)

			wantKeepalives := 0
			for _, after := range rec.Plan.StallAfter {
				// One keepalive per full interval of the silence.
				wantKeepalives += int(rec.Plan.Gaps[after-1] / rec.Plan.KeepaliveEvery)
			}
			keepalives := rec.KeepaliveTimes
			if path == "/v1/messages" {
				keepalives = keepalives[1:] // the ping right after the first block opens
			}
			// A stall of the loaded test machine longer than the interval skips
			// a tick (under -race on a busy CI machine, most of them), so only
			// the bounds are firm: never more than the silences hold, and at
			// least one in each.
			assert.LessOrEqual(t, len(keepalives), wantKeepalives+len(rec.Plan.StallAfter))
			assert.GreaterOrEqual(t, len(keepalives), len(rec.Plan.StallAfter))
			for _, k := range keepalives {
				inside := false
				for _, after := range rec.Plan.StallAfter {
					inside = inside || (k.After(rec.ChunkTimes[after-1]) && k.Before(rec.ChunkTimes[after]))
				}
				assert.True(t, inside, "keepalive at %v is outside every stall", k.Sub(rec.Start))
			}
			comments := 0
			for _, f := range frames {
				if f.comment || f.event == "ping" {
					comments++
				}
			}
			assert.Equal(t, rec.Keepalives(), comments)
		})
	}
}

func TestBurstWritesEverythingAtOnce(t *testing.T) {
	srv, hs := startServer(t, Config{Profile: ProfileBurst, TimeFactor: fastFactor, Chunks: 15})
	resp := postJSON(testContext(t), t, hs.URL+"/v1/chat/completions", chatStreamBody, nil)
	frames, err := readFrames(t, resp.Body, nil)
	require.ErrorIs(t, err, io.EOF)
	rec := waitOne(t, srv)
	require.Len(t, rec.ChunkTimes, 15)
	for _, ct := range rec.ChunkTimes {
		assert.Equal(t, rec.ChunkTimes[0], ct)
	}
	var received []time.Time
	for _, f := range frames {
		if f.isContent() {
			received = append(received, f.at)
		}
	}
	require.Len(t, received, 15)
	// One write: the client reads all 15 frames back to back (the server-side equality above is
	// the exact proof; this bounds what the client saw, with room for a loaded machine).
	assert.Less(t, received[14].Sub(received[0]), lateTolerance)
	assert.Len(t, frames, rec.Frames)
}

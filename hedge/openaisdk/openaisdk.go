// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package openaisdk adapts a client of the official openai-go SDK as a
// hedge.Source. It is a package of its own so that a program using the plain
// HTTP sources of package hedge does not import the SDK.
package openaisdk // import "github.com/streamstall/streamstall/hedge/openaisdk"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/streamstall/streamstall/hedge"
	"github.com/streamstall/streamstall/internal/hedgecore"
	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/sse"
)

// NewSource adapts a client of the official openai-go SDK. params supplies
// the model and any other parameter; its messages are replaced by the
// request's. Each chunk is classified from its raw JSON by the same chunk
// classifier as the HTTP sources of package hedge. Two limits of the SDK: SSE
// comments never reach it (they do not count anyway), and it ends a stream
// cut before "[DONE]" as cleanly as a finished one, so a cut after the last
// chunk passes for a completion.
func NewSource(name string, client openai.Client, params openai.ChatCompletionNewParams, opts ...option.RequestOption) hedge.Source {
	return &source{name: name, client: client, params: params, opts: opts}
}

type source struct {
	name   string
	client openai.Client
	params openai.ChatCompletionNewParams
	opts   []option.RequestOption
}

func (s *source) Name() string     { return s.name }
func (s *source) Provider() string { return llmstream.ShapeChatCompletions.Provider() }
func (s *source) Model() string    { return s.params.Model }

func (s *source) Open(ctx context.Context, req *hedge.Request) (hedge.Stream, error) {
	p := s.params
	p.Messages = make([]openai.ChatCompletionMessageParamUnion, 0, len(req.Messages)+2)
	if req.System != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			p.Messages = append(p.Messages, openai.AssistantMessage(m.Content))
		} else {
			p.Messages = append(p.Messages, openai.UserMessage(m.Content))
		}
	}
	if req.Prefix != "" {
		p.Messages = append(p.Messages, openai.AssistantMessage(req.Prefix))
	}
	if req.MaxTokens > 0 {
		p.MaxCompletionTokens = openai.Int(int64(req.MaxTokens))
	}
	p.StreamOptions.IncludeUsage = openai.Bool(true)
	st := &stream{src: s, s: s.client.Chat.Completions.NewStreaming(ctx, p, s.opts...)}
	// The SDK reports an HTTP error on the first Next: take it here, so that
	// it is sorted before commit like any refusal.
	if st.s.Next() {
		st.pending = true
	} else if err := st.s.Err(); err != nil {
		_ = st.s.Close()
		return nil, s.mapError(err)
	}
	return st, nil
}

func (s *source) mapError(err error) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		se := &hedge.StatusError{Source: s.name, StatusCode: apiErr.StatusCode, Body: apiErr.Message}
		if apiErr.Response != nil {
			// The wait the source asked for, as the HTTP sources read it:
			// no attempt of the call goes to it before the wait is over.
			se.RetryAfter, _ = hedgecore.RetryAfter(apiErr.Response.Header, time.Now())
		}
		return se
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		return fmt.Errorf("hedge: %s: %w", s.name, &hedge.StatusError{Source: s.name, StatusCode: 500, Body: "error event in stream"})
	}
	return fmt.Errorf("hedge: %s: %w", s.name, err)
}

type stream struct {
	src     *source
	s       *ssestream.Stream[openai.ChatCompletionChunk]
	pending bool
	meta    llmstream.Meta
	done    bool
}

func (st *stream) Recv() (hedge.Event, error) {
	if st.done {
		return hedge.Event{}, io.EOF
	}
	if !st.pending && !st.s.Next() {
		if err := st.s.Err(); err != nil {
			return hedge.Event{}, st.src.mapError(err)
		}
		st.done = true
		ev := hedge.Event{
			Type: hedge.EventDone, Model: st.meta.ResponseModel,
			Usage: hedge.Usage{InputTokens: st.meta.InputTokens, OutputTokens: st.meta.OutputTokens},
		}
		if n := len(st.meta.FinishReasons); n > 0 {
			ev.FinishReason = st.meta.FinishReasons[n-1]
		}
		return ev, nil
	}
	st.pending = false
	chunk := st.s.Current()
	sev := sse.Event{Data: []byte(chunk.RawJSON())}
	f, _ := llmstream.Classify(llmstream.ShapeChatCompletions, &sev) // malformed: KindMeta
	first := st.meta.ResponseModel == ""
	st.meta.Merge(&f.Meta)
	out := hedge.Event{Type: hedge.EventKeepalive}
	if first {
		out.Model = st.meta.ResponseModel
	}
	if f.Kind == llmstream.KindContent {
		out.Type = hedge.EventContent
		out.Chunk = hedge.Chunk{Kind: kindOf(f.ChunkKind), Text: f.Delta}
	}
	return out, nil
}

func (st *stream) Close() error { return st.s.Close() }

// kindOf maps the classifier's llm.stream.chunk.kind value to the hedge
// ChunkKind whose String it is.
func kindOf(k string) hedge.ChunkKind {
	for _, c := range [...]hedge.ChunkKind{hedge.ChunkToolCall, hedge.ChunkReasoning} {
		if c.String() == k {
			return c
		}
	}
	return hedge.ChunkText
}

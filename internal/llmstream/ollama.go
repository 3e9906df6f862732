// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"encoding/json"

	"github.com/streamstall/streamstall/internal/semconv"
)

// ollamaToolCall is one tool call of Ollama's native API: Ollama sends each
// call whole, its arguments an object, never in fragments.
type ollamaToolCall struct {
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// ollamaFrame is one line of an /api/chat or /api/generate stream (the
// message of chat, the response of generate), and a whole answer too.
type ollamaFrame struct {
	Model   string `json:"model"`
	Message *struct {
		Content   string           `json:"content"`
		Thinking  string           `json:"thinking"`
		ToolCalls []ollamaToolCall `json:"tool_calls"`
	} `json:"message"`
	Response  string           `json:"response"`
	Thinking  string           `json:"thinking"`
	ToolCalls []ollamaToolCall `json:"tool_calls"`

	Done       bool   `json:"done"`
	DoneReason string `json:"done_reason"`
	// Ollama omits the counts and durations that are zero (a prompt served
	// whole from its cache has no prompt_eval_count).
	PromptEvalCount    int64 `json:"prompt_eval_count"`
	EvalCount          int64 `json:"eval_count"`
	TotalDuration      int64 `json:"total_duration"`
	LoadDuration       int64 `json:"load_duration"`
	PromptEvalDuration int64 `json:"prompt_eval_duration"`
	EvalDuration       int64 `json:"eval_duration"`

	// Error is a string in Ollama's own errors; an object from gateways
	// speaking OpenAI's error format.
	Error json.RawMessage `json:"error"`
}

func (o *ollamaFrame) meta(m *Meta) {
	m.ResponseModel = o.Model
	if o.Done {
		if o.DoneReason != "" {
			m.FinishReasons = append(m.FinishReasons, o.DoneReason)
		}
		// The last frame carries the counts; a missing one is a zero.
		m.InputTokens, m.HasInputTokens = o.PromptEvalCount, true
		m.OutputTokens, m.HasOutputTokens = o.EvalCount, true
		m.Server = ServerTimings{Total: o.TotalDuration, Load: o.LoadDuration, PromptEval: o.PromptEvalDuration, Eval: o.EvalDuration}
	}
	if len(o.Error) > 0 && string(o.Error) != "null" {
		var e apiError
		if json.Unmarshal(o.Error, &e) == nil {
			e.meta(m)
		} else {
			// Ollama's error is only a message: no code, no type.
			m.ErrorMessage = rawString(o.Error)
		}
	}
}

func (o *ollamaFrame) hasError() bool { return len(o.Error) > 0 && string(o.Error) != "null" }

// classifyOllama classifies one NDJSON line of Ollama's native API. Answer
// content wins over reasoning and over the end: a last frame that carries
// text is a chunk (its done_reason still ends the stream).
func classifyOllama(data []byte, f *Frame) error {
	var o ollamaFrame
	if err := decode(data, &o); err != nil {
		return err
	}
	o.meta(&f.Meta)
	if o.hasError() {
		f.Kind = KindError
		return nil
	}
	content, thinking, calls := o.Response, o.Thinking, o.ToolCalls
	if o.Message != nil {
		content, thinking, calls = o.Message.Content, o.Message.Thinking, o.Message.ToolCalls
	}
	switch {
	case content != "":
		f.content(semconv.ChunkKindText, content)
	case len(calls) > 0:
		f.content(semconv.ChunkKindToolCall, string(calls[0].Function.Arguments))
	case thinking != "":
		f.content(semconv.ChunkKindReasoning, thinking)
	case o.Done:
		f.Kind = KindDone
	}
	return nil
}

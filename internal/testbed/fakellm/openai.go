// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import "encoding/json"

var jsonNull = json.RawMessage("null")

type chatChunk struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	ServiceTier       string            `json:"service_tier"`
	SystemFingerprint string            `json:"system_fingerprint"`
	Choices           []chatChunkChoice `json:"choices"`
	// Usage is null on every frame but the last when the client asked for usage, absent otherwise.
	Usage json.RawMessage `json:"usage,omitempty"`
}

type chatChunkChoice struct {
	Index        int       `json:"index"`
	Delta        chatDelta `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type chatDelta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCall  `json:"tool_calls,omitempty"`
	Refusal          json.RawMessage `json:"refusal,omitempty"`
}

type chatToolCall struct {
	Index    *int             `json:"index,omitempty"`
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"`
	Function chatToolFunction `json:"function"`
}

type chatToolFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
		AudioTokens  int `json:"audio_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens          int `json:"reasoning_tokens"`
		AudioTokens              int `json:"audio_tokens"`
		AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
		RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
	} `json:"completion_tokens_details"`
}

func newChatUsage(a *answer) chatUsage {
	u := chatUsage{PromptTokens: a.inputTokens, CompletionTokens: a.outputTokens()}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.CompletionTokensDetails.ReasoningTokens = a.count(ContentReasoning)
	return u
}

func finishReason(a *answer) string {
	if a.count(ContentToolCall) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// chatEmitter renders OpenAI chat completions.
type chatEmitter struct {
	ans          *answer
	model        string
	created      int64
	includeUsage bool
}

func (e *chatEmitter) frame(d chatDelta, finish *string) []byte {
	c := chatChunk{
		ID: e.ans.id, Object: "chat.completion.chunk", Created: e.created, Model: e.model,
		ServiceTier: "default", SystemFingerprint: e.ans.fingerprint,
		Choices: []chatChunkChoice{{Delta: d, FinishReason: finish}},
	}
	if e.includeUsage {
		c.Usage = jsonNull
	}
	return dataFrame(c)
}

func (e *chatEmitter) start() [][]byte {
	empty := ""
	return [][]byte{e.frame(chatDelta{Role: "assistant", Content: &empty, Refusal: jsonNull}, nil)}
}

func (e *chatEmitter) chunk(i int) [][]byte {
	p := e.ans.pieces[i]
	text := p.text
	var d chatDelta
	switch p.kind {
	case ContentReasoning:
		d.ReasoningContent = &text
	case ContentToolCall:
		zero := 0
		tc := chatToolCall{Index: &zero, Function: chatToolFunction{Arguments: text}}
		if i == 0 && e.ans.toolHeader {
			tc.ID, tc.Type, tc.Function.Name = e.ans.toolCallID, "function", e.ans.toolName
		}
		d.ToolCalls = []chatToolCall{tc}
	default:
		d.Content = &text
	}
	return [][]byte{e.frame(d, nil)}
}

func (e *chatEmitter) finish() [][]byte {
	reason := finishReason(e.ans)
	out := [][]byte{e.frame(chatDelta{}, &reason)}
	if e.includeUsage {
		out = append(out, dataFrame(chatChunk{
			ID: e.ans.id, Object: "chat.completion.chunk", Created: e.created, Model: e.model,
			ServiceTier: "default", SystemFingerprint: e.ans.fingerprint,
			Choices: []chatChunkChoice{}, Usage: marshal(newChatUsage(e.ans)),
		}))
	}
	return append(out, sseDone)
}

type chatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []chatChoice `json:"choices"`
	Usage             chatUsage    `json:"usage"`
	ServiceTier       string       `json:"service_tier"`
	SystemFingerprint string       `json:"system_fingerprint"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	Logprobs     *struct{}   `json:"logprobs"`
	FinishReason string      `json:"finish_reason"`
}

type chatMessage struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCall `json:"tool_calls,omitempty"`
	Refusal          *string        `json:"refusal"`
	Annotations      []struct{}     `json:"annotations"`
}

func (e *chatEmitter) body() []byte {
	m := chatMessage{Role: "assistant", ReasoningContent: e.ans.text(ContentReasoning), Annotations: []struct{}{}}
	if e.ans.count(ContentToolCall) > 0 {
		m.ToolCalls = []chatToolCall{{
			ID: e.ans.toolCallID, Type: "function",
			Function: chatToolFunction{Name: e.ans.toolName, Arguments: e.ans.arguments()},
		}}
	} else {
		text := e.ans.text(ContentText)
		m.Content = &text
	}
	return marshal(chatCompletion{
		ID: e.ans.id, Object: "chat.completion", Created: e.created, Model: e.model,
		Choices: []chatChoice{{Message: m, FinishReason: finishReason(e.ans)}},
		Usage:   newChatUsage(e.ans), ServiceTier: "default", SystemFingerprint: e.ans.fingerprint,
	})
}

// completionsEmitter renders the legacy OpenAI completions API.
type completionsEmitter struct {
	ans          *answer
	model        string
	created      int64
	includeUsage bool
}

type completionChunk struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Choices           []completionChoice `json:"choices"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"`
	Usage             json.RawMessage    `json:"usage,omitempty"`
}

type completionChoice struct {
	Text         string    `json:"text"`
	Index        int       `json:"index"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type completionUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (e *completionsEmitter) usage() completionUsage {
	return completionUsage{e.ans.inputTokens, e.ans.outputTokens(), e.ans.inputTokens + e.ans.outputTokens()}
}

func (e *completionsEmitter) frame(choices []completionChoice, usage json.RawMessage) []byte {
	c := completionChunk{
		ID: e.ans.id, Object: "text_completion", Created: e.created, Choices: choices,
		Model: e.model, SystemFingerprint: e.ans.fingerprint, Usage: usage,
	}
	if e.includeUsage && usage == nil {
		c.Usage = jsonNull
	}
	return dataFrame(c)
}

func (e *completionsEmitter) start() [][]byte { return nil }

func (e *completionsEmitter) chunk(i int) [][]byte {
	return [][]byte{e.frame([]completionChoice{{Text: e.ans.pieces[i].text}}, nil)}
}

func (e *completionsEmitter) finish() [][]byte {
	stop := "stop"
	out := [][]byte{e.frame([]completionChoice{{FinishReason: &stop}}, nil)}
	if e.includeUsage {
		out = append(out, e.frame([]completionChoice{}, marshal(e.usage())))
	}
	return append(out, sseDone)
}

func (e *completionsEmitter) body() []byte {
	stop := "stop"
	return marshal(struct {
		ID                string             `json:"id"`
		Object            string             `json:"object"`
		Created           int64              `json:"created"`
		Model             string             `json:"model"`
		Choices           []completionChoice `json:"choices"`
		Usage             completionUsage    `json:"usage"`
		SystemFingerprint string             `json:"system_fingerprint"`
	}{
		e.ans.id, "text_completion", e.created, e.model,
		[]completionChoice{{Text: e.ans.text(ContentText), FinishReason: &stop}},
		e.usage(), e.ans.fingerprint,
	})
}

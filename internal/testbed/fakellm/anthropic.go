// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import "encoding/json"

// messagesEmitter renders Anthropic messages: one content block per piece kind, in order
// (thinking, then text; or one tool_use block).
type messagesEmitter struct {
	ans   *answer
	model string
	block int // index of the open content block
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

type anthropicMessage struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []any          `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        anthropicUsage `json:"usage"`
}

type messageDelta struct {
	Type  string `json:"type"`
	Delta struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	} `json:"delta"`
	Usage struct {
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type thinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type toolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type blockDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text,omitempty"`
	Thinking    string `json:"thinking,omitempty"`
	PartialJSON string `json:"partial_json,omitempty"`
	Signature   string `json:"signature,omitempty"`
}

func (e *messagesEmitter) stopReason() string {
	if e.ans.count(ContentToolCall) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

// emptyBlock is the content_block_start payload for a block carrying pieces of kind.
func (e *messagesEmitter) emptyBlock(kind string) any {
	switch kind {
	case ContentReasoning:
		return thinkingBlock{Type: "thinking"}
	case ContentToolCall:
		return toolUseBlock{Type: "tool_use", ID: e.ans.toolCallID, Name: e.ans.toolName, Input: json.RawMessage("{}")}
	default:
		return textBlock{Type: "text"}
	}
}

func (e *messagesEmitter) blockStart(kind string) []byte {
	return eventFrame("content_block_start", struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}{"content_block_start", e.block, e.emptyBlock(kind)})
}

func (e *messagesEmitter) delta(d blockDelta) []byte {
	return eventFrame("content_block_delta", struct {
		Type  string     `json:"type"`
		Index int        `json:"index"`
		Delta blockDelta `json:"delta"`
	}{"content_block_delta", e.block, d})
}

// blockStop closes the open block; a thinking block ends with its signature, as the real API does.
func (e *messagesEmitter) blockStop(kind string) [][]byte {
	var out [][]byte
	if kind == ContentReasoning {
		out = append(out, e.delta(blockDelta{Type: "signature_delta", Signature: e.ans.signature}))
	}
	return append(out, eventFrame("content_block_stop", struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}{"content_block_stop", e.block}))
}

func (e *messagesEmitter) start() [][]byte {
	msg := anthropicMessage{
		ID: e.ans.id, Type: "message", Role: "assistant", Model: e.model, Content: []any{},
		Usage: anthropicUsage{InputTokens: e.ans.inputTokens, OutputTokens: 1},
	}
	return [][]byte{
		eventFrame("message_start", struct {
			Type    string           `json:"type"`
			Message anthropicMessage `json:"message"`
		}{"message_start", msg}),
		e.blockStart(e.ans.pieces[0].kind),
		anthropicPing,
	}
}

func (e *messagesEmitter) chunk(i int) [][]byte {
	p := e.ans.pieces[i]
	var out [][]byte
	if i > 0 && e.ans.pieces[i-1].kind != p.kind {
		out = append(out, e.blockStop(e.ans.pieces[i-1].kind)...)
		e.block++
		out = append(out, e.blockStart(p.kind))
	}
	switch p.kind {
	case ContentReasoning:
		out = append(out, e.delta(blockDelta{Type: "thinking_delta", Thinking: p.text}))
	case ContentToolCall:
		out = append(out, e.delta(blockDelta{Type: "input_json_delta", PartialJSON: p.text}))
	default:
		out = append(out, e.delta(blockDelta{Type: "text_delta", Text: p.text}))
	}
	return out
}

func (e *messagesEmitter) finish() [][]byte {
	out := e.blockStop(e.ans.pieces[len(e.ans.pieces)-1].kind)
	md := messageDelta{Type: "message_delta"}
	md.Delta.StopReason = e.stopReason()
	md.Usage.OutputTokens = e.ans.outputTokens()
	out = append(out, eventFrame("message_delta", md))
	return append(out, eventFrame("message_stop", struct {
		Type string `json:"type"`
	}{"message_stop"}))
}

func (e *messagesEmitter) body() []byte {
	var content []any
	if t := e.ans.text(ContentReasoning); t != "" {
		content = append(content, thinkingBlock{Type: "thinking", Thinking: t, Signature: e.ans.signature})
	}
	if e.ans.count(ContentToolCall) > 0 {
		content = append(content, toolUseBlock{
			Type: "tool_use", ID: e.ans.toolCallID, Name: e.ans.toolName,
			Input: json.RawMessage(e.ans.arguments()),
		})
	}
	if t := e.ans.text(ContentText); t != "" {
		content = append(content, textBlock{Type: "text", Text: t})
	}
	reason := e.stopReason()
	return marshal(anthropicMessage{
		ID: e.ans.id, Type: "message", Role: "assistant", Model: e.model,
		Content: content, StopReason: &reason,
		Usage: anthropicUsage{InputTokens: e.ans.inputTokens, OutputTokens: e.ans.outputTokens()},
	})
}

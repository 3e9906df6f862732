// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import "encoding/json"

// responsesEmitter renders the OpenAI Responses API: one output item per piece kind, in order
// (a reasoning item, then a message; or one function_call item).
type responsesEmitter struct {
	ans     *answer
	model   string
	created int64
	tools   json.RawMessage
	seq     int // sequence_number of the next event
	output  int // output_index of the open item
	done    []any
}

func newResponsesEmitter(ans *answer, wr *wireRequest, created int64) *responsesEmitter {
	tools := json.RawMessage("[]")
	if len(wr.Tools) > 0 {
		tools = marshal(wr.Tools)
	}
	return &responsesEmitter{ans: ans, model: wr.Model, created: created, tools: tools}
}

type responseObject struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	CreatedAt          int64           `json:"created_at"`
	Status             string          `json:"status"`
	Background         bool            `json:"background"`
	Error              *struct{}       `json:"error"`
	IncompleteDetails  *struct{}       `json:"incomplete_details"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Model              string          `json:"model"`
	Output             []any           `json:"output"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Reasoning          responseEffort  `json:"reasoning"`
	ServiceTier        string          `json:"service_tier"`
	Store              bool            `json:"store"`
	Temperature        float64         `json:"temperature"`
	Text               responseFormat  `json:"text"`
	ToolChoice         string          `json:"tool_choice"`
	Tools              json.RawMessage `json:"tools"`
	TopP               float64         `json:"top_p"`
	Truncation         string          `json:"truncation"`
	Usage              *responseUsage  `json:"usage"`
	User               *string         `json:"user"`
	Metadata           struct{}        `json:"metadata"`
}

type responseEffort struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

type responseFormat struct {
	Format struct {
		Type string `json:"type"`
	} `json:"format"`
}

type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

type messageItem struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Content []outputText `json:"content"`
	Role    string       `json:"role"`
}

type outputText struct {
	Type        string     `json:"type"`
	Annotations []struct{} `json:"annotations"`
	Logprobs    []struct{} `json:"logprobs"`
	Text        string     `json:"text"`
}

type functionCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
}

type reasoningItem struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Summary []struct{}      `json:"summary"`
	Content []reasoningText `json:"content,omitempty"`
}

type reasoningText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func (e *responsesEmitter) response(status string, output []any, usage *responseUsage) responseObject {
	r := responseObject{
		ID: e.ans.id, Object: "response", CreatedAt: e.created, Status: status, Model: e.model,
		Output: output, ParallelToolCalls: true, ServiceTier: "default", Store: true, Temperature: 1,
		ToolChoice: "auto", Tools: e.tools, TopP: 1, Truncation: "disabled", Usage: usage,
	}
	r.Text.Format.Type = "text"
	if r.Output == nil {
		r.Output = []any{}
	}
	return r
}

func (e *responsesEmitter) usage() *responseUsage {
	u := &responseUsage{InputTokens: e.ans.inputTokens, OutputTokens: e.ans.outputTokens()}
	u.OutputTokensDetails.ReasoningTokens = e.ans.count(ContentReasoning)
	u.TotalTokens = u.InputTokens + u.OutputTokens
	return u
}

// event renders one event; fields are merged after type and sequence_number.
func (e *responsesEmitter) event(typ string, fields any) []byte {
	head := marshal(struct {
		Type           string `json:"type"`
		SequenceNumber int    `json:"sequence_number"`
	}{typ, e.seq})
	e.seq++
	body := marshal(fields)
	if len(body) > 2 { // splice {"type":..,"sequence_number":n} and {...} into one object
		head = append(append(head[:len(head)-1], ','), body[1:]...)
	}
	return append(append(append([]byte("event: "+typ+"\ndata: "), head...), '\n'), '\n')
}

func (e *responsesEmitter) itemID(kind string) string {
	switch kind {
	case ContentReasoning:
		return e.ans.reasonID
	case ContentToolCall:
		return "fc_" + e.ans.itemID
	default:
		return "msg_" + e.ans.itemID
	}
}

// item is the output item of kind, in progress or complete.
func (e *responsesEmitter) item(kind string, complete bool) any {
	status := "in_progress"
	if complete {
		status = "completed"
	}
	switch kind {
	case ContentReasoning:
		it := reasoningItem{ID: e.itemID(kind), Type: "reasoning", Summary: []struct{}{}}
		if complete {
			it.Content = []reasoningText{{Type: "reasoning_text", Text: e.ans.text(kind)}}
		}
		return it
	case ContentToolCall:
		it := functionCallItem{
			ID: e.itemID(kind), Type: "function_call", Status: status,
			CallID: e.ans.toolCallID, Name: e.ans.toolName,
		}
		if complete {
			it.Arguments = e.ans.arguments()
		}
		return it
	default:
		it := messageItem{ID: e.itemID(kind), Type: "message", Status: status, Content: []outputText{}, Role: "assistant"}
		if complete {
			it.Content = []outputText{e.part(kind, true).(outputText)}
		}
		return it
	}
}

// part is the content part of a message or reasoning item.
func (e *responsesEmitter) part(kind string, complete bool) any {
	text := ""
	if complete {
		text = e.ans.text(kind)
	}
	if kind == ContentReasoning {
		return reasoningText{Type: "reasoning_text", Text: text}
	}
	return outputText{Type: "output_text", Annotations: []struct{}{}, Logprobs: []struct{}{}, Text: text}
}

type itemEvent struct {
	OutputIndex int `json:"output_index"`
	Item        any `json:"item"`
}

type partEvent struct {
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Part         any    `json:"part"`
}

func (e *responsesEmitter) open(kind string) [][]byte {
	out := [][]byte{e.event("response.output_item.added", itemEvent{e.output, e.item(kind, false)})}
	if kind != ContentToolCall {
		out = append(out, e.event("response.content_part.added", partEvent{e.itemID(kind), e.output, 0, e.part(kind, false)}))
	}
	return out
}

func (e *responsesEmitter) close(kind string) [][]byte {
	id := e.itemID(kind)
	var out [][]byte
	switch kind {
	case ContentToolCall:
		out = append(out, e.event("response.function_call_arguments.done", struct {
			ItemID      string `json:"item_id"`
			OutputIndex int    `json:"output_index"`
			Arguments   string `json:"arguments"`
		}{id, e.output, e.ans.arguments()}))
	case ContentReasoning:
		out = append(out, e.event("response.reasoning_text.done", struct {
			ItemID       string `json:"item_id"`
			OutputIndex  int    `json:"output_index"`
			ContentIndex int    `json:"content_index"`
			Text         string `json:"text"`
		}{id, e.output, 0, e.ans.text(kind)}))
	default:
		out = append(out, e.event("response.output_text.done", struct {
			ItemID       string     `json:"item_id"`
			OutputIndex  int        `json:"output_index"`
			ContentIndex int        `json:"content_index"`
			Text         string     `json:"text"`
			Logprobs     []struct{} `json:"logprobs"`
		}{id, e.output, 0, e.ans.text(kind), []struct{}{}}))
	}
	if kind != ContentToolCall {
		out = append(out, e.event("response.content_part.done", partEvent{id, e.output, 0, e.part(kind, true)}))
	}
	item := e.item(kind, true)
	e.done = append(e.done, item)
	return append(out, e.event("response.output_item.done", itemEvent{e.output, item}))
}

type responseEvent struct {
	Response responseObject `json:"response"`
}

func (e *responsesEmitter) start() [][]byte {
	out := [][]byte{
		e.event("response.created", responseEvent{e.response("in_progress", nil, nil)}),
		e.event("response.in_progress", responseEvent{e.response("in_progress", nil, nil)}),
	}
	return append(out, e.open(e.ans.pieces[0].kind)...)
}

func (e *responsesEmitter) chunk(i int) [][]byte {
	p := e.ans.pieces[i]
	var out [][]byte
	if i > 0 && e.ans.pieces[i-1].kind != p.kind {
		out = append(out, e.close(e.ans.pieces[i-1].kind)...)
		e.output++
		out = append(out, e.open(p.kind)...)
	}
	id := e.itemID(p.kind)
	switch p.kind {
	case ContentToolCall:
		out = append(out, e.event("response.function_call_arguments.delta", struct {
			ItemID      string `json:"item_id"`
			OutputIndex int    `json:"output_index"`
			Delta       string `json:"delta"`
		}{id, e.output, p.text}))
	case ContentReasoning:
		out = append(out, e.event("response.reasoning_text.delta", struct {
			ItemID       string `json:"item_id"`
			OutputIndex  int    `json:"output_index"`
			ContentIndex int    `json:"content_index"`
			Delta        string `json:"delta"`
		}{id, e.output, 0, p.text}))
	default:
		out = append(out, e.event("response.output_text.delta", struct {
			ItemID       string     `json:"item_id"`
			OutputIndex  int        `json:"output_index"`
			ContentIndex int        `json:"content_index"`
			Delta        string     `json:"delta"`
			Logprobs     []struct{} `json:"logprobs"`
		}{id, e.output, 0, p.text, []struct{}{}}))
	}
	return out
}

func (e *responsesEmitter) finish() [][]byte {
	out := e.close(e.ans.pieces[len(e.ans.pieces)-1].kind)
	return append(out, e.event("response.completed", responseEvent{e.response("completed", e.done, e.usage())}))
}

func (e *responsesEmitter) body() []byte {
	var output []any
	kind := ""
	for _, p := range e.ans.pieces {
		if p.kind != kind {
			kind = p.kind
			output = append(output, e.item(kind, true))
		}
	}
	return marshal(e.response("completed", output, e.usage()))
}

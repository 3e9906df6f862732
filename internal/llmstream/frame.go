// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/sse"
)

// Kind says what a frame is, for stall accounting.
type Kind uint8

const (
	// KindMeta is a frame without content: role-only or empty deltas,
	// usage-only frames, message_start, content_block_start/stop,
	// response.created and the like. It never counts as a chunk.
	KindMeta Kind = iota
	// KindContent is a content chunk: generated text, a tool-call delta or a
	// reasoning delta (Frame.ChunkKind says which).
	KindContent
	// KindKeepalive is an SSE comment or an "event: ping": never a chunk, and
	// it never resets a stall clock.
	KindKeepalive
	// KindDone ends the stream normally: "data: [DONE]", message_stop,
	// response.completed, response.incomplete.
	KindDone
	// KindError is an error the provider reported inside the stream.
	KindError
)

func (k Kind) String() string {
	switch k {
	case KindContent:
		return "content"
	case KindKeepalive:
		return "keepalive"
	case KindDone:
		return "done"
	case KindError:
		return "error"
	}
	return "meta"
}

// Frame is one classified SSE event.
type Frame struct {
	Kind Kind
	// ChunkKind is semconv.ChunkKindText, ChunkKindToolCall or
	// ChunkKindReasoning when Kind is KindContent.
	ChunkKind string
	// Delta is the generated text of a text or reasoning chunk, or the
	// argument fragment of a tool-call chunk. It is completion text: it must
	// never be recorded in telemetry.
	Delta string
	// Meta holds what this frame says about the response.
	Meta Meta
}

// Meta is response metadata found in frames or in a whole response body.
type Meta struct {
	ResponseID    string
	ResponseModel string
	FinishReasons []string
	// InputTokens counts all input tokens, cached ones included, as the GenAI
	// conventions ask (Anthropic reports cache reads and writes apart).
	InputTokens     int64
	OutputTokens    int64
	HasInputTokens  bool
	HasOutputTokens bool
	// ErrorType is the provider's identifier of an error, as the GenAI
	// conventions want error.type: its error code when it gives one (for
	// Google, the status name: RESOURCE_EXHAUSTED), else its error type.
	// Classify sets ErrorTypeUnknown on an error frame that has neither;
	// ParseResponse leaves it empty, for the caller to fall back on the HTTP
	// status code. ErrorMessage is the error's text, which may quote the
	// request and so must not be recorded either.
	ErrorType    string
	ErrorMessage string
	// Server holds the server's own timings of the call, when it reports
	// them (Ollama does, on its last frame).
	Server ServerTimings
}

// ServerTimings are the durations a server reports for its own work, in
// nanoseconds, zero when not reported: with them an operator tells the
// engine's time from the network's.
type ServerTimings struct {
	Total      int64 // the whole request, as the server saw it
	Load       int64 // loading the model
	PromptEval int64 // evaluating the prompt (prefill)
	Eval       int64 // generating the output (decode)
}

// ErrorTypeUnknown is the error type of an error frame that names none.
const ErrorTypeUnknown = "error"

// Merge folds the metadata of a later frame into m: ids and models keep their
// first value, finish reasons accumulate, token counts take the latest
// report (Anthropic's message_delta carries cumulative counts).
func (m *Meta) Merge(o *Meta) {
	if m.ResponseID == "" {
		m.ResponseID = o.ResponseID
	}
	if m.ResponseModel == "" {
		m.ResponseModel = o.ResponseModel
	}
	m.FinishReasons = append(m.FinishReasons, o.FinishReasons...)
	if o.HasInputTokens {
		m.InputTokens, m.HasInputTokens = o.InputTokens, true
	}
	if o.HasOutputTokens {
		m.OutputTokens, m.HasOutputTokens = o.OutputTokens, true
	}
	if o.ErrorType != "" || o.ErrorMessage != "" {
		m.ErrorType, m.ErrorMessage = o.ErrorType, o.ErrorMessage
	}
	if o.Server != (ServerTimings{}) {
		m.Server = o.Server
	}
}

// ErrMalformed wraps a frame whose data is not the JSON its shape promises.
// Such a frame is classified KindMeta: telemetry never breaks a stream.
var ErrMalformed = errors.New("llmstream: malformed frame")

var (
	doneData = []byte("[DONE]")
	pingType = []byte("ping")
)

// Classify classifies one event of a stream of the given shape: an SSE
// event, an NDJSON line, a JSON array element, or an AWS event stream
// message (Bedrock's shapes, read by classifyBedrock).
func Classify(shape Shape, ev *sse.Event) (Frame, error) {
	if shape.bedrock() {
		return classifyBedrock(shape, ev)
	}
	if ev.Comment || bytes.Equal(ev.Type, pingType) {
		return Frame{Kind: KindKeepalive}, nil
	}
	data := bytes.TrimSpace(ev.Data)
	if bytes.Equal(data, doneData) {
		return Frame{Kind: KindDone}, nil
	}
	if len(data) == 0 {
		return Frame{Kind: KindMeta}, nil
	}
	var (
		f   Frame
		err error
	)
	switch shape {
	case ShapeChatCompletions, ShapeCompletions:
		if classifyChatFast(data, &f) {
			return f, nil
		}
		f = Frame{}
		err = classifyChat(data, &f)
	case ShapeResponses:
		err = classifyResponses(ev.Type, data, &f)
	case ShapeMessages:
		err = classifyMessages(data, &f)
	case ShapeGemini:
		err = classifyGemini(data, &f)
	case ShapeOllamaChat, ShapeOllamaGenerate:
		err = classifyOllama(data, &f)
	default:
		return Frame{Kind: KindMeta}, nil
	}
	if err != nil {
		return Frame{Kind: KindMeta}, fmt.Errorf("%w: %s: %w", ErrMalformed, shape, err)
	}
	if f.Kind == KindError && f.Meta.ErrorType == "" {
		f.Meta.ErrorType = ErrorTypeUnknown
	}
	return f, nil
}

// decode unmarshals data into v. A value of an unexpected type in a field we
// read (a compatible server's own extension) leaves that field empty rather
// than losing the whole frame.
func decode(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	if _, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return nil
	}
	return err
}

type apiError struct {
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
}

// meta records the error: its code when it has one (OpenAI's 429 is type
// "requests", code "rate_limit_exceeded"), else its type.
func (e *apiError) meta(m *Meta) {
	m.ErrorType = rawString(e.Code)
	if m.ErrorType == "" {
		m.ErrorType = e.Type
	}
	m.ErrorMessage = e.Message
}

// rawString renders a JSON string or number code as text ("" for null).
func rawString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	return string(raw)
}

type toolCallDelta struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatChunk covers OpenAI chat.completion.chunk and text_completion frames,
// with the reasoning fields of compatible servers (reasoning_content:
// DeepSeek, vLLM; reasoning: OpenRouter, Ollama).
type chatChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Content          string          `json:"content"`
			Refusal          string          `json:"refusal"`
			ReasoningContent string          `json:"reasoning_content"`
			Reasoning        string          `json:"reasoning"`
			ToolCalls        []toolCallDelta `json:"tool_calls"`
			// Audio is an audio answer's (modalities ["text", "audio"]):
			// its transcript is the text, content staying null.
			Audio *struct {
				Transcript string `json:"transcript"`
			} `json:"audio"`
			FunctionCall *struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function_call"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
	Error *apiError `json:"error"`
}

func classifyChat(data []byte, f *Frame) error {
	var c chatChunk
	if err := decode(data, &c); err != nil {
		return err
	}
	f.Meta.ResponseID, f.Meta.ResponseModel = c.ID, c.Model
	if c.Usage != nil {
		f.Meta.InputTokens, f.Meta.HasInputTokens = c.Usage.PromptTokens, true
		f.Meta.OutputTokens, f.Meta.HasOutputTokens = c.Usage.CompletionTokens, true
	}
	if c.Error != nil {
		c.Error.meta(&f.Meta)
		f.Kind = KindError
		return nil
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.FinishReason != "" {
			f.Meta.FinishReasons = append(f.Meta.FinishReasons, ch.FinishReason)
		}
		if f.Kind == KindContent {
			continue
		}
		d := &ch.Delta
		switch {
		case ch.Text != "":
			f.content(semconv.ChunkKindText, ch.Text)
		case d.Content != "":
			f.content(semconv.ChunkKindText, d.Content)
		case d.Refusal != "":
			f.content(semconv.ChunkKindText, d.Refusal)
		case d.Audio != nil && d.Audio.Transcript != "":
			f.content(semconv.ChunkKindText, d.Audio.Transcript)
		case len(d.ToolCalls) > 0:
			for _, tc := range d.ToolCalls {
				if tc.ID != "" || tc.Function.Name != "" || tc.Function.Arguments != "" {
					f.content(semconv.ChunkKindToolCall, tc.Function.Arguments)
					break
				}
			}
		case d.FunctionCall != nil && (d.FunctionCall.Name != "" || d.FunctionCall.Arguments != ""):
			f.content(semconv.ChunkKindToolCall, d.FunctionCall.Arguments)
		case d.ReasoningContent != "":
			f.content(semconv.ChunkKindReasoning, d.ReasoningContent)
		case d.Reasoning != "":
			f.content(semconv.ChunkKindReasoning, d.Reasoning)
		}
	}
	return nil
}

func (f *Frame) content(kind, delta string) {
	f.Kind, f.ChunkKind, f.Delta = KindContent, kind, delta
}

type responseObject struct {
	ID                string `json:"id"`
	Model             string `json:"model"`
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Usage *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	} `json:"usage"`
	Error *apiError `json:"error"`
}

func (r *responseObject) meta(m *Meta) {
	m.ResponseID, m.ResponseModel = r.ID, r.Model
	if r.Usage != nil {
		m.InputTokens, m.HasInputTokens = r.Usage.InputTokens, true
		m.OutputTokens, m.HasOutputTokens = r.Usage.OutputTokens, true
	}
	// The Responses API has no finish reason: its final status (or the reason
	// it is incomplete) plays that part.
	switch {
	case r.IncompleteDetails != nil && r.IncompleteDetails.Reason != "":
		m.FinishReasons = append(m.FinishReasons, r.IncompleteDetails.Reason)
	case r.Status == "completed" || r.Status == "incomplete" || r.Status == "failed" || r.Status == "cancelled":
		m.FinishReasons = append(m.FinishReasons, r.Status)
	}
	if r.Error != nil {
		r.Error.meta(m)
	}
}

type responsesEvent struct {
	Type     string          `json:"type"`
	Delta    json.RawMessage `json:"delta"`
	Response *responseObject `json:"response"`
	Code     json.RawMessage `json:"code"`
	Message  string          `json:"message"`
}

// responsesChunkKinds maps the Responses API delta events that carry
// generated content to their chunk kind.
var responsesChunkKinds = map[string]string{
	"response.output_text.delta":                semconv.ChunkKindText,
	"response.refusal.delta":                    semconv.ChunkKindText,
	"response.function_call_arguments.delta":    semconv.ChunkKindToolCall,
	"response.custom_tool_call_input.delta":     semconv.ChunkKindToolCall,
	"response.mcp_call_arguments.delta":         semconv.ChunkKindToolCall,
	"response.code_interpreter_call_code.delta": semconv.ChunkKindToolCall,
	"response.shell_call_command.delta":         semconv.ChunkKindToolCall,
	"response.reasoning_text.delta":             semconv.ChunkKindReasoning,
	"response.reasoning_summary_text.delta":     semconv.ChunkKindReasoning,
	"response.audio.transcript.delta":           semconv.ChunkKindText,
}

func classifyResponses(sseType, data []byte, f *Frame) error {
	var e responsesEvent
	if err := decode(data, &e); err != nil {
		return err
	}
	typ := e.Type
	if typ == "" {
		typ = string(sseType)
	}
	if e.Response != nil {
		e.Response.meta(&f.Meta)
	}
	switch typ {
	case "response.completed", "response.incomplete":
		f.Kind = KindDone
		return nil
	case "response.failed":
		f.Kind = KindError
		if f.Meta.ErrorType == "" {
			f.Meta.ErrorType = "response.failed"
		}
		return nil
	case "error":
		f.Kind = KindError
		(&apiError{Code: e.Code, Message: e.Message}).meta(&f.Meta)
		return nil
	}
	if kind := responsesChunkKinds[typ]; kind != "" {
		var delta string
		if json.Unmarshal(e.Delta, &delta) == nil && delta != "" {
			f.content(kind, delta)
		}
	}
	return nil
}

type anthropicUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens int64  `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64  `json:"cache_read_input_tokens"`
}

func (u *anthropicUsage) meta(m *Meta) {
	if u.InputTokens != nil {
		m.InputTokens = *u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
		m.HasInputTokens = true
	}
	if u.OutputTokens != nil {
		m.OutputTokens, m.HasOutputTokens = *u.OutputTokens, true
	}
}

type messagesEvent struct {
	Type    string `json:"type"`
	Message *struct {
		ID         string          `json:"id"`
		Model      string          `json:"model"`
		StopReason string          `json:"stop_reason"`
		Usage      *anthropicUsage `json:"usage"`
	} `json:"message"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		Thinking    string `json:"thinking"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anthropicUsage `json:"usage"`
	Error *apiError       `json:"error"`
}

func classifyMessages(data []byte, f *Frame) error {
	var e messagesEvent
	if err := decode(data, &e); err != nil {
		return err
	}
	if e.Message != nil {
		f.Meta.ResponseID, f.Meta.ResponseModel = e.Message.ID, e.Message.Model
		if e.Message.Usage != nil {
			e.Message.Usage.meta(&f.Meta)
		}
	}
	if e.Usage != nil {
		e.Usage.meta(&f.Meta)
	}
	switch e.Type {
	case "ping":
		f.Kind = KindKeepalive
	case "message_stop":
		f.Kind = KindDone
	case "error":
		f.Kind = KindError
		if e.Error == nil {
			e.Error = &apiError{}
		}
		e.Error.meta(&f.Meta)
	case "message_delta":
		if e.Delta != nil && e.Delta.StopReason != "" {
			f.Meta.FinishReasons = append(f.Meta.FinishReasons, e.Delta.StopReason)
		}
	case "content_block_delta":
		if e.Delta == nil {
			return nil
		}
		switch e.Delta.Type {
		case "text_delta":
			if e.Delta.Text != "" {
				f.content(semconv.ChunkKindText, e.Delta.Text)
			}
		case "input_json_delta":
			if e.Delta.PartialJSON != "" {
				f.content(semconv.ChunkKindToolCall, e.Delta.PartialJSON)
			}
		case "thinking_delta":
			if e.Delta.Thinking != "" {
				f.content(semconv.ChunkKindReasoning, e.Delta.Thinking)
			}
		}
	}
	return nil
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"bytes"
	"encoding/json"
	"time"
)

// ollamaRequest holds what fakellm reads of an /api/chat or /api/generate request.
type ollamaRequest struct {
	Model string `json:"model"`
	// Stream is true unless the request says false.
	Stream *bool `json:"stream"`
	Tools  []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	// Think is a bool or a level ("low", "medium", "high").
	Think json.RawMessage `json:"think"`
}

func ollamaWire(body []byte) (wireRequest, error) {
	var o ollamaRequest
	if err := json.Unmarshal(body, &o); err != nil {
		return wireRequest{}, err
	}
	wr := wireRequest{Model: o.Model, Stream: o.Stream == nil || *o.Stream}
	for _, t := range o.Tools {
		wr.tools = append(wr.tools, t.Function.Name)
	}
	think := bytes.TrimSpace(o.Think)
	wr.thinks = len(think) > 0 && !bytes.Equal(think, []byte("false")) && !bytes.Equal(think, []byte("null"))
	return wr, nil
}

type ollamaToolCall struct {
	Function struct {
		Index     int             `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type ollamaMessage struct {
	Role      string           `json:"role"`
	Content   string           `json:"content"`
	Thinking  string           `json:"thinking,omitempty"`
	ToolCalls []ollamaToolCall `json:"tool_calls,omitempty"`
}

// ollamaFrame is one line of /api/chat (Message) or /api/generate (Response), and the last
// line's metrics; Ollama omits the metrics that are zero.
type ollamaFrame struct {
	Model              string         `json:"model"`
	CreatedAt          string         `json:"created_at"`
	Message            *ollamaMessage `json:"message,omitempty"`
	Response           *string        `json:"response,omitempty"`
	Thinking           string         `json:"thinking,omitempty"`
	Done               bool           `json:"done"`
	DoneReason         string         `json:"done_reason,omitempty"`
	TotalDuration      int64          `json:"total_duration,omitempty"`
	LoadDuration       int64          `json:"load_duration,omitempty"`
	PromptEvalCount    int            `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration int64          `json:"prompt_eval_duration,omitempty"`
	EvalCount          int            `json:"eval_count,omitempty"`
	EvalDuration       int64          `json:"eval_duration,omitempty"`
}

// ollamaEmitter renders Ollama's native API as NDJSON, one frame a line. created_at is the
// frame's planned time, and the last frame's durations are the plan's: the server's own account
// of prefill (TTFT, less a load of an eighth of it) and decode (first to last chunk), which a
// proxy can check against what it saw. Ollama sends tool calls whole: each tool-call chunk is one
// call.
type ollamaEmitter struct {
	ans      *answer
	model    string
	generate bool // /api/generate: response and thinking instead of message
	start0   time.Time
	plan     Plan
	offsets  []time.Duration
}

func (e *ollamaEmitter) frame(at time.Duration, p *piece, call int) ollamaFrame {
	f := ollamaFrame{Model: e.model, CreatedAt: e.start0.Add(at).UTC().Format(time.RFC3339Nano)}
	var text, thinking string
	var calls []ollamaToolCall
	if p != nil {
		switch p.kind {
		case ContentReasoning:
			thinking = p.text
		case ContentToolCall:
			var c ollamaToolCall
			c.Function.Index, c.Function.Name, c.Function.Arguments = call, e.ans.toolName, json.RawMessage(p.text)
			calls = []ollamaToolCall{c}
		default:
			text = p.text
		}
	}
	if e.generate {
		f.Response, f.Thinking = &text, thinking
	} else {
		f.Message = &ollamaMessage{Role: "assistant", Content: text, Thinking: thinking, ToolCalls: calls}
	}
	return f
}

func line(v any) []byte { return append(marshal(v), '\n') }

// ServerTimings are the durations the last frame of an Ollama answer reports for the plan: total
// the last chunk's offset, prompt evaluation (with a load of an eighth of it) the TTFT, evaluation
// the first to the last chunk.
func (p Plan) ServerTimings() (total, load, promptEval, eval time.Duration) {
	offsets := p.Offsets()
	first, last := offsets[0], offsets[len(offsets)-1]
	load = first / 8
	return last, load, first - load, last - first
}

func (e *ollamaEmitter) last(f ollamaFrame) ollamaFrame {
	total, load, promptEval, eval := e.plan.ServerTimings()
	f.Done, f.DoneReason = true, "stop"
	f.TotalDuration, f.LoadDuration = int64(total), int64(load)
	f.PromptEvalCount, f.PromptEvalDuration = e.ans.inputTokens, int64(promptEval)
	f.EvalCount, f.EvalDuration = e.ans.outputTokens(), int64(eval)
	return f
}

func (e *ollamaEmitter) start() [][]byte { return nil }

func (e *ollamaEmitter) chunk(i int) [][]byte {
	return [][]byte{line(e.frame(e.offsets[i], &e.ans.pieces[i], i))}
}

func (e *ollamaEmitter) finish() [][]byte {
	return [][]byte{line(e.last(e.frame(e.offsets[len(e.offsets)-1], nil, 0)))}
}

func (e *ollamaEmitter) body() []byte {
	f := e.last(e.frame(e.offsets[len(e.offsets)-1], nil, 0))
	text, thinking := e.ans.text(ContentText), e.ans.text(ContentReasoning)
	if e.generate {
		f.Response, f.Thinking = &text, thinking
		return marshal(f)
	}
	f.Message.Content, f.Message.Thinking = text, thinking
	for _, p := range e.ans.pieces {
		if p.kind == ContentToolCall {
			var c ollamaToolCall
			c.Function.Index = len(f.Message.ToolCalls)
			c.Function.Name, c.Function.Arguments = e.ans.toolName, json.RawMessage(p.text)
			f.Message.ToolCalls = append(f.Message.ToolCalls, c)
		}
	}
	return marshal(f)
}

// ollamaErrorJSON is Ollama's error body: a message, nothing else.
func ollamaErrorJSON(status int, msg string) []byte {
	if msg == "" {
		switch status {
		case 429, 503:
			msg = "server busy, please try again.  maximum pending requests exceeded"
		case 404:
			msg = "model not found, try pulling it first"
		default:
			msg = "an error was encountered while running the model"
		}
	}
	return marshal(struct {
		Error string `json:"error"`
	}{msg})
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/sse"
)

// ProviderBedrock is AWS Bedrock's gen_ai.provider.name.
const ProviderBedrock = "aws.bedrock"

// Bedrock's operations on a model, the last segment of their path.
const (
	bedrockConverse       = "converse"
	bedrockConverseStream = "converse-stream"
	bedrockInvoke         = "invoke"
	bedrockInvokeStream   = "invoke-with-response-stream"
)

// bedrockEndpoint reads ".../model/{modelId}/{operation}": the model id is
// percent-encoded by the SDKs (an ARN's slashes too), and may come decoded.
func bedrockEndpoint(path string) (Endpoint, bool) {
	i := strings.Index(path, "/model/")
	if i < 0 {
		return Endpoint{}, false
	}
	rest := path[i+len("/model/"):]
	slash := strings.LastIndexByte(rest, '/')
	if slash <= 0 {
		return Endpoint{}, false
	}
	e := Endpoint{Provider: ProviderBedrock, Model: rest[:slash]}
	switch rest[slash+1:] {
	case bedrockConverseStream:
		e.Shape, e.Stream = ShapeBedrockConverse, true
	case bedrockConverse:
		e.Shape = ShapeBedrockConverse
	case bedrockInvokeStream:
		e.Shape, e.Stream = ShapeBedrockInvoke, true
	case bedrockInvoke:
		e.Shape = ShapeBedrockInvoke
	default:
		return Endpoint{}, false
	}
	if model, err := url.PathUnescape(e.Model); err == nil {
		e.Model = model
	}
	return e, true
}

func (s Shape) bedrock() bool { return s == ShapeBedrockConverse || s == ShapeBedrockInvoke }

// converseEvent is the payload of a ConverseStream event (its type is the
// message's :event-type), and a whole Converse response too: its stopReason,
// usage and metrics are the same fields. Amazon Nova's native stream
// (InvokeModelWithResponseStream) sends the same events, each wrapped in an
// object named for its type.
type converseEvent struct {
	Delta *struct {
		Text    string `json:"text"`
		ToolUse *struct {
			Input string `json:"input"`
		} `json:"toolUse"`
		ReasoningContent *struct {
			Text string `json:"text"`
		} `json:"reasoningContent"`
	} `json:"delta"`
	StopReason string `json:"stopReason"`
	Usage      *struct {
		InputTokens           int64 `json:"inputTokens"`
		OutputTokens          int64 `json:"outputTokens"`
		CacheReadInputTokens  int64 `json:"cacheReadInputTokens"`
		CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
	} `json:"usage"`
	Metrics *struct {
		LatencyMs int64 `json:"latencyMs"`
	} `json:"metrics"`
}

func (c *converseEvent) meta(m *Meta) {
	if c.StopReason != "" {
		m.FinishReasons = append(m.FinishReasons, c.StopReason)
	}
	if u := c.Usage; u != nil {
		// Bedrock counts cache reads and writes apart from inputTokens.
		m.InputTokens, m.HasInputTokens = u.InputTokens+u.CacheReadInputTokens+u.CacheWriteInputTokens, true
		m.OutputTokens, m.HasOutputTokens = u.OutputTokens, true
	}
	if c.Metrics != nil && c.Metrics.LatencyMs > 0 {
		m.Server.Total = c.Metrics.LatencyMs * 1e6
	}
}

// classifyConverse classifies one ConverseStream event. Text, tool input
// and reasoning text deltas are chunks (a redacted reasoning block, a
// citation, a block's start are not); metadata, the last event, ends the
// stream, messageStop having said why.
func classifyConverse(typ string, data []byte, f *Frame) error {
	var c converseEvent
	if err := decode(data, &c); err != nil {
		return err
	}
	c.meta(&f.Meta)
	switch typ {
	case "metadata":
		f.Kind = KindDone
	case "contentBlockDelta":
		if d := c.Delta; d != nil {
			switch {
			case d.Text != "":
				f.content(semconv.ChunkKindText, d.Text)
			case d.ToolUse != nil && d.ToolUse.Input != "":
				f.content(semconv.ChunkKindToolCall, d.ToolUse.Input)
			case d.ReasoningContent != nil && d.ReasoningContent.Text != "":
				f.content(semconv.ChunkKindReasoning, d.ReasoningContent.Text)
			}
		}
	}
	return nil
}

// invocationMetrics is what Bedrock adds to the last native event of an
// InvokeModelWithResponseStream answer, whatever the model.
type invocationMetrics struct {
	InputTokenCount   *int64 `json:"inputTokenCount"`
	OutputTokenCount  *int64 `json:"outputTokenCount"`
	InvocationLatency int64  `json:"invocationLatency"`
}

// nativeEvent is what is read of a model's own event inside a chunk of
// InvokeModelWithResponseStream. The model family shows in its fields:
// Anthropic's Messages events have a type (and are classified as Messages
// events), Amazon Nova's are Converse events under their name, Meta Llama's
// carry a generation, Amazon Titan's an outputText, Mistral's outputs,
// Cohere Command's generations, Cohere Command R's a text of its own (with
// is_finished and, in its stream-end event, a finish_reason), DeepSeek-R1's
// choices with a text and a stop_reason.
type nativeEvent struct {
	Type string `json:"type"`
	// Object is OpenAI's: the gpt-oss models on Bedrock take and return
	// Chat Completions bodies, each streamed chunk a chat.completion.chunk.
	Object            string             `json:"object"`
	ContentBlockDelta json.RawMessage    `json:"contentBlockDelta"`
	MessageStop       json.RawMessage    `json:"messageStop"`
	Metadata          json.RawMessage    `json:"metadata"`
	Generation        string             `json:"generation"`
	StopReason        *string            `json:"stop_reason"`
	OutputText        string             `json:"outputText"`
	CompletionReason  *string            `json:"completionReason"`
	Outputs           []textPart         `json:"outputs"`
	Text              string             `json:"text"`
	FinishReason      *string            `json:"finish_reason"`
	Generations       []textPart         `json:"generations"`
	Choices           []textPart         `json:"choices"`
	InvocationMetrics *invocationMetrics `json:"amazon-bedrock-invocationMetrics"`
}

// textPart is one text of a text-generation model's event, with its stop
// reason: Mistral's outputs and DeepSeek-R1's choices name it stop_reason,
// Cohere Command's generations finish_reason.
type textPart struct {
	Text         string  `json:"text"`
	StopReason   *string `json:"stop_reason"`
	FinishReason *string `json:"finish_reason"`
}

// invokeChunk is the payload of a chunk event: the model's own event,
// base64-encoded (encoding/json decodes it).
type invokeChunk struct {
	Bytes []byte `json:"bytes"`
}

// classifyInvoke classifies one chunk of InvokeModelWithResponseStream by
// the model's own event in it. The event that carries Bedrock's invocation
// metrics is the last: it ends the stream unless it is content.
func classifyInvoke(typ string, data []byte, f *Frame) error {
	var c invokeChunk
	if err := decode(data, &c); err != nil || typ != "chunk" {
		return err
	}
	var n nativeEvent
	if err := decode(c.Bytes, &n); err != nil {
		return err
	}
	var err error
	switch {
	case n.Type != "":
		err = classifyMessages(c.Bytes, f)
	case n.Object == "chat.completion.chunk":
		err = classifyChat(c.Bytes, f)
	case n.ContentBlockDelta != nil:
		err = classifyConverse("contentBlockDelta", n.ContentBlockDelta, f)
	case n.MessageStop != nil:
		err = classifyConverse("messageStop", n.MessageStop, f)
	case n.Metadata != nil:
		err = classifyConverse("metadata", n.Metadata, f)
	default:
		n.classifyText(f)
	}
	if err != nil {
		return err
	}
	if m := n.InvocationMetrics; m != nil {
		m.meta(&f.Meta, n.Type != "")
		if f.Kind == KindMeta {
			f.Kind = KindDone
		}
	}
	return nil
}

// classifyText reads the text-generation models' events: one text field
// and a stop reason each.
func (n *nativeEvent) classifyText(f *Frame) {
	text, reason := n.Generation+n.OutputText+n.Text, n.StopReason
	if n.CompletionReason != nil {
		reason = n.CompletionReason
	}
	if n.FinishReason != nil {
		reason = n.FinishReason
	}
	for _, parts := range [][]textPart{n.Outputs, n.Generations, n.Choices} {
		for _, p := range parts {
			text += p.Text
			if r := cmp.Or(p.StopReason, p.FinishReason); r != nil {
				reason = r
			}
		}
	}
	if reason != nil && *reason != "" {
		f.Meta.FinishReasons = append(f.Meta.FinishReasons, *reason)
	}
	if text != "" {
		f.content(semconv.ChunkKindText, text)
	}
}

// meta records Bedrock's latency, and its token counts where the model's
// own event said none: Anthropic's counts (cache included) come in its
// message_start and message_delta, and are kept.
func (m *invocationMetrics) meta(meta *Meta, anthropic bool) {
	if m.InvocationLatency > 0 {
		meta.Server.Total = m.InvocationLatency * 1e6
	}
	if anthropic {
		return
	}
	if m.InputTokenCount != nil && !meta.HasInputTokens {
		meta.InputTokens, meta.HasInputTokens = *m.InputTokenCount, true
	}
	if m.OutputTokenCount != nil && !meta.HasOutputTokens {
		meta.OutputTokens, meta.HasOutputTokens = *m.OutputTokenCount, true
	}
}

// classifyBedrock classifies one message of a Bedrock event stream. An
// exception (or an error message) is an error whose error.type is its
// :exception-type (throttlingException, modelStreamErrorException...).
func classifyBedrock(shape Shape, ev *sse.Event) (Frame, error) {
	var f Frame
	switch string(ev.MessageType) {
	case "exception", "error":
		f.Kind = KindError
		f.Meta.ErrorType = string(ev.Type)
		var e struct {
			Message string `json:"message"`
		}
		if decode(ev.Data, &e) == nil {
			f.Meta.ErrorMessage = e.Message
		}
		if f.Meta.ErrorType == "" {
			f.Meta.ErrorType = ErrorTypeUnknown
		}
		return f, nil
	}
	var err error
	if shape == ShapeBedrockInvoke {
		err = classifyInvoke(string(ev.Type), ev.Data, &f)
	} else {
		err = classifyConverse(string(ev.Type), ev.Data, &f)
	}
	if err != nil {
		return Frame{Kind: KindMeta}, fmt.Errorf("%w: %s: %w", ErrMalformed, shape, err)
	}
	if f.Kind == KindError && f.Meta.ErrorType == "" {
		f.Meta.ErrorType = ErrorTypeUnknown
	}
	return f, nil
}

// BedrockErrorType returns the error type of a Bedrock error response: its
// X-Amzn-ErrorType header without the namespace after the colon
// ("ThrottlingException:http://internal.amazon.com/coral/..."), "" for
// another shape or none. Bedrock's error bodies hold only a message.
func BedrockErrorType(shape Shape, h http.Header) string {
	if !shape.bedrock() {
		return ""
	}
	typ, _, _ := strings.Cut(h.Get("X-Amzn-Errortype"), ":")
	return strings.TrimSpace(typ)
}

// parseBedrockResponse reads a whole Converse or InvokeModel answer; an
// InvokeModel answer is the model's own, Anthropic's a Messages response.
func parseBedrockResponse(shape Shape, body []byte, m *Meta) error {
	if shape == ShapeBedrockConverse {
		var c converseEvent
		if err := decode(body, &c); err != nil {
			return err
		}
		c.meta(m)
		return nil
	}
	var n nativeEvent
	if err := decode(body, &n); err != nil {
		return err
	}
	switch {
	case n.Type != "":
		one, err := ParseResponse(ShapeMessages, body)
		*m = one
		return err
	case n.Object == "chat.completion":
		one, err := ParseResponse(ShapeChatCompletions, body)
		*m = one
		return err
	}
	var f Frame
	n.classifyText(&f)
	*m = f.Meta
	return nil
}

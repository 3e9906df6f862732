// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// bedrockContentType is the media type of Bedrock's streams: AWS event stream messages.
const bedrockContentType = "application/vnd.amazon.eventstream"

// bedrockRequest holds what fakellm reads of a Converse request (the model is in the path).
type bedrockRequest struct {
	ToolConfig *struct {
		Tools []struct {
			ToolSpec *struct {
				Name string `json:"name"`
			} `json:"toolSpec"`
		} `json:"tools"`
	} `json:"toolConfig"`
	AdditionalModelRequestFields *struct {
		Thinking *struct {
			Type string `json:"type"`
		} `json:"thinking"`
	} `json:"additionalModelRequestFields"`
}

// bedrockWire reads a Bedrock request: the model id and the operation from the path, the tools
// and the reasoning asked for from the body (a Converse request, or InvokeModel's Anthropic
// Messages body).
func bedrockWire(r *http.Request, kind apiKind, body []byte) (wireRequest, error) {
	var wr wireRequest
	if kind == apiBedrockInvoke {
		if err := json.Unmarshal(body, &wr); err != nil {
			return wr, err
		}
	} else {
		var b bedrockRequest
		if err := json.Unmarshal(body, &b); err != nil {
			return wr, err
		}
		if b.ToolConfig != nil {
			for _, t := range b.ToolConfig.Tools {
				if t.ToolSpec != nil {
					wr.tools = append(wr.tools, t.ToolSpec.Name)
				}
			}
		}
		f := b.AdditionalModelRequestFields
		wr.thinks = f != nil && f.Thinking != nil && f.Thinking.Type == "enabled"
	}
	// ConverseStream and InvokeModelWithResponseStream: ".../converse-stream",
	// ".../invoke-with-response-stream".
	wr.Model, wr.Stream = r.PathValue("model"), strings.HasSuffix(r.URL.Path, "-stream")
	return wr, nil
}

// bedrockMessage frames one event with the SDK's event stream encoder, with the headers and the
// padding field ("p", its length varying with the payload's) that Bedrock sends.
func bedrockMessage(eventType string, payload map[string]any) []byte {
	payload["p"] = base62[:1+len(marshal(payload))%40]
	var h eventstream.Headers
	h.Set(":event-type", eventstream.StringValue(eventType))
	h.Set(":content-type", eventstream.StringValue("application/json"))
	h.Set(":message-type", eventstream.StringValue("event"))
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, eventstream.Message{Headers: h, Payload: marshal(payload)}); err != nil {
		// Writing a small message to a bytes.Buffer does not fail.
		panic("fakellm: cannot encode an event stream message: " + err.Error())
	}
	return b.Bytes()
}

// BedrockLatencyMs is what Bedrock reports as its own latency of an answer with this plan
// (latencyMs, invocationLatency): the last chunk's offset, in whole milliseconds.
func (p Plan) BedrockLatencyMs() int64 {
	offsets := p.Offsets()
	return offsets[len(offsets)-1].Milliseconds()
}

// converseEmitter renders ConverseStream's events (and Converse's whole answer): one content
// block per piece kind, reasoning as reasoningContent deltas, a tool call as a toolUse block.
type converseEmitter struct {
	ans   *answer
	plan  Plan
	block int
}

func (e *converseEmitter) stopReason() string {
	if e.ans.count(ContentToolCall) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

func (e *converseEmitter) usage() map[string]any {
	out := e.ans.outputTokens()
	return map[string]any{"inputTokens": e.ans.inputTokens, "outputTokens": out, "totalTokens": e.ans.inputTokens + out}
}

func (e *converseEmitter) blockStart(kind string) [][]byte {
	if kind != ContentToolCall {
		return nil
	}
	start := map[string]any{"toolUse": map[string]any{"toolUseId": e.ans.toolCallID, "name": e.ans.toolName}}
	return [][]byte{bedrockMessage("contentBlockStart", map[string]any{"contentBlockIndex": e.block, "start": start})}
}

func (e *converseEmitter) blockStop(kind string) [][]byte {
	var out [][]byte
	if kind == ContentReasoning {
		sig := map[string]any{"reasoningContent": map[string]any{"signature": e.ans.signature}}
		out = append(out, bedrockMessage("contentBlockDelta", map[string]any{"contentBlockIndex": e.block, "delta": sig}))
	}
	return append(out, bedrockMessage("contentBlockStop", map[string]any{"contentBlockIndex": e.block}))
}

func (e *converseEmitter) start() [][]byte {
	out := [][]byte{bedrockMessage("messageStart", map[string]any{"role": "assistant"})}
	return append(out, e.blockStart(e.ans.pieces[0].kind)...)
}

func (e *converseEmitter) chunk(i int) [][]byte {
	p := e.ans.pieces[i]
	var out [][]byte
	if i > 0 && e.ans.pieces[i-1].kind != p.kind {
		out = append(out, e.blockStop(e.ans.pieces[i-1].kind)...)
		e.block++
		out = append(out, e.blockStart(p.kind)...)
	}
	var delta map[string]any
	switch p.kind {
	case ContentReasoning:
		delta = map[string]any{"reasoningContent": map[string]any{"text": p.text}}
	case ContentToolCall:
		delta = map[string]any{"toolUse": map[string]any{"input": p.text}}
	default:
		delta = map[string]any{"text": p.text}
	}
	return append(out, bedrockMessage("contentBlockDelta", map[string]any{"contentBlockIndex": e.block, "delta": delta}))
}

func (e *converseEmitter) finish() [][]byte {
	out := e.blockStop(e.ans.pieces[len(e.ans.pieces)-1].kind)
	out = append(out, bedrockMessage("messageStop", map[string]any{"stopReason": e.stopReason()}))
	metrics := map[string]any{"latencyMs": e.plan.BedrockLatencyMs()}
	return append(out, bedrockMessage("metadata", map[string]any{"usage": e.usage(), "metrics": metrics}))
}

func (e *converseEmitter) body() []byte {
	var content []any
	if t := e.ans.text(ContentReasoning); t != "" {
		content = append(content, map[string]any{"reasoningContent": map[string]any{"reasoningText": map[string]any{"text": t, "signature": e.ans.signature}}})
	}
	if e.ans.count(ContentToolCall) > 0 {
		content = append(content, map[string]any{"toolUse": map[string]any{"toolUseId": e.ans.toolCallID, "name": e.ans.toolName, "input": json.RawMessage(e.ans.arguments())}})
	}
	if t := e.ans.text(ContentText); t != "" {
		content = append(content, map[string]any{"text": t})
	}
	return marshal(map[string]any{
		"output":     map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
		"stopReason": e.stopReason(),
		"usage":      e.usage(),
		"metrics":    map[string]any{"latencyMs": e.plan.BedrockLatencyMs()},
	})
}

// invokeEmitter renders InvokeModelWithResponseStream for an Anthropic model: Anthropic's Messages
// events, each base64 in a chunk event, without Anthropic's pings (Bedrock sends none), the last
// carrying Bedrock's invocation metrics.
type invokeEmitter struct {
	messages messagesEmitter
	plan     Plan
}

// chunks wraps the data of Anthropic SSE frames into chunk events.
func (e *invokeEmitter) chunks(frames [][]byte) [][]byte {
	var out [][]byte
	for _, f := range frames {
		if isKeepalive(f) {
			continue
		}
		_, data, _ := bytes.Cut(f, []byte("\ndata: "))
		data = bytes.TrimSuffix(data, []byte("\n\n"))
		if bytes.Contains(data, []byte(`"type":"message_stop"`)) {
			offsets := e.plan.Offsets()
			data = marshal(map[string]any{"type": "message_stop", "amazon-bedrock-invocationMetrics": map[string]any{
				"inputTokenCount":   e.messages.ans.inputTokens,
				"outputTokenCount":  e.messages.ans.outputTokens(),
				"invocationLatency": e.plan.BedrockLatencyMs(),
				"firstByteLatency":  offsets[0].Milliseconds(),
			}})
		}
		// encoding/json writes a []byte as base64, as Bedrock sends the model's event.
		out = append(out, bedrockMessage("chunk", map[string]any{"bytes": data}))
	}
	return out
}

func (e *invokeEmitter) start() [][]byte      { return e.chunks(e.messages.start()) }
func (e *invokeEmitter) chunk(i int) [][]byte { return e.chunks(e.messages.chunk(i)) }
func (e *invokeEmitter) finish() [][]byte     { return e.chunks(e.messages.finish()) }
func (e *invokeEmitter) body() []byte         { return e.messages.body() }

// bedrockErrorJSON is Bedrock's error body; its type is in the X-Amzn-ErrorType header.
func bedrockErrorJSON(h http.Header, status int, msg string) []byte {
	typ, def := "InternalServerException", "The server encountered an internal error."
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		typ, def = "ValidationException", "Malformed input request, please reformat your input and try again."
	case http.StatusForbidden, http.StatusUnauthorized:
		typ, def = "AccessDeniedException", "You don't have access to the model with the specified model ID."
	case http.StatusNotFound:
		typ, def = "ResourceNotFoundException", "The requested resource could not be found."
	case http.StatusRequestTimeout:
		typ, def = "ModelTimeoutException", "The request took too long to process."
	case http.StatusTooManyRequests:
		typ, def = "ThrottlingException", "Too many requests, please wait before trying again."
	case http.StatusServiceUnavailable:
		typ, def = "ServiceUnavailableException", "The service is temporarily unable to handle the request."
	}
	if msg == "" {
		msg = def
	}
	h.Set("X-Amzn-Errortype", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	return marshal(struct {
		Message string `json:"message"`
	}{msg})
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"encoding/json"
	"net/http"

	"github.com/streamstall/streamstall/internal/sse"
)

// What a proxy that ends a call itself tells the client, in the provider's
// own error format for the call's API shape, so that the official SDKs raise
// their API error type on it instead of a bare connection error or a JSON
// decoding failure. Code is a low-cardinality identifier (ttft_timeout,
// stall_timeout, shutdown); Message is for humans and must not quote the
// request.

// openAIError is the error object of OpenAI's APIs (and their compatibles).
type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// anthropicError is the body of Anthropic's errors, in an HTTP body and in an
// `event: error` frame alike.
type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// anthropicErrorType is Anthropic's error type for a status the proxy
// answers itself: 504 is its timeout_error, 503 its overloaded_error (the
// service cannot take the call now), anything else an api_error.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case http.StatusServiceUnavailable:
		return "overloaded_error"
	}
	return "api_error"
}

// openAIErrorType is OpenAI's error type for a status the proxy answers
// itself: every one of them (504, 503) is on the server's side.
const openAIErrorType = "server_error"

// HasErrorFrame reports whether the shape has an error format of its own,
// in a stream and in a body: every shape a proxy may end a stream of.
func HasErrorFrame(s Shape) bool {
	switch s {
	case ShapeChatCompletions, ShapeCompletions, ShapeResponses, ShapeMessages,
		ShapeGemini, ShapeOllamaChat, ShapeOllamaGenerate, ShapeBedrockConverse, ShapeBedrockInvoke:
		return true
	}
	return false
}

// ErrorFrame returns the bytes that end the stream b has followed with an
// error, in the shape's format and the stream's framing: first what closes
// the open line, event or element (see Boundary), then
//   - Chat Completions, Completions: a `data:` frame holding an `error`
//     object, what the OpenAI SDKs raise on;
//   - Responses: an `error` event with its code, message, param and the
//     next sequence_number, also carrying the `error` object so that the
//     SDKs that only look for that key raise too;
//   - Anthropic Messages: an `event: error` frame;
//   - Gemini: Google's error object, as a `data:` frame, or as the last
//     element of the JSON array, closing it;
//   - Ollama: an `{"error":"..."}` line;
//   - AWS Bedrock: an event stream exception message (BedrockErrorFrame).
//
// status is the HTTP status the error stands for (504 for a timeout, 503
// for a shutdown): Anthropic's error type and Google's status follow from
// it. A shape without a format of its own gets the Chat Completions frame.
// The bytes are never empty, but for a binary event stream left in the
// middle of a message: nothing can close that, and ErrorFrame is nil.
func (b *Boundary) ErrorFrame(status int, code, message string) []byte {
	if b.framing == sse.FramingEventStream {
		if !b.msg.atBoundary() {
			return nil
		}
		return BedrockErrorFrame(status, code, message)
	}
	obj := errorObject(b.shape, status, code, message, b.seq.Next())
	var out []byte
	switch b.framing {
	case sse.FramingNDJSON:
		out = append(out, b.closeLine()...)
		out = append(out, obj...)
		return append(out, '\n')
	case sse.FramingJSONArray:
		return b.arr.closeWith(obj)
	}
	out = append(out, b.closeSSE()...)
	if b.shape == ShapeMessages || b.shape == ShapeResponses {
		out = append(out, "event: error\n"...)
	}
	out = append(out, "data: "...)
	out = append(out, obj...)
	return append(out, "\n\n"...)
}

// errorObject is the JSON of the shape's error, as a stream carries it.
func errorObject(shape Shape, status int, code, message string, seq int64) []byte {
	switch shape {
	case ShapeMessages:
		return marshal(newAnthropicError(status, message))
	case ShapeResponses:
		return marshal(responsesErrorEvent{
			Type: "error", Code: code, Message: message, SequenceNumber: seq, Error: newOpenAIError(code, message),
		})
	case ShapeGemini:
		return marshal(newGoogleErrorBody(status, message))
	case ShapeOllamaChat, ShapeOllamaGenerate:
		return marshal(ollamaErrorBody{Error: message})
	}
	return marshal(openAIErrorBody{newOpenAIError(code, message)})
}

// ErrorBody returns the JSON body of an error response with the given HTTP
// status, in the shape's format: Anthropic's {"type":"error","error":{...}},
// Google's {"error":{"code":..,"message":..,"status":..}}, Ollama's
// {"error":"..."}, OpenAI's {"error":{...}} for the other shapes.
func ErrorBody(shape Shape, status int, code, message string) []byte {
	switch shape {
	case ShapeMessages:
		return marshal(newAnthropicError(status, message))
	case ShapeGemini:
		return marshal(newGoogleErrorBody(status, message))
	case ShapeOllamaChat, ShapeOllamaGenerate:
		return marshal(ollamaErrorBody{Error: message})
	case ShapeBedrockConverse, ShapeBedrockInvoke:
		// Bedrock's error body is its message; the type is a header.
		return marshal(bedrockException{Message: message})
	}
	return marshal(openAIErrorBody{newOpenAIError(code, message)})
}

// ErrorHeader is the header that names an error body's type, for the APIs
// that name it in a header rather than the body (Bedrock's
// X-Amzn-ErrorType, which the AWS SDKs raise by); "" for the others.
func ErrorHeader(shape Shape, status int) (name, value string) {
	if shape != ShapeBedrockConverse && shape != ShapeBedrockInvoke {
		return "", ""
	}
	if status == http.StatusServiceUnavailable {
		return "X-Amzn-Errortype", "ServiceUnavailableException"
	}
	return "X-Amzn-Errortype", "ModelTimeoutException"
}

type openAIErrorBody struct {
	Error openAIError `json:"error"`
}

// responsesErrorEvent is the Responses API's `error` event.
type responsesErrorEvent struct {
	Type           string      `json:"type"`
	Code           string      `json:"code"`
	Message        string      `json:"message"`
	Param          *string     `json:"param"`
	SequenceNumber int64       `json:"sequence_number"`
	Error          openAIError `json:"error"`
}

// googleErrorBody is Google's error (google.rpc.Status in its JSON
// mapping): code is the HTTP status, status its canonical name.
type googleErrorBody struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

func newGoogleErrorBody(status int, message string) googleErrorBody {
	var e googleErrorBody
	e.Error.Code, e.Error.Message, e.Error.Status = status, message, googleStatus(status)
	return e
}

// googleStatus is the canonical code (google.rpc.Code) Google's APIs
// answer an HTTP status with.
func googleStatus(status int) string {
	switch status {
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	}
	return "INTERNAL"
}

// ollamaErrorBody is Ollama's error: a message and nothing else.
type ollamaErrorBody struct {
	Error string `json:"error"`
}

func newOpenAIError(code, message string) openAIError {
	return openAIError{Message: message, Type: openAIErrorType, Code: code}
}

func newAnthropicError(status int, message string) anthropicError {
	e := anthropicError{Type: "error"}
	e.Error.Type, e.Error.Message = anthropicErrorType(status), message
	return e
}

func marshal(v any) []byte {
	// The values are structs of strings and numbers: marshalling cannot fail.
	data, _ := json.Marshal(v)
	return data
}

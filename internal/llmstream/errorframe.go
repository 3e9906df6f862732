// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"encoding/json"
	"net/http"
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

// ErrorFrame returns the SSE bytes that end a stream of the given shape with
// an error: for Chat Completions and Completions a `data:` frame holding an
// `error` object (what the OpenAI SDKs raise on); for the Responses API an
// `error` event, which also carries the `error` object so that the SDKs that
// only look for that key raise too; for Anthropic Messages an `event: error`
// frame. The frame starts with a line break when lineOpen says the bytes
// already written end in the middle of a line, so that it is read as a frame
// of its own. status is the HTTP status the error stands for (504 for a
// timeout, 503 for a shutdown): Anthropic's error type follows from it. A
// shape without a format of its own gets the Chat Completions frame.
func ErrorFrame(shape Shape, status int, code, message string, lineOpen bool) []byte {
	var b []byte
	if lineOpen {
		b = append(b, "\n\n"...)
	}
	switch shape {
	case ShapeMessages:
		b = append(b, "event: error\ndata: "...)
		b = appendJSON(b, newAnthropicError(status, message))
	case ShapeResponses:
		b = append(b, "event: error\ndata: "...)
		b = appendJSON(b, struct {
			Type    string      `json:"type"`
			Code    string      `json:"code"`
			Message string      `json:"message"`
			Param   *string     `json:"param"`
			Error   openAIError `json:"error"`
		}{Type: "error", Code: code, Message: message, Error: newOpenAIError(code, message)})
	default:
		b = append(b, "data: "...)
		b = appendJSON(b, struct {
			Error openAIError `json:"error"`
		}{newOpenAIError(code, message)})
	}
	return append(b, "\n\n"...)
}

// ErrorBody returns the JSON body of an error response with the given HTTP
// status, in the shape's format: Anthropic's {"type":"error","error":{...}},
// OpenAI's {"error":{...}} for the other shapes.
func ErrorBody(shape Shape, status int, code, message string) []byte {
	if shape == ShapeMessages {
		return appendJSON(nil, newAnthropicError(status, message))
	}
	return appendJSON(nil, struct {
		Error openAIError `json:"error"`
	}{newOpenAIError(code, message)})
}

func newOpenAIError(code, message string) openAIError {
	return openAIError{Message: message, Type: openAIErrorType, Code: code}
}

func newAnthropicError(status int, message string) anthropicError {
	e := anthropicError{Type: "error"}
	e.Error.Type, e.Error.Message = anthropicErrorType(status), message
	return e
}

func appendJSON(b []byte, v any) []byte {
	// The values are structs of strings: marshalling cannot fail.
	data, _ := json.Marshal(v)
	return append(b, data...)
}

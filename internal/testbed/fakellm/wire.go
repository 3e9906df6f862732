// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

var (
	sseDone       = []byte("data: [DONE]\n\n")
	sseKeepalive  = []byte(": keepalive\n\n")
	anthropicPing = []byte("event: ping\ndata: {\"type\": \"ping\"}\n\n") // byte for byte what Anthropic sends
)

func isKeepalive(f []byte) bool { return bytes.Equal(f, sseKeepalive) || bytes.Equal(f, anthropicPing) }

// marshal encodes v like the providers do: compact, without HTML escaping.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Every value passed here is built from plain structs and strings.
		panic(fmt.Sprintf("fakellm: cannot encode %T: %v", v, err))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func dataFrame(v any) []byte {
	return fmt.Appendf(nil, "data: %s\n\n", marshal(v))
}

func eventFrame(event string, v any) []byte {
	return fmt.Appendf(nil, "event: %s\ndata: %s\n\n", event, marshal(v))
}

type openAIError struct {
	Error openAIErrorBody `json:"error"`
}

type openAIErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func openAIErrorJSON(status int, msg string, retryAfter time.Duration) []byte {
	e := openAIErrorBody{Message: msg, Type: "invalid_request_error"}
	code := func(c string) *string { return &c }
	switch {
	case status == http.StatusTooManyRequests:
		e.Type, e.Code = "requests", code("rate_limit_exceeded")
		if msg == "" {
			e.Message = fmt.Sprintf("Rate limit reached for requests. Please try again in %s.", retryAfter)
		}
	case status == http.StatusUnauthorized:
		e.Code = code("invalid_api_key")
	case status == http.StatusNotFound:
		e.Code = code("model_not_found")
	case status >= 500:
		e.Type = "server_error"
		if msg == "" {
			e.Message = "The server had an error while processing your request. Sorry about that!"
		}
	}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return marshal(openAIError{Error: e})
}

type anthropicError struct {
	Type      string             `json:"type"`
	Error     anthropicErrorBody `json:"error"`
	RequestID string             `json:"request_id,omitempty"`
}

type anthropicErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func anthropicErrorJSON(status int, msg, requestID string) []byte {
	typ, def := "api_error", "Internal server error"
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		typ, def = "invalid_request_error", "invalid request"
		if status == http.StatusRequestEntityTooLarge {
			typ = "request_too_large"
		}
	case http.StatusUnauthorized:
		typ, def = "authentication_error", "invalid x-api-key"
	case http.StatusForbidden:
		typ, def = "permission_error", "permission denied"
	case http.StatusNotFound:
		typ, def = "not_found_error", "not found"
	case http.StatusTooManyRequests:
		typ, def = "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"
	case 529:
		typ, def = "overloaded_error", "Overloaded"
	}
	if msg == "" {
		msg = def
	}
	return marshal(anthropicError{Type: "error", Error: anthropicErrorBody{Type: typ, Message: msg}, RequestID: requestID})
}

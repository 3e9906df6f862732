// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// geminiRequest holds what fakellm reads of a GenerateContentRequest (the model is in the path).
type geminiRequest struct {
	Tools []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig *struct {
		ThinkingConfig *struct {
			IncludeThoughts bool `json:"includeThoughts"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
}

// geminiPath reads the model and the method of a Gemini request from the path's last segment
// ("{model}:streamGenerateContent").
func geminiPath(r *http.Request) (wireRequest, error) {
	model, method, _ := strings.Cut(r.PathValue("call"), ":")
	wr := wireRequest{Model: model}
	switch method {
	case "streamGenerateContent":
		wr.Stream = true
	case "generateContent":
	default:
		return wr, fmt.Errorf("fakellm: unknown method %q: want generateContent or streamGenerateContent", method)
	}
	return wr, nil
}

// geminiWire reads the tools and the thinking config of a Gemini request body.
func geminiWire(r *http.Request, body []byte, wr *wireRequest) error {
	var g geminiRequest
	if err := json.Unmarshal(body, &g); err != nil {
		return err
	}
	for _, t := range g.Tools {
		for _, f := range t.FunctionDeclarations {
			wr.tools = append(wr.tools, f.Name)
		}
	}
	wr.thinks = g.GenerationConfig != nil && g.GenerationConfig.ThinkingConfig != nil && g.GenerationConfig.ThinkingConfig.IncludeThoughts
	// Without alt=sse, Google streams one JSON array element by element.
	wr.jsonArray = r.URL.Query().Get("alt") != "sse"
	return nil
}

type geminiPart struct {
	Text         *string         `json:"text,omitempty"`
	Thought      bool            `json:"thought,omitempty"`
	FunctionCall *geminiFunction `json:"functionCall,omitempty"`
}

type geminiFunction struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type geminiCandidate struct {
	Content struct {
		Parts []geminiPart `json:"parts"`
		Role  string       `json:"role"`
	} `json:"content"`
	FinishReason string `json:"finishReason,omitempty"`
	Index        int    `json:"index"`
}

type geminiUsage struct {
	PromptTokenCount     int `json:"promptTokenCount"`
	CandidatesTokenCount int `json:"candidatesTokenCount,omitempty"`
	TotalTokenCount      int `json:"totalTokenCount"`
	ThoughtsTokenCount   int `json:"thoughtsTokenCount,omitempty"`
}

type geminiResponse struct {
	Candidates    []geminiCandidate `json:"candidates"`
	UsageMetadata geminiUsage       `json:"usageMetadata"`
	ModelVersion  string            `json:"modelVersion"`
	ResponseID    string            `json:"responseId"`
}

// geminiEmitter renders Gemini's GenerateContentResponse frames, as Server-Sent Events that end
// with CRLF CRLF (alt=sse) or as the elements of one JSON array. Gemini has no terminal frame:
// the last one carries the finish reason and the whole usage. It sends function calls whole, so
// each tool-call chunk is one call.
type geminiEmitter struct {
	ans       *answer
	model     string
	jsonArray bool
	elements  int // JSON array elements written so far
}

func (e *geminiEmitter) response(parts []geminiPart, finish string, usage geminiUsage) geminiResponse {
	c := geminiCandidate{FinishReason: finish}
	c.Content.Parts, c.Content.Role = parts, "model"
	return geminiResponse{Candidates: []geminiCandidate{c}, UsageMetadata: usage, ModelVersion: e.model, ResponseID: e.ans.id}
}

func (e *geminiEmitter) frame(v geminiResponse) []byte {
	if !e.jsonArray {
		return fmt.Appendf(nil, "data: %s\r\n\r\n", marshal(v))
	}
	sep := ",\r\n"
	if e.elements == 0 {
		sep = "["
	}
	e.elements++
	return fmt.Appendf(nil, "%s%s", sep, marshal(v))
}

func (e *geminiEmitter) promptUsage() geminiUsage {
	return geminiUsage{PromptTokenCount: e.ans.inputTokens, TotalTokenCount: e.ans.inputTokens}
}

func (e *geminiEmitter) usage() geminiUsage {
	u := geminiUsage{PromptTokenCount: e.ans.inputTokens, ThoughtsTokenCount: e.ans.count(ContentReasoning)}
	u.CandidatesTokenCount = e.ans.outputTokens() - u.ThoughtsTokenCount
	u.TotalTokenCount = u.PromptTokenCount + e.ans.outputTokens()
	return u
}

func (e *geminiEmitter) finishReason() string { return "STOP" }

func (e *geminiEmitter) part(p piece) geminiPart {
	switch p.kind {
	case ContentReasoning:
		return geminiPart{Text: &p.text, Thought: true}
	case ContentToolCall:
		return geminiPart{FunctionCall: &geminiFunction{Name: e.ans.toolName, Args: json.RawMessage(p.text)}}
	}
	return geminiPart{Text: &p.text}
}

func (e *geminiEmitter) start() [][]byte { return nil }

func (e *geminiEmitter) chunk(i int) [][]byte {
	return [][]byte{e.frame(e.response([]geminiPart{e.part(e.ans.pieces[i])}, "", e.promptUsage()))}
}

func (e *geminiEmitter) finish() [][]byte {
	// Like Google's, the last frame carries an empty text part.
	empty := ""
	last := e.frame(e.response([]geminiPart{{Text: &empty}}, e.finishReason(), e.usage()))
	if e.jsonArray {
		last = append(last, ']')
	}
	return [][]byte{last}
}

func (e *geminiEmitter) body() []byte {
	var parts []geminiPart
	if t := e.ans.text(ContentReasoning); t != "" {
		parts = append(parts, geminiPart{Text: &t, Thought: true})
	}
	for _, p := range e.ans.pieces {
		if p.kind == ContentToolCall {
			parts = append(parts, e.part(p))
		}
	}
	if t := e.ans.text(ContentText); t != "" {
		parts = append(parts, geminiPart{Text: &t})
	}
	return marshal(e.response(parts, e.finishReason(), e.usage()))
}

type googleError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

// googleErrorJSON is Google's error body: code is the HTTP status, status its canonical name.
func googleErrorJSON(status int, msg string) []byte {
	var e googleError
	e.Error.Code = status
	name, def := "INTERNAL", "Internal error encountered."
	switch {
	case status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge:
		name, def = "INVALID_ARGUMENT", "Request contains an invalid argument."
	case status == http.StatusUnauthorized:
		name, def = "UNAUTHENTICATED", "API key not valid. Please pass a valid API key."
	case status == http.StatusForbidden:
		name, def = "PERMISSION_DENIED", "The caller does not have permission"
	case status == http.StatusNotFound:
		name, def = "NOT_FOUND", "Requested entity was not found."
	case status == http.StatusTooManyRequests:
		name, def = "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."
	case status == http.StatusServiceUnavailable:
		name, def = "UNAVAILABLE", "The model is overloaded. Please try again later."
	case status == http.StatusGatewayTimeout:
		name, def = "DEADLINE_EXCEEDED", "Deadline expired before operation could complete."
	case status < 500:
		name, def = "FAILED_PRECONDITION", http.StatusText(status)
	}
	if msg == "" {
		msg = def
	}
	e.Error.Message, e.Error.Status = msg, name
	return marshal(e)
}

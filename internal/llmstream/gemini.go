// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/streamstall/streamstall/internal/semconv"
)

// geminiResponse is a GenerateContentResponse: each frame of a Gemini stream
// is one, and so is a whole answer. Google AI Studio and Vertex AI send the
// same fields.
type geminiResponse struct {
	Candidates []struct {
		Content *struct {
			Parts []geminiPart `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *struct {
		PromptTokenCount        int64 `json:"promptTokenCount"`
		ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
		CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
		ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string       `json:"modelVersion"`
	ResponseID   string       `json:"responseId"`
	Error        *googleError `json:"error"`
}

type geminiPart struct {
	Text         string `json:"text"`
	Thought      bool   `json:"thought"`
	FunctionCall *struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
		// PartialArgs are the fragments of a call's arguments that Vertex
		// AI streams (functionCallingConfig.streamFunctionCallArguments):
		// the parts after the first carry them alone, without a name.
		PartialArgs json.RawMessage `json:"partialArgs"`
	} `json:"functionCall"`
	// ExecutableCode is code the model wrote for the code execution tool:
	// generated like a tool call's arguments.
	ExecutableCode *struct {
		Code string `json:"code"`
	} `json:"executableCode"`
}

// kind returns the chunk kind of a part and its delta, "" for a part that
// carries no generated content (a thought signature alone, a tool's result).
func (p *geminiPart) kind() (string, string) {
	switch {
	case p.FunctionCall != nil && (p.FunctionCall.Name != "" || len(p.FunctionCall.Args) > 0):
		return semconv.ChunkKindToolCall, string(p.FunctionCall.Args)
	case p.FunctionCall != nil && nonEmptyArray(p.FunctionCall.PartialArgs):
		return semconv.ChunkKindToolCall, string(p.FunctionCall.PartialArgs)
	case p.ExecutableCode != nil && p.ExecutableCode.Code != "":
		return semconv.ChunkKindToolCall, p.ExecutableCode.Code
	case p.Text == "":
		return "", ""
	case p.Thought:
		return semconv.ChunkKindReasoning, p.Text
	}
	return semconv.ChunkKindText, p.Text
}

// nonEmptyArray reports whether raw is a JSON array with an element.
func nonEmptyArray(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) >= 2 && raw[0] == '[' && raw[len(raw)-1] == ']' && len(bytes.TrimSpace(raw[1:len(raw)-1])) > 0
}

// googleError is Google's error object: code is the HTTP status, status the
// canonical error code name (google.rpc.Code).
type googleError struct {
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
	Status  string          `json:"status"`
}

func (e *googleError) meta(m *Meta) {
	m.ErrorType = e.Status
	if m.ErrorType == "" {
		m.ErrorType = rawString(e.Code)
	}
	m.ErrorMessage = e.Message
}

// finishReasonUnspecified is the zero value of Gemini's FinishReason enum:
// no reason at all.
const finishReasonUnspecified = "FINISH_REASON_UNSPECIFIED"

func (r *geminiResponse) meta(m *Meta) {
	m.ResponseID, m.ResponseModel = r.ResponseID, r.ModelVersion
	if u := r.UsageMetadata; u != nil {
		// Cached tokens are part of promptTokenCount already; thoughts are
		// counted apart from the candidates, and are output all the same.
		m.InputTokens, m.HasInputTokens = u.PromptTokenCount+u.ToolUsePromptTokenCount, true
		m.OutputTokens, m.HasOutputTokens = u.CandidatesTokenCount+u.ThoughtsTokenCount, true
	}
	for i := range r.Candidates {
		if fr := r.Candidates[i].FinishReason; fr != "" && fr != finishReasonUnspecified {
			m.FinishReasons = append(m.FinishReasons, fr)
		}
	}
	// A blocked prompt gets no candidate at all: the block reason is how the
	// answer ended.
	if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" && len(r.Candidates) == 0 {
		m.FinishReasons = append(m.FinishReasons, r.PromptFeedback.BlockReason)
	}
	if r.Error != nil {
		r.Error.meta(m)
	}
}

// classifyGemini classifies one GenerateContentResponse frame. Gemini sends
// no terminal frame: the stream ends after the frame with a finish reason.
// A frame is content when the first candidate with a content part has one:
// an answer part (text, function call) makes it an answer chunk even beside
// a thought, since the answer has begun; its delta joins the parts of that
// kind.
func classifyGemini(data []byte, f *Frame) error {
	var r geminiResponse
	if err := decode(data, &r); err != nil {
		return err
	}
	r.meta(&f.Meta)
	if r.Error != nil {
		f.Kind = KindError
		return nil
	}
	for i := range r.Candidates {
		c := r.Candidates[i].Content
		if c == nil {
			continue
		}
		kind := ""
		for j := range c.Parts {
			switch k, _ := c.Parts[j].kind(); {
			case k == "":
			case kind == "" || kind == semconv.ChunkKindReasoning:
				kind = k
			}
		}
		if kind == "" {
			continue
		}
		var delta strings.Builder
		for j := range c.Parts {
			if k, d := c.Parts[j].kind(); k == kind {
				delta.WriteString(d)
			}
		}
		f.content(kind, delta.String())
		return nil
	}
	return nil
}

// parseGeminiResponse reads a whole answer: one GenerateContentResponse, or
// the JSON array of them that streamGenerateContent sends without alt=sse.
func parseGeminiResponse(body []byte, m *Meta) error {
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '[' {
		var r geminiResponse
		if err := decode(body, &r); err != nil {
			return err
		}
		r.meta(m)
		return nil
	}
	var all []geminiResponse
	if err := decode(body, &all); err != nil {
		return err
	}
	for i := range all {
		var one Meta
		all[i].meta(&one)
		m.Merge(&one)
	}
	return nil
}

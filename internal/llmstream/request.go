// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"cmp"
	"fmt"
)

// Request is what telemetry may know of a request body: the model and
// whether a stream was asked for. Prompts are never decoded.
type Request struct {
	Model  string
	Stream bool
}

// ParseRequest reads what the request body of a call to e adds to what its
// path says: the model (unless the path names it, as Gemini's does; an
// Azure deployment when the body names none) and
// whether a stream was asked for (Gemini's path says; Ollama streams unless
// the body says "stream": false; the others stream only when it says true).
func (e Endpoint) ParseRequest(body []byte) (Request, error) {
	var r struct {
		Model  string `json:"model"`
		Stream *bool  `json:"stream"`
	}
	out := Request{Model: e.Model, Stream: e.Stream}
	if e.Shape == ShapeGemini || e.Shape.bedrock() {
		// The body holds the prompt and nothing telemetry records.
		return out, nil
	}
	if err := decode(body, &r); err != nil {
		out.Model = cmp.Or(out.Model, e.Deployment)
		return out, fmt.Errorf("%w: request: %w", ErrMalformed, err)
	}
	out.Model = cmp.Or(out.Model, r.Model, e.Deployment)
	switch {
	case r.Stream != nil:
		out.Stream = *r.Stream
	case e.Shape == ShapeOllamaChat || e.Shape == ShapeOllamaGenerate:
		out.Stream = true
	}
	return out, nil
}

// ParseResponse reads the metadata of a whole (non-streaming) JSON response
// body, success or error.
func ParseResponse(shape Shape, body []byte) (Meta, error) {
	var m Meta
	var err error
	switch shape {
	case ShapeChatCompletions, ShapeCompletions:
		// A chat.completion object shares the chunk's id, model,
		// choices[].finish_reason, usage and error fields.
		var f Frame
		err = classifyChat(body, &f)
		m = f.Meta
	case ShapeResponses:
		var r responseObject
		if err = decode(body, &r); err == nil {
			r.meta(&m)
		}
	case ShapeMessages:
		var r struct {
			ID         string          `json:"id"`
			Model      string          `json:"model"`
			StopReason string          `json:"stop_reason"`
			Usage      *anthropicUsage `json:"usage"`
			Error      *apiError       `json:"error"`
		}
		if err = decode(body, &r); err == nil {
			m.ResponseID, m.ResponseModel = r.ID, r.Model
			if r.StopReason != "" {
				m.FinishReasons = []string{r.StopReason}
			}
			if r.Usage != nil {
				r.Usage.meta(&m)
			}
			if r.Error != nil {
				r.Error.meta(&m)
			}
		}
	case ShapeGemini:
		err = parseGeminiResponse(body, &m)
	case ShapeOllamaChat, ShapeOllamaGenerate:
		var r ollamaFrame
		if err = decode(body, &r); err == nil {
			r.meta(&m)
		}
	case ShapeBedrockConverse, ShapeBedrockInvoke:
		err = parseBedrockResponse(shape, body, &m)
	default:
		var r struct {
			Error *apiError `json:"error"`
		}
		if err = decode(body, &r); err == nil && r.Error != nil {
			r.Error.meta(&m)
		}
	}
	if err != nil {
		return Meta{}, fmt.Errorf("%w: %s response: %w", ErrMalformed, shape, err)
	}
	return m, nil
}

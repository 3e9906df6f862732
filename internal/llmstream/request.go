// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"bytes"
	"cmp"
	"encoding/json"
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
	out := Request{Model: e.Model, Stream: e.Stream}
	if e.Shape == ShapeGemini || e.Shape.bedrock() {
		// The body holds the prompt and nothing telemetry records.
		return out, nil
	}
	r, err := readRequestMembers(body)
	if err != nil {
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
		if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '[' {
			// Vertex AI's own refusals of a Claude call (quota, a project
			// not allowed) are Google's errors, often in an array.
			err = parseGeminiResponse(body, &m)
			break
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
				var g struct {
					Error googleError `json:"error"`
				}
				if decode(body, &g) == nil && g.Error.Status != "" {
					// Vertex AI's own error on a Claude call: named by its
					// status, as on the Gemini calls of the same provider.
					g.Error.meta(&m)
				}
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

// requestMembers are the members of a request body the proxy reads.
type requestMembers struct {
	Model  string
	Stream *bool
}

// readRequestMembers reads the top-level "model" and "stream" of a request
// body the way the upstreams do (Python's json and pydantic, JavaScript's
// JSON.parse, serde): by their exact names, the last of a repeated name
// winning. encoding/json would match "Model" or "STREAM" too, so that a
// client could have the proxy read one model or stream flag (its span, the
// guard's rule for the model, whether the call is guarded at all) and the
// upstream serve another. Each value is decoded as encoding/json decodes
// a field (a value of another type leaves the field as it was, a null
// stream unsets it); other members are skipped unread, and a body that is
// not JSON is an error.
func readRequestMembers(body []byte) (requestMembers, error) {
	var r requestMembers
	// Validated first, so that the walk below needs no error paths; both
	// read the body in place, copying nothing of it (a body may be as large
	// as max_request_body).
	if err := decode(body, new(struct{})); err != nil {
		return r, err
	}
	forEachMember(body, func(key string, value []byte) {
		var dst any
		switch key {
		case "model":
			dst = &r.Model
		case "stream":
			dst = &r.Stream
		default:
			return
		}
		_ = decode(value, dst) // a value of another type leaves the field
	})
	return r, nil
}

// forEachMember calls f with the name (unescaped) and the value of each
// member of the top-level object of data, a valid JSON text, in order;
// nothing when it is no object.
func forEachMember(data []byte, f func(key string, value []byte)) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(data, i)
		if i >= len(data) || data[i] == '}' {
			return
		}
		if data[i] == ',' {
			i = skipSpace(data, i+1)
		}
		end := stringEnd(data, i)
		raw := data[i:end]
		var key string
		if bytes.IndexByte(raw, '\\') < 0 {
			key = string(raw[1 : len(raw)-1])
		} else {
			_ = json.Unmarshal(raw, &key)
		}
		i = skipSpace(data, end)
		i = skipSpace(data, i+1) // the colon
		vend := valueEnd(data, i)
		f(key, data[i:vend])
		i = vend
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index just past the string that starts at data[i].
func stringEnd(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(data)
}

// valueEnd is the index just past the value that starts at data[i].
func valueEnd(data []byte, i int) int {
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				j = stringEnd(data, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(data)
	}
	j := i // a number or a literal
	for j < len(data) && !endsScalar(data[j]) {
		j++
	}
	return j
}

func endsScalar(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

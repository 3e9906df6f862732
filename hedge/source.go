// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/streamstall/streamstall/internal/hedgecore"
	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/sse"
)

// maxErrorBody bounds the bytes of an error answer kept in a StatusError.
const maxErrorBody = 512

// Endpoint configures an HTTP source.
type Endpoint struct {
	// Name identifies the source; empty: the host of BaseURL.
	Name string
	// BaseURL is the API root, e.g. https://api.openai.com/v1,
	// https://api.anthropic.com/v1, https://generativelanguage.googleapis.com/v1beta
	// (Gemini; on Vertex AI the publisher's root,
	// https://aiplatform.googleapis.com/v1/projects/{p}/locations/{l}/publishers/google,
	// with the access token in Header) or http://localhost:11434 (Ollama).
	BaseURL string
	// APIKey is sent as a bearer token (OpenAI), x-api-key (Anthropic) or
	// x-goog-api-key (Gemini); Ollama takes none.
	APIKey string
	Model  string
	// Provider overrides gen_ai.provider.name (e.g. "azure.ai.openai" for an
	// OpenAI-compatible endpoint of another vendor).
	Provider string
	// Client sends the requests; nil: http.DefaultClient.
	Client *http.Client
	// Header is added to every request.
	Header http.Header
	// ContinueFinalMessage asks an OpenAI-compatible server to continue the
	// final assistant message of a continuation attempt (vLLM's
	// continue_final_message and add_generation_prompt). Anthropic continues
	// a final assistant message natively.
	ContinueFinalMessage bool
}

// NewOpenAIChatSource returns a source for an OpenAI-compatible
// /chat/completions endpoint, streamed with usage.
func NewOpenAIChatSource(e Endpoint) Source {
	return newHTTPSource(e, llmstream.ShapeChatCompletions, "/chat/completions")
}

// NewAnthropicSource returns a source for Anthropic's /messages endpoint.
func NewAnthropicSource(e Endpoint) Source {
	return newHTTPSource(e, llmstream.ShapeMessages, "/messages")
}

// NewGeminiSource returns a source for Gemini's streamGenerateContent
// (alt=sse), on Google AI Studio or Vertex AI: the provider follows from
// BaseURL's path (gcp.gemini or gcp.vertex_ai). A stream ends, as Gemini's
// do, after its frame with a finish reason. A continuation's prefix is sent
// as a final model turn.
func NewGeminiSource(e Endpoint) Source {
	return newHTTPSource(e, llmstream.ShapeGemini, "/models/"+url.PathEscape(e.Model)+":streamGenerateContent?alt=sse")
}

// NewOllamaSource returns a source for Ollama's native /api/chat, streamed
// as NDJSON. Ollama continues a final assistant message natively.
func NewOllamaSource(e Endpoint) Source {
	return newHTTPSource(e, llmstream.ShapeOllamaChat, "/api/chat")
}

type httpSource struct {
	e       Endpoint
	shape   llmstream.Shape
	url     string
	framing sse.Framing
}

func newHTTPSource(e Endpoint, shape llmstream.Shape, path string) *httpSource {
	if e.Client == nil {
		e.Client = http.DefaultClient
	}
	base := strings.TrimSuffix(e.BaseURL, "/")
	if e.Name == "" {
		e.Name = strings.TrimPrefix(strings.TrimPrefix(base, "https://"), "http://")
	}
	s := &httpSource{e: e, shape: shape, url: base + path}
	if shape == llmstream.ShapeOllamaChat {
		s.framing = sse.FramingNDJSON
	}
	if s.e.Provider == "" {
		s.e.Provider = shape.Provider()
		if u, err := url.Parse(s.url); err == nil {
			// Gemini's path tells Vertex AI from Google AI Studio, the
			// host Azure OpenAI's v1 API from OpenAI's.
			s.e.Provider = llmstream.ParseEndpoint(u.Path).OnHost(u.Hostname()).Provider
		}
	}
	return s
}

func (s *httpSource) Name() string     { return s.e.Name }
func (s *httpSource) Provider() string { return s.e.Provider }
func (s *httpSource) Model() string    { return s.e.Model }

func (s *httpSource) Open(ctx context.Context, req *Request) (Stream, error) {
	body, err := s.encode(req)
	if err != nil {
		return nil, fmt.Errorf("hedge: %s: encode request: %w", s.e.Name, err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("hedge: %s: %w", s.e.Name, err)
	}
	for k, v := range s.e.Header {
		hr.Header[k] = v
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "text/event-stream")
	switch {
	case s.shape == llmstream.ShapeMessages:
		hr.Header.Set("anthropic-version", "2023-06-01")
		if s.e.APIKey != "" {
			hr.Header.Set("x-api-key", s.e.APIKey)
		}
	case s.shape == llmstream.ShapeOllamaChat:
		hr.Header.Set("Accept", "application/x-ndjson")
	case s.e.APIKey == "":
	case s.shape == llmstream.ShapeGemini:
		hr.Header.Set("x-goog-api-key", s.e.APIKey)
	default:
		hr.Header.Set("Authorization", "Bearer "+s.e.APIKey)
	}
	resp, err := s.e.Client.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("hedge: %s: %w", s.e.Name, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		_ = resp.Body.Close()
		wait, _ := hedgecore.RetryAfter(resp.Header, time.Now())
		return nil, &StatusError{Source: s.e.Name, StatusCode: resp.StatusCode, Body: string(msg), RetryAfter: wait}
	}
	r := sse.NewFramedReader(s.framing, resp.Body)
	r.Comments = true
	return &httpStream{src: s, body: resp.Body, r: r}, nil
}

type wireMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func (s *httpSource) encode(req *Request) ([]byte, error) {
	if s.shape == llmstream.ShapeGemini {
		return encodeGemini(req)
	}
	msgs := make([]wireMessage, 0, len(req.Messages)+2)
	if s.shape != llmstream.ShapeMessages && req.System != "" {
		msgs = append(msgs, wireMessage{Role: "system", Content: req.System})
	}
	for _, m := range req.Messages {
		msgs = append(msgs, wireMessage(m))
	}
	if req.Prefix != "" {
		prefix := req.Prefix
		if s.shape == llmstream.ShapeMessages {
			// Anthropic refuses a final assistant turn ending in whitespace.
			prefix = strings.TrimRight(prefix, " \t\r\n")
		}
		msgs = append(msgs, wireMessage{Role: "assistant", Content: prefix})
	}
	body := map[string]any{"model": s.e.Model, "messages": msgs, "stream": true}
	switch s.shape {
	case llmstream.ShapeOllamaChat:
		if req.MaxTokens > 0 {
			body["options"] = map[string]any{"num_predict": req.MaxTokens}
		}
	case llmstream.ShapeMessages:
		maxTokens := req.MaxTokens
		if maxTokens <= 0 {
			maxTokens = 4096 // required by the Messages API
		}
		body["max_tokens"] = maxTokens
		if req.System != "" {
			body["system"] = req.System
		}
	default:
		body["stream_options"] = map[string]any{"include_usage": true}
		if req.MaxTokens > 0 {
			body["max_tokens"] = req.MaxTokens
		}
		if req.Prefix != "" && s.e.ContinueFinalMessage {
			body["continue_final_message"] = true
			body["add_generation_prompt"] = false
		}
	}
	return json.Marshal(body)
}

type geminiText struct {
	Text string `json:"text"`
}

type geminiContent struct {
	Role  string       `json:"role,omitempty"`
	Parts []geminiText `json:"parts"`
}

// encodeGemini writes a GenerateContentRequest: the model is in the path.
func encodeGemini(req *Request) ([]byte, error) {
	contents := make([]geminiContent, 0, len(req.Messages)+1)
	for _, m := range req.Messages {
		role := m.Role
		if role == "assistant" {
			role = "model"
		}
		contents = append(contents, geminiContent{Role: role, Parts: []geminiText{{m.Content}}})
	}
	if req.Prefix != "" {
		contents = append(contents, geminiContent{Role: "model", Parts: []geminiText{{req.Prefix}}})
	}
	body := map[string]any{"contents": contents}
	if req.System != "" {
		body["systemInstruction"] = geminiContent{Parts: []geminiText{{req.System}}}
	}
	if req.MaxTokens > 0 {
		body["generationConfig"] = map[string]any{"maxOutputTokens": req.MaxTokens}
	}
	return json.Marshal(body)
}

// httpStream turns SSE frames into events with llmstream, the one definition
// of content (docs/contract.md section 3).
type httpStream struct {
	src   *httpSource
	body  io.ReadCloser
	r     *sse.Reader
	meta  llmstream.Meta
	ended bool
}

func (st *httpStream) Recv() (Event, error) {
	if st.ended {
		return Event{}, io.EOF
	}
	ev, err := st.r.Next()
	if errors.Is(err, io.EOF) && len(st.meta.FinishReasons) > 0 {
		// A clean end after a finish reason is a complete answer, as the
		// proxy counts it: Gemini sends no terminal frame at all.
		return st.done(), nil
	}
	if err != nil {
		return Event{}, err
	}
	f, _ := llmstream.Classify(st.src.shape, &ev) // a malformed frame is KindMeta
	first := st.meta.ResponseModel == ""
	st.meta.Merge(&f.Meta)
	out := Event{}
	if first {
		out.Model = st.meta.ResponseModel
	}
	switch f.Kind {
	case llmstream.KindContent:
		out.Type = EventContent
		out.Chunk = Chunk{Kind: chunkKind(f.ChunkKind), Text: f.Delta}
	case llmstream.KindKeepalive, llmstream.KindMeta:
		out.Type = EventKeepalive
	case llmstream.KindDone:
		return st.done(), nil
	case llmstream.KindError:
		return Event{}, &StatusError{Source: st.src.e.Name, StatusCode: streamErrorStatus(f.Meta.ErrorType), Body: f.Meta.ErrorType}
	}
	return out, nil
}

// done is the EventDone that ends the stream.
func (st *httpStream) done() Event {
	st.ended = true
	out := Event{
		Type: EventDone, Model: st.meta.ResponseModel,
		Usage: Usage{InputTokens: st.meta.InputTokens, OutputTokens: st.meta.OutputTokens},
	}
	if n := len(st.meta.FinishReasons); n > 0 {
		out.FinishReason = st.meta.FinishReasons[n-1]
	}
	return out
}

func (st *httpStream) Close() error { return st.body.Close() }

func chunkKind(k string) ChunkKind {
	switch k {
	case semconv.ChunkKindToolCall:
		return ChunkToolCall
	case semconv.ChunkKindReasoning:
		return ChunkReasoning
	}
	return ChunkText
}

// streamErrorStatus maps an error reported inside a stream to the HTTP
// status the provider uses for it, so that it is sorted like one.
func streamErrorStatus(errorType string) int {
	switch errorType {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error", "rate_limit_exceeded", "RESOURCE_EXHAUSTED":
		return http.StatusTooManyRequests
	case "overloaded_error":
		return 529
	// Google's status names (google.rpc.Code) as its HTTP mapping has them.
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return http.StatusBadRequest
	case "UNAUTHENTICATED":
		return http.StatusUnauthorized
	case "PERMISSION_DENIED":
		return http.StatusForbidden
	case "NOT_FOUND":
		return http.StatusNotFound
	case "UNAVAILABLE":
		return http.StatusServiceUnavailable
	case "DEADLINE_EXCEEDED":
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

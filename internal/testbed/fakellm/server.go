// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package fakellm is a scripted LLM upstream for tests, benchmarks and the demo. It answers the
// OpenAI chat completions, completions and Responses APIs, the Anthropic messages API, Gemini's
// generateContent and streamGenerateContent (Google AI Studio and Vertex AI paths, with and
// without alt=sse), Ollama's native /api/chat and /api/generate and AWS Bedrock's Converse and
// InvokeModel (Anthropic models), streamed in the AWS event stream or whole, with the real wire formats, paced by named, seedable timing profiles (or an explicit script), and it
// records what it sent for assertions.
package fakellm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/jonboulle/clockwork"
)

// Request headers that steer one request.
const (
	HeaderProfile = "X-Fakellm-Profile" // a profile name (or a JSON script)
	HeaderScript  = "X-Fakellm-Script"  // a JSON Script; wins over HeaderProfile
	HeaderSeed    = "X-Fakellm-Seed"    // an unsigned integer
	HeaderChunks  = "X-Fakellm-Chunks"  // the number of content chunks
	HeaderContent = "X-Fakellm-Content" // text, tool_call or reasoning

	// RequestsPath lists (GET) or forgets (DELETE) the recorded requests.
	RequestsPath = "/_fakellm/requests"
)

// DefaultChunks is the number of content chunks when neither Config nor the request says.
const DefaultChunks = 20

const maxRequestBody = 8 << 20

// Config configures a Server. The zero value is a steady server at real speed.
type Config struct {
	// Profile is the default profile: a name from Profiles or a JSON Script. Empty: steady.
	Profile string
	// Seed seeds the per-request generators (with the request sequence number).
	Seed uint64
	// TimeFactor scales every duration of the named profiles: 0.001 runs them 1000x faster.
	// Scripts are not scaled. 0 means 1.
	TimeFactor float64
	// Chunks is the default number of content chunks. 0 means DefaultChunks.
	Chunks int
	// Clock drives every wait and timestamp. Nil: the real clock.
	Clock clockwork.Clock
	// DiscardBodies stops keeping the bytes sent (Sent returns nil), for long benchmark runs.
	DiscardBodies bool
}

// Server is an http.Handler serving the fake APIs and the request log.
type Server struct {
	cfg     Config
	profile profileSpec
	clock   clockwork.Clock
	mux     *http.ServeMux
	journal *journal
}

var _ http.Handler = (*Server)(nil)

// New validates cfg and returns a Server. Serve it with httptest.NewServer or an http.Server on
// a loopback listener.
func New(cfg Config) (*Server, error) {
	var errs []error
	if cfg.Profile == "" {
		cfg.Profile = ProfileSteady
	}
	spec, err := parseProfile(cfg.Profile)
	if err != nil {
		errs = append(errs, fmt.Errorf("profile: %w", err))
	}
	if cfg.TimeFactor == 0 {
		cfg.TimeFactor = 1
	}
	if cfg.TimeFactor < 0 || math.IsNaN(cfg.TimeFactor) || math.IsInf(cfg.TimeFactor, 0) {
		errs = append(errs, fmt.Errorf("time factor must be a positive number, got %v", cfg.TimeFactor))
	}
	if cfg.Chunks == 0 {
		cfg.Chunks = DefaultChunks
	}
	if cfg.Chunks < 1 || cfg.Chunks > MaxChunks {
		errs = append(errs, fmt.Errorf("chunks must be between 1 and %d, got %d", MaxChunks, cfg.Chunks))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("fakellm: %w", err)
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	s := &Server{cfg: cfg, profile: spec, clock: cfg.Clock, mux: http.NewServeMux(), journal: newJournal()}
	// Each API also answers under /p/{profile}/, so that a client whose headers cannot be set
	// (a proxy's fixed upstream, an SDK's base URL) still picks a profile.
	for _, prefix := range []string{"", "/p/{profile}"} {
		s.mux.HandleFunc("POST "+prefix+"/v1/chat/completions", s.serveAPI(apiChat))
		s.mux.HandleFunc("POST "+prefix+"/v1/completions", s.serveAPI(apiCompletions))
		s.mux.HandleFunc("POST "+prefix+"/v1/responses", s.serveAPI(apiResponses))
		s.mux.HandleFunc("POST "+prefix+"/v1/messages", s.serveAPI(apiMessages))
		// Gemini: "{model}:generateContent" or "{model}:streamGenerateContent" (alt=sse or not),
		// on Google AI Studio and on Vertex AI.
		for _, version := range []string{"v1", "v1beta"} {
			s.mux.HandleFunc("POST "+prefix+"/"+version+"/models/{call}", s.serveAPI(apiGemini))
		}
		for _, version := range []string{"v1", "v1beta1"} {
			s.mux.HandleFunc("POST "+prefix+"/"+version+"/projects/{project}/locations/{location}/publishers/google/models/{call}", s.serveAPI(apiGemini))
		}
		s.mux.HandleFunc("POST "+prefix+"/api/chat", s.serveAPI(apiOllamaChat))
		s.mux.HandleFunc("POST "+prefix+"/api/generate", s.serveAPI(apiOllamaGenerate))
		// Bedrock: the model id is one path segment (an ARN's slashes percent-encoded).
		for _, op := range []string{"converse", "converse-stream"} {
			s.mux.HandleFunc("POST "+prefix+"/model/{model}/"+op, s.serveAPI(apiBedrockConverse))
		}
		for _, op := range []string{"invoke", "invoke-with-response-stream"} {
			s.mux.HandleFunc("POST "+prefix+"/model/{model}/"+op, s.serveAPI(apiBedrockInvoke))
		}
	}
	s.mux.HandleFunc("GET "+RequestsPath, s.serveRequests)
	s.mux.HandleFunc("DELETE "+RequestsPath, s.serveReset)
	s.mux.HandleFunc("GET "+RequestsPath+"/{seq}/body", s.serveBody)
	s.mux.HandleFunc("/", s.serveNotFound)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Requests returns a snapshot of every API request since the last Reset, in sequence order,
// including those still in flight (End is zero).
func (s *Server) Requests() []Request { return s.journal.all() }

// Request returns the record of request seq.
func (s *Server) Request(seq int) (Request, bool) {
	rec, ok := s.journal.get(seq)
	if !ok {
		return Request{}, false
	}
	return rec.snapshot(), true
}

// Sent returns the exact response body bytes written so far for request seq (nil if unknown or
// when DiscardBodies is set).
func (s *Server) Sent(seq int) []byte {
	rec, ok := s.journal.get(seq)
	if !ok {
		return nil
	}
	return rec.sent()
}

// Received returns the request body of request seq as it arrived (nil if unknown or when
// DiscardBodies is set).
func (s *Server) Received(seq int) []byte {
	rec, ok := s.journal.get(seq)
	if !ok {
		return nil
	}
	return rec.received()
}

// WaitFor blocks until at least n API requests have finished (their handler returned) since the
// last Reset, or ctx is done; it returns the snapshot of all requests either way.
func (s *Server) WaitFor(ctx context.Context, n int) ([]Request, error) {
	reqs, err := s.journal.waitFor(ctx, n)
	if err != nil {
		return reqs, fmt.Errorf("fakellm: waiting for %d finished requests: %w", n, err)
	}
	return reqs, nil
}

// Reset forgets every recorded request and restarts the sequence at 0. Requests in flight finish
// normally but are no longer recorded.
func (s *Server) Reset() { s.journal.reset() }

func (s *Server) serveRequests(w http.ResponseWriter, _ *http.Request) {
	reqs := s.Requests()
	for i := range reqs {
		reqs[i].Header = redact(reqs[i].Header)
	}
	writeJSON(w, http.StatusOK, reqs)
}

// credentialHeaders are recorded for Go assertions but never served by the log endpoint.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "Cookie", "Proxy-Authorization"}

func redact(h http.Header) http.Header {
	for _, k := range credentialHeaders {
		if _, ok := h[k]; ok {
			h[k] = []string{"[redacted]"}
		}
	}
	return h
}

func (s *Server) serveReset(w http.ResponseWriter, _ *http.Request) {
	s.Reset()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) serveBody(w http.ResponseWriter, r *http.Request) {
	seq, err := strconv.Atoi(r.PathValue("seq"))
	rec, ok := s.journal.get(seq)
	if err != nil || !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no request " + strconv.Quote(r.PathValue("seq"))})
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(rec.sent())
}

func (s *Server) serveNotFound(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusNotFound, openAIError{Error: openAIErrorBody{
		Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path),
		Type:    "invalid_request_error",
	}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

type apiKind int

const (
	apiChat apiKind = iota
	apiCompletions
	apiResponses
	apiMessages
	apiGemini
	apiOllamaChat
	apiOllamaGenerate
	apiBedrockConverse
	apiBedrockInvoke
)

func (k apiKind) String() string {
	switch k {
	case apiChat:
		return "chat.completions"
	case apiCompletions:
		return "completions"
	case apiResponses:
		return "responses"
	case apiGemini:
		return "gemini"
	case apiOllamaChat:
		return "ollama.chat"
	case apiOllamaGenerate:
		return "ollama.generate"
	case apiBedrockConverse:
		return "bedrock.converse"
	case apiBedrockInvoke:
		return "bedrock.invoke"
	default:
		return "messages"
	}
}

// native reports whether the API is Ollama's native one.
func (k apiKind) native() bool { return k == apiOllamaChat || k == apiOllamaGenerate }

// bedrock reports whether the API is one of AWS Bedrock's.
func (k apiKind) bedrock() bool { return k == apiBedrockConverse || k == apiBedrockInvoke }

// emitter renders one answer in one API's wire format. Its methods are called in stream order.
type emitter interface {
	// start returns the frames sent right after the headers, before any content.
	start() [][]byte
	// chunk returns the frames of content chunk i; the last one is the content frame, the others
	// open or close blocks.
	chunk(i int) [][]byte
	// finish returns the frames after the last content chunk.
	finish() [][]byte
	// body is the non-streaming response.
	body() []byte
}

// wireRequest holds the request fields every API shares, more or less.
type wireRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools    []json.RawMessage `json:"tools"`
	Thinking *struct {
		Type string `json:"type"`
	} `json:"thinking"`

	// What the Gemini and Ollama requests say in their own terms.
	tools     []string // the names of the declared tools
	thinks    bool     // reasoning was asked for
	jsonArray bool     // Gemini without alt=sse: the stream is one JSON array
}

func (wr wireRequest) hasTools() bool { return len(wr.Tools) > 0 || len(wr.tools) > 0 }

func (wr wireRequest) toolName() string {
	if len(wr.tools) > 0 {
		return wr.tools[0]
	}
	if len(wr.Tools) == 0 {
		return ""
	}
	var t struct {
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(wr.Tools[0], &t) != nil {
		return ""
	}
	if t.Function.Name != "" {
		return t.Function.Name
	}
	return t.Name
}

// exchange is one API request being answered.
type exchange struct {
	s         *Server
	seq       int
	kind      apiKind
	w         http.ResponseWriter
	rc        *http.ResponseController
	ctx       context.Context
	rec       *record
	start     time.Time
	lastFrame time.Time
	requestID string
}

func (s *Server) serveAPI(kind apiKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := s.clock.Now()
		rec, seq := s.journal.add(!s.cfg.DiscardBodies, Request{
			Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), API: kind.String(), Start: start,
		})
		// Runs on return and on the deliberate abort panic of early_close alike.
		defer func() { rec.finish(s.clock.Now()) }()
		x := &exchange{s: s, seq: seq, kind: kind, w: w, rc: http.NewResponseController(w), ctx: r.Context(), rec: rec, start: start}
		x.serve(r)
	}
}

func (x *exchange) serve(r *http.Request) {
	seq := x.seq
	// Request ids come from their own generator so that even rejected requests get one.
	x.requestID = requestID(x.kind, rand.New(rand.NewPCG(x.s.cfg.Seed^0x9e3779b97f4a7c15, uint64(seq))))

	body, err := io.ReadAll(http.MaxBytesReader(x.w, r.Body, maxRequestBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			x.reject(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit))
			return
		}
		x.reject(http.StatusBadRequest, "could not read the request body: "+err.Error())
		return
	}
	x.rec.setReceived(body)
	wr, err := x.readRequest(r, body)
	if errors.Is(err, errBadJSON) {
		// The providers' own wording, which clients may match.
		x.reject(http.StatusBadRequest, "We could not parse the JSON body of your request: "+errors.Unwrap(err).Error())
		return
	}
	if err != nil {
		x.reject(http.StatusBadRequest, err.Error())
		return
	}
	if wr.Model == "" {
		x.reject(http.StatusBadRequest, "model: field required")
		return
	}
	x.rec.update(func(q *Request) { q.Model, q.Stream = wr.Model, wr.Stream })

	st, err := x.s.steering(r.Header, r.PathValue("profile"))
	if err != nil {
		x.reject(http.StatusBadRequest, "fakellm: "+err.Error())
		return
	}
	rng := newRequestRand(st.seed, seq)
	plan := st.profile.plan(rng, st.chunks, x.s.cfg.TimeFactor)
	content := st.content
	if content == "" {
		content = plan.Content
	}
	if content == "" {
		switch {
		case wr.hasTools():
			content = ContentToolCall
		case (x.kind == apiMessages || x.kind == apiBedrockInvoke) && wr.Thinking != nil && wr.Thinking.Type == "enabled", wr.thinks:
			content = ContentReasoning
		default:
			content = ContentText
		}
	}
	if x.kind == apiCompletions {
		content = ContentText // the legacy API has neither tools nor reasoning
	}
	if x.kind == apiOllamaGenerate && content == ContentToolCall {
		content = ContentText // generate takes no tools
	}
	plan.Content = content
	// Gemini and Ollama send each tool call whole: one call a chunk.
	wholeCalls := x.kind == apiGemini || x.kind.native()
	ans := newAnswer(rng, plan.Chunks(), content, wr.toolName(), x.kind == apiChat, wholeCalls, len(body)/4)
	em := x.newEmitter(rng, &wr, ans, plan)
	x.rec.update(func(q *Request) {
		q.Profile, q.Seed, q.Content, q.Plan, q.ResponseID = st.profile.name, st.seed, content, plan, ans.id
		q.InputTokens, q.OutputTokens, q.Text = ans.inputTokens, ans.outputTokens(), ans.text(ContentText)
	})

	switch {
	case plan.Status != 0:
		x.writeError(plan.Status, plan.RetryAfter)
	case !wr.Stream:
		x.respond(plan, em)
	default:
		x.stream(plan, em, &wr)
	}
}

// readRequest reads the fields fakellm needs from the request, in its API's terms.
func (x *exchange) readRequest(r *http.Request, body []byte) (wireRequest, error) {
	var (
		wr  wireRequest
		err error
	)
	switch x.kind {
	case apiGemini:
		if wr, err = geminiPath(r); err != nil {
			return wr, err
		}
		err = geminiWire(r, body, &wr)
	case apiOllamaChat, apiOllamaGenerate:
		wr, err = ollamaWire(body)
	case apiBedrockConverse, apiBedrockInvoke:
		wr, err = bedrockWire(r, x.kind, body)
	default:
		err = json.Unmarshal(body, &wr)
	}
	if err != nil {
		return wr, badJSON{err}
	}
	return wr, nil
}

// errBadJSON marks a request body that is not the JSON its API takes.
var errBadJSON = errors.New("fakellm: request body is not valid JSON")

type badJSON struct{ err error }

func (b badJSON) Error() string        { return errBadJSON.Error() + ": " + b.err.Error() }
func (b badJSON) Unwrap() error        { return b.err }
func (b badJSON) Is(target error) bool { return target == errBadJSON }

func (x *exchange) newEmitter(rng *rand.Rand, wr *wireRequest, ans *answer, plan Plan) emitter {
	created := x.start.Unix()
	switch x.kind {
	case apiGemini:
		ans.id = randString(rng, base64URL, 22)
		return &geminiEmitter{ans: ans, model: wr.Model, jsonArray: wr.jsonArray}
	case apiOllamaChat, apiOllamaGenerate:
		// Ollama's answers have no id.
		return &ollamaEmitter{ans: ans, model: wr.Model, generate: x.kind == apiOllamaGenerate, start0: x.start, plan: plan, offsets: plan.Offsets()}
	case apiBedrockConverse:
		// Converse answers have no id.
		return &converseEmitter{ans: ans, plan: plan}
	case apiBedrockInvoke:
		ans.id = "msg_bdrk_01" + randString(rng, base62, 22)
		ans.toolCallID = "toolu_bdrk_01" + randString(rng, base62, 22)
		return &invokeEmitter{messages: messagesEmitter{ans: ans, model: wr.Model}, plan: plan}
	case apiChat:
		ans.id = "chatcmpl-" + randString(rng, base62, 29)
		return &chatEmitter{ans: ans, model: wr.Model, created: created, includeUsage: wr.StreamOptions != nil && wr.StreamOptions.IncludeUsage}
	case apiCompletions:
		ans.id = "cmpl-" + randString(rng, base62, 29)
		return &completionsEmitter{ans: ans, model: wr.Model, created: created, includeUsage: wr.StreamOptions != nil && wr.StreamOptions.IncludeUsage}
	case apiResponses:
		ans.id = "resp_" + randString(rng, hexLow, 50)
		return newResponsesEmitter(ans, wr, created)
	default:
		ans.id = "msg_01" + randString(rng, base62, 22)
		ans.toolCallID = "toolu_01" + randString(rng, base62, 22)
		return &messagesEmitter{ans: ans, model: wr.Model}
	}
}

// steering is what the fakellm headers (or the server defaults) ask of one request.
type steering struct {
	profile profileSpec
	seed    uint64
	chunks  int
	content string
}

// steering resolves the request's profile: script header, then profile header, then the /p/{profile}/
// path prefix, then the server default.
func (s *Server) steering(h http.Header, pathProfile string) (steering, error) {
	st := steering{profile: s.profile, seed: s.cfg.Seed, chunks: s.cfg.Chunks}
	var errs []error
	if pathProfile != "" && h.Get(HeaderScript) == "" && h.Get(HeaderProfile) == "" {
		ps, err := parseProfile(pathProfile)
		if err != nil {
			errs = append(errs, fmt.Errorf("path: %w", err))
		} else {
			st.profile = ps
		}
	}
	if v := h.Get(HeaderScript); v != "" {
		sc, err := ParseScript([]byte(v))
		if err != nil {
			errs = append(errs, fmt.Errorf("header %s: %w", HeaderScript, err))
		} else {
			st.profile = profileSpec{name: ProfileScript, script: &sc}
		}
	} else if v := h.Get(HeaderProfile); v != "" {
		ps, err := parseProfile(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("header %s: %w", HeaderProfile, err))
		} else {
			st.profile = ps
		}
	}
	if v := h.Get(HeaderSeed); v != "" {
		seed, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("header %s: want an unsigned integer: %w", HeaderSeed, err))
		}
		st.seed = seed
	}
	if v := h.Get(HeaderChunks); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > MaxChunks {
			errs = append(errs, fmt.Errorf("header %s: want an integer between 1 and %d, got %q", HeaderChunks, MaxChunks, v))
		}
		st.chunks = n
	}
	if v := h.Get(HeaderContent); v != "" {
		if err := validateContent(v); err != nil {
			errs = append(errs, fmt.Errorf("header %s: %w", HeaderContent, err))
		}
		st.content = v
	}
	return st, errors.Join(errs...)
}

// reject answers a request that cannot be served with the provider's error format.
func (x *exchange) reject(status int, msg string) {
	x.rec.update(func(q *Request) { q.Error = msg })
	x.writeErrorMessage(status, 0, msg)
}

func (x *exchange) writeError(status int, retryAfter time.Duration) {
	x.writeErrorMessage(status, retryAfter, "")
}

func (x *exchange) writeErrorMessage(status int, retryAfter time.Duration, msg string) {
	h := x.w.Header()
	x.setRequestID(h)
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
		h.Set("Retry-After-Ms", strconv.FormatInt(retryAfter.Milliseconds(), 10))
	}
	var b []byte
	switch x.kind {
	case apiMessages:
		b = anthropicErrorJSON(status, msg, x.requestID)
	case apiGemini:
		b = googleErrorJSON(status, msg)
	case apiOllamaChat, apiOllamaGenerate:
		b = ollamaErrorJSON(status, msg)
	case apiBedrockConverse, apiBedrockInvoke:
		b = bedrockErrorJSON(h, status, msg)
	default:
		b = openAIErrorJSON(status, msg, retryAfter)
	}
	h.Set("Content-Type", "application/json")
	x.writeHeader(status)
	x.write(b, 0, 0, false)
	x.complete()
}

func (x *exchange) setRequestID(h http.Header) {
	switch {
	case x.kind == apiMessages:
		h.Set("Request-Id", x.requestID)
	case x.kind.bedrock():
		h.Set("X-Amzn-Requestid", x.requestID)
	default:
		h.Set("X-Request-Id", x.requestID)
	}
}

func (x *exchange) writeHeader(status int) {
	x.w.WriteHeader(status)
	x.rec.update(func(q *Request) { q.Status = status })
}

// respond answers without streaming: the whole planned generation time passes, then one JSON body.
func (x *exchange) respond(plan Plan, em emitter) {
	offsets := plan.Offsets()
	last := len(offsets)
	if plan.CloseAfterChunk > 0 {
		last = min(plan.CloseAfterChunk, last)
	}
	if !x.waitUntil(x.start.Add(offsets[last-1]), 0) {
		return
	}
	if plan.CloseAfterChunk > 0 {
		x.abort()
	}
	x.setRequestID(x.w.Header())
	x.w.Header().Set("Content-Type", "application/json")
	x.writeHeader(http.StatusOK)
	if x.write(em.body(), 0, 0, false) {
		x.complete()
	}
}

// streamContentType is the media type of the API's streams.
func (x *exchange) streamContentType(wr *wireRequest) string {
	switch {
	case x.kind.native():
		return "application/x-ndjson"
	case x.kind == apiGemini && wr.jsonArray:
		return "application/json; charset=UTF-8"
	case x.kind.bedrock():
		return bedrockContentType
	}
	return "text/event-stream; charset=utf-8"
}

// keepalives reports whether the API's clients take keepalive frames: Gemini's and Ollama's
// parse every frame as JSON (a comment or a blank line breaks their SDKs), Bedrock's event stream
// has no keepalive message, and the real servers send none.
func (x *exchange) keepalives() bool {
	return x.kind != apiGemini && !x.kind.native() && !x.kind.bedrock()
}

// stream answers with the API's stream (server-sent events, NDJSON or a JSON array), each frame
// written and flushed on its own.
func (x *exchange) stream(plan Plan, em emitter, wr *wireRequest) {
	h := x.w.Header()
	x.setRequestID(h)
	h.Set("Content-Type", x.streamContentType(wr))
	h.Set("Cache-Control", "no-cache")
	if !x.keepalives() {
		plan.KeepaliveEvery = 0
	}
	x.writeHeader(http.StatusOK)
	// Headers go out at once, as real SSE servers do: they say nothing about the first token.
	if err := x.rc.Flush(); err != nil {
		x.disconnected()
		return
	}
	x.lastFrame = x.s.clock.Now()
	for _, f := range em.start() {
		if !x.write(f, 1, 0, isKeepalive(f)) {
			return
		}
	}
	offsets := plan.Offsets()
	closeAfter := 0
	if plan.CloseAfterChunk > 0 {
		closeAfter = min(plan.CloseAfterChunk, len(offsets))
	}
	var burst []byte
	burstFrames := 0
	for i, off := range offsets {
		if !plan.Burst || i == 0 {
			if !x.waitUntil(x.start.Add(off), plan.KeepaliveEvery) {
				return
			}
		}
		frames := em.chunk(i)
		if plan.Burst {
			for _, f := range frames {
				burst = append(burst, f...)
			}
			burstFrames += len(frames)
		} else {
			for j, f := range frames {
				if !x.write(f, 1, boolInt(j == len(frames)-1), false) {
					return
				}
			}
		}
		if i+1 == closeAfter {
			if plan.Burst && !x.write(burst, burstFrames, i+1, false) {
				return
			}
			x.abort()
		}
	}
	for _, f := range em.finish() {
		if plan.Burst {
			burst = append(burst, f...)
			burstFrames++
			continue
		}
		if !x.write(f, 1, 0, false) {
			return
		}
	}
	if plan.Burst && !x.write(burst, burstFrames, len(offsets), false) {
		return
	}
	x.complete()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// waitUntil waits for due, sending a keepalive every keepaliveEvery of the silence (0: none).
// It returns false when the client went away.
func (x *exchange) waitUntil(due time.Time, keepaliveEvery time.Duration) bool {
	silentSince := x.lastFrame
	for {
		now := x.s.clock.Now()
		next, keepalive := due, false
		if keepaliveEvery > 0 {
			// Keepalives tick from the start of the silence like a ticker: a late one does not
			// push the others back, a missed one is skipped.
			tick := silentSince.Add((now.Sub(silentSince)/keepaliveEvery + 1) * keepaliveEvery)
			if tick.Before(due) {
				next, keepalive = tick, true
			}
		}
		if d := next.Sub(now); d > 0 {
			t := x.s.clock.NewTimer(d)
			select {
			case <-x.ctx.Done():
				t.Stop()
				x.disconnected()
				return false
			case <-t.Chan():
			}
		} else if x.ctx.Err() != nil {
			x.disconnected()
			return false
		}
		if !keepalive {
			return true
		}
		if !x.write(x.keepaliveFrame(), 1, 0, true) {
			return false
		}
	}
}

func (x *exchange) keepaliveFrame() []byte {
	if x.kind == apiMessages {
		return anthropicPing
	}
	return sseKeepalive
}

// write writes and flushes p, which holds frames SSE frames of which contents are content chunks.
func (x *exchange) write(p []byte, frames, contents int, keepalive bool) bool {
	_, err := x.w.Write(p)
	if err == nil && frames > 0 {
		err = x.rc.Flush()
	}
	at := x.s.clock.Now()
	x.lastFrame = at
	if err != nil {
		x.disconnected()
		return false
	}
	x.rec.wrote(p, frames, at, contents, keepalive)
	return true
}

func (x *exchange) disconnected() {
	at := x.s.clock.Now()
	x.rec.update(func(q *Request) {
		if !q.Disconnected {
			q.Disconnected, q.DisconnectedAt = true, at
		}
	})
}

func (x *exchange) complete() {
	x.rec.update(func(q *Request) { q.Completed = true })
}

// abort closes the connection mid-response, the way a crashed upstream does: net/http drops the
// connection without the final chunk of the chunked encoding.
func (x *exchange) abort() {
	x.rec.update(func(q *Request) { q.Aborted = true })
	panic(http.ErrAbortHandler)
}

// newRequestRand is the generator of request seq: everything random about a response comes from it.
func newRequestRand(seed uint64, seq int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(seq)))
}

func requestID(kind apiKind, rng *rand.Rand) string {
	if kind == apiMessages {
		return "req_011C" + randString(rng, base62, 20)
	}
	return "req_" + randString(rng, hexLow, 32)
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Request is what the server recorded about one API request, for assertions.
type Request struct {
	// Seq is the request's sequence number: its index in Requests and the argument of Sent.
	// Reset starts again at 0.
	Seq    int    `json:"seq"`
	Method string `json:"method"`
	Path   string `json:"path"`
	// Header holds the request headers as received (the log endpoint redacts credentials).
	Header http.Header `json:"header"`
	// API is the endpoint's shape: chat.completions, completions, responses, messages, gemini,
	// ollama.chat or ollama.generate.
	API     string `json:"api"`
	Model   string `json:"model,omitempty"`
	Profile string `json:"profile,omitempty"`
	// Content is what the content chunks carried: text, tool_call or reasoning.
	Content string `json:"content,omitempty"`
	Seed    uint64 `json:"seed"`
	Stream  bool   `json:"stream"`
	// ResponseID is the id written in the response body (chatcmpl-…, resp_…, msg_…).
	ResponseID string `json:"response_id,omitempty"`
	// Plan is the timing the server followed.
	Plan Plan `json:"plan"`
	// Status is the HTTP status written; 0 when the connection was aborted before any header.
	Status int       `json:"status"`
	Start  time.Time `json:"start"`
	// ChunkTimes are the moments right after each content frame was flushed.
	ChunkTimes []time.Time `json:"chunk_times"`
	// ChunkOffsetsMillis are ChunkTimes relative to Start, in milliseconds.
	ChunkOffsetsMillis []float64 `json:"chunk_offsets_ms"`
	// KeepaliveTimes are the moments right after each keepalive (SSE comment or ping) was flushed.
	KeepaliveTimes []time.Time `json:"keepalive_times"`
	// Frames counts every SSE event and comment written, content or not.
	Frames int `json:"frames"`
	// Bytes counts the response body bytes written.
	Bytes int `json:"bytes"`
	// Text is the generated text (text chunks only, no reasoning or tool arguments).
	Text         string `json:"text,omitempty"`
	InputTokens  int    `json:"input_tokens,omitempty"`
	OutputTokens int    `json:"output_tokens,omitempty"`
	// Completed is true when the response was written to its end as planned.
	Completed bool `json:"completed"`
	// Aborted is true when the server closed the connection on purpose (early_close).
	Aborted bool `json:"aborted,omitempty"`
	// Disconnected is true when the client went away (request context cancelled, or a write
	// failed) before the response was complete; DisconnectedAt says when it was noticed.
	Disconnected   bool      `json:"disconnected"`
	DisconnectedAt time.Time `json:"disconnected_at,omitzero"`
	// End is when the handler returned; zero while the request is in flight.
	End time.Time `json:"end,omitzero"`
	// Error describes a rejected request (bad JSON, bad fakellm header).
	Error string `json:"error,omitempty"`
}

// Keepalives is the number of keepalive frames sent.
func (r Request) Keepalives() int { return len(r.KeepaliveTimes) }

// Chunks is the number of content chunks sent.
func (r Request) Chunks() int { return len(r.ChunkTimes) }

func (r Request) clone() Request {
	r.Header = r.Header.Clone()
	r.ChunkTimes = slices.Clone(r.ChunkTimes)
	r.KeepaliveTimes = slices.Clone(r.KeepaliveTimes)
	r.Plan.Gaps = slices.Clone(r.Plan.Gaps)
	r.Plan.StallAfter = slices.Clone(r.Plan.StallAfter)
	r.ChunkOffsetsMillis = make([]float64, len(r.ChunkTimes))
	for i, t := range r.ChunkTimes {
		r.ChunkOffsetsMillis[i] = float64(t.Sub(r.Start)) / float64(time.Millisecond)
	}
	return r
}

// record is the live, locked state of one request.
type record struct {
	gen        uint64
	keepBody   bool
	mu         sync.Mutex
	req        Request
	body       bytes.Buffer // the response body sent
	reqBody    []byte       // the request body received
	onFinish   func(*record)
	finishOnce sync.Once
}

func (r *record) update(f func(*Request)) {
	r.mu.Lock()
	f(&r.req)
	r.mu.Unlock()
}

// wrote accounts for bytes written to the client: frames SSE frames, of which contents were content
// chunks, or one keepalive.
func (r *record) wrote(p []byte, frames int, at time.Time, contents int, keepalive bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keepBody {
		r.body.Write(p)
	}
	r.req.Bytes += len(p)
	r.req.Frames += frames
	for range contents {
		r.req.ChunkTimes = append(r.req.ChunkTimes, at)
	}
	if keepalive {
		r.req.KeepaliveTimes = append(r.req.KeepaliveTimes, at)
	}
}

func (r *record) snapshot() Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.req.clone()
}

func (r *record) sent() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.body.Bytes())
}

func (r *record) received() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.reqBody)
}

func (r *record) setReceived(b []byte) {
	if !r.keepBody {
		return
	}
	r.mu.Lock()
	r.reqBody = b
	r.mu.Unlock()
}

func (r *record) finish(at time.Time) {
	r.finishOnce.Do(func() {
		r.update(func(q *Request) { q.End = at })
		r.onFinish(r)
	})
}

// journal holds the records of the current generation (since the last Reset).
type journal struct {
	mu       sync.Mutex
	gen      uint64
	records  []*record
	finished int
	changed  chan struct{} // closed and replaced whenever a request finishes or Reset runs
}

func newJournal() *journal { return &journal{changed: make(chan struct{})} }

// add records a new request and returns it with its sequence number.
func (j *journal) add(keepBody bool, req Request) (*record, int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	req.Seq = len(j.records)
	rec := &record{gen: j.gen, keepBody: keepBody, req: req, onFinish: j.finished1}
	j.records = append(j.records, rec)
	return rec, req.Seq
}

func (j *journal) finished1(rec *record) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if rec.gen != j.gen {
		return
	}
	j.finished++
	close(j.changed)
	j.changed = make(chan struct{})
}

func (j *journal) all() []Request {
	j.mu.Lock()
	recs := slices.Clone(j.records)
	j.mu.Unlock()
	out := make([]Request, len(recs))
	for i, r := range recs {
		out[i] = r.snapshot()
	}
	return out
}

func (j *journal) get(i int) (*record, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if i < 0 || i >= len(j.records) {
		return nil, false
	}
	return j.records[i], true
}

func (j *journal) reset() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.gen++
	j.records = nil
	j.finished = 0
	close(j.changed)
	j.changed = make(chan struct{})
}

func (j *journal) waitFor(ctx context.Context, n int) ([]Request, error) {
	for {
		j.mu.Lock()
		done, ch := j.finished >= n, j.changed
		j.mu.Unlock()
		if done {
			return j.all(), nil
		}
		select {
		case <-ctx.Done():
			return j.all(), ctx.Err()
		case <-ch:
		}
	}
}

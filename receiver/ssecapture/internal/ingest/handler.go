// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package ingest is the sse_capture receiver's ingest endpoint: JSON stream
// records, with the chunk times a client measured, become spans.
package ingest // import "github.com/streamstall/streamstall/receiver/ssecapture/internal/ingest"

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"mime"
	"net/http"

	"github.com/jonboulle/clockwork"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
)

// Path is where records are posted.
const Path = "/v1/streams"

// format is what obsreport reports the records as.
const format = "json"

// Handler serves POST /v1/streams: JSON stream records become spans,
// handed to the next consumer synchronously so that the client learns
// whether they were taken.
type Handler struct {
	maxBody int64
	decoder recordDecoder
	next    consumer.Traces
	obsrecv *receiverhelper.ObsReport
	// stopping ends when the receiver shuts down: decoding stops.
	stopping context.Context
	stop     context.CancelFunc
}

// Stop ends the decoding of the requests in flight; they get 503.
func (h *Handler) Stop() { h.stop() }

// NewHandler returns a handler that hands the records it accepts to next,
// judging their times against clock; Stop ends the decoding of requests in
// flight.
func NewHandler(limits Limits, clock clockwork.Clock, next consumer.Traces, obsrecv *receiverhelper.ObsReport) *Handler {
	stopping, stop := context.WithCancel(context.Background())
	return &Handler{
		maxBody:  limits.MaxBody,
		decoder:  recordDecoder{limits: limits, newID: rand.Uint64, now: clock.Now},
		next:     next,
		obsrecv:  obsrecv,
		stopping: stopping,
		stop:     stop,
	}
}

// ingestMediaTypes are the content types ingest accepts. Anything else is
// refused before the body is read: a browser may send text/plain from any
// origin without a CORS preflight, and such a request must not be taken.
var ingestMediaTypes = map[string]bool{"application/json": true, "application/x-ndjson": true}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		writeIngestError(w, &ingestError{Status: http.StatusNotFound, Message: "not found: records are posted to " + Path, Record: -1})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeIngestError(w, &ingestError{Status: http.StatusMethodNotAllowed, Message: "method not allowed: use POST", Record: -1})
		return
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || !ingestMediaTypes[mt] {
		writeIngestError(w, &ingestError{
			Status:  http.StatusUnsupportedMediaType,
			Message: "unsupported Content-Type " + jsonQuote(ct) + ": send application/json or application/x-ndjson",
			Record:  -1,
		})
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(h.stopping, cancel)()
	if h.stopping.Err() != nil {
		cancel() // AfterFunc cancels too, but in its own goroutine
	}
	td, n, ierr := h.decoder.decode(ctx, http.MaxBytesReader(w, r.Body, h.maxBody))
	if ierr != nil {
		if ierr.Status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		writeIngestError(w, ierr)
		return
	}
	// Counted before it is handed on: from then on td is the next
	// consumer's, which may move its spans out or read it elsewhere.
	spans := td.SpanCount()
	octx := h.obsrecv.StartTracesOp(r.Context())
	err := h.next.ConsumeTraces(octx, td)
	h.obsrecv.EndTracesOp(octx, format, spans, err)
	if err != nil {
		if consumererror.IsPermanent(err) {
			writeIngestError(w, &ingestError{Status: http.StatusBadRequest, Message: "the pipeline rejected the records: " + err.Error(), Record: -1})
			return
		}
		w.Header().Set("Retry-After", "1")
		writeIngestError(w, &ingestError{Status: http.StatusServiceUnavailable, Message: "the pipeline refused the records; retry later", Record: -1})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(map[string]int{"accepted": n})
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func writeIngestError(w http.ResponseWriter, e *ingestError) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(e.Status)
	body := map[string]any{"error": e.Message}
	if e.Record >= 0 {
		body["record"] = e.Record
	}
	if e.Field != "" {
		body["field"] = e.Field
	}
	_ = json.NewEncoder(w).Encode(body)
}

// ServerError answers, in JSON, the errors confighttp raises before the
// handler runs: an unsupported or corrupt Content-Encoding, a failed
// authentication.
func ServerError(w http.ResponseWriter, _ *http.Request, msg string, status int) {
	writeIngestError(w, &ingestError{Status: status, Message: msg, Record: -1})
}

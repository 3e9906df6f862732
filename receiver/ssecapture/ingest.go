package ssecapture

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
)

const ingestPath = "/v1/streams"

// ingestHandler serves POST /v1/streams: JSON stream records become spans,
// handed to the next consumer synchronously so that the client learns
// whether they were taken.
type ingestHandler struct {
	maxBody int64
	decoder recordDecoder
	next    consumer.Traces
	obsrecv *receiverhelper.ObsReport
}

func newIngestHandler(cfg *IngestConfig, next consumer.Traces, obsrecv *receiverhelper.ObsReport) *ingestHandler {
	return &ingestHandler{
		maxBody: cfg.MaxRequestBody,
		decoder: recordDecoder{
			limits: ingestLimits{maxRecords: cfg.MaxRecords, maxChunks: cfg.MaxChunksPerRecord},
			newID:  rand.Uint64,
		},
		next:    next,
		obsrecv: obsrecv,
	}
}

func (h *ingestHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != ingestPath {
		writeIngestError(w, &ingestError{Status: http.StatusNotFound, Message: "not found: records are posted to " + ingestPath, Record: -1})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeIngestError(w, &ingestError{Status: http.StatusMethodNotAllowed, Message: "method not allowed: use POST", Record: -1})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeIngestError(w, &ingestError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body exceeds %d bytes", h.maxBody), Record: -1})
			return
		}
		writeIngestError(w, &ingestError{Status: http.StatusBadRequest, Message: "cannot read the request body", Record: -1})
		return
	}
	td, n, ierr := h.decoder.decode(body)
	if ierr != nil {
		writeIngestError(w, ierr)
		return
	}
	ctx := h.obsrecv.StartTracesOp(r.Context())
	err = h.next.ConsumeTraces(ctx, td)
	h.obsrecv.EndTracesOp(ctx, formatIngest, td.SpanCount(), err)
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

func writeIngestError(w http.ResponseWriter, e *ingestError) {
	w.Header().Set("Content-Type", "application/json")
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

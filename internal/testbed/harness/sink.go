// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// Sink is an OTLP/HTTP endpoint standing in for a backend: a collector's
// otlphttp exporter sends traces and metrics to it (JSON or protobuf), and
// the caller reads what arrived.
type Sink struct {
	URL     string
	srv     *http.Server
	mu      sync.Mutex
	spans   []ReceivedSpan
	metrics []pmetric.Metrics
	errs    []error
	changed chan struct{}
}

// StartSink listens on a free loopback port.
func StartSink() (*Sink, error) { return StartSinkAt("127.0.0.1:0") }

// StartSinkAt listens on addr: a test that starts a collector before its
// backend picks the port first and brings the sink up later.
func StartSinkAt(addr string) (*Sink, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Sink{URL: "http://" + l.Addr().String(), changed: make(chan struct{}, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", s.serveTraces)
	mux.HandleFunc("POST /v1/metrics", s.serveMetrics)
	s.srv = &http.Server{Handler: mux}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// Close stops the sink.
func (s *Sink) Close() error { return s.srv.Close() }

// Changed is signalled (non-blocking, coalesced) whenever data arrives.
func (s *Sink) Changed() <-chan struct{} { return s.changed }

// readBody reads a request body, gzip-compressed or not (the otlphttp
// exporter compresses with gzip by default).
func readBody(r *http.Request) ([]byte, error) {
	var rd io.Reader = r.Body
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		defer func() { _ = gz.Close() }()
		rd = gz
	default:
		return nil, fmt.Errorf("unsupported Content-Encoding %q", enc)
	}
	return io.ReadAll(rd)
}

func isJSON(r *http.Request) bool { return r.Header.Get("Content-Type") == "application/json" }

func (s *Sink) serveTraces(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	req := ptraceotlp.NewExportRequest()
	if isJSON(r) {
		err = req.UnmarshalJSON(body)
	} else {
		err = req.UnmarshalProto(body)
	}
	if err != nil {
		s.fail(w, fmt.Errorf("decode traces: %w", err))
		return
	}
	s.mu.Lock()
	rss := req.Traces().ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		service := ""
		if v, ok := rss.At(i).Resource().Attributes().Get("service.name"); ok {
			service = v.AsString()
		}
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := ptrace.NewSpan()
				spans.At(k).CopyTo(sp)
				s.spans = append(s.spans, ReceivedSpan{Span: sp, Service: service})
			}
		}
	}
	s.mu.Unlock()
	s.signal()
	reply(w, r, ptraceotlp.NewExportResponse())
}

func (s *Sink) serveMetrics(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	req := pmetricotlp.NewExportRequest()
	if isJSON(r) {
		err = req.UnmarshalJSON(body)
	} else {
		err = req.UnmarshalProto(body)
	}
	if err != nil {
		s.fail(w, fmt.Errorf("decode metrics: %w", err))
		return
	}
	md := pmetric.NewMetrics()
	req.Metrics().CopyTo(md)
	s.mu.Lock()
	s.metrics = append(s.metrics, md)
	s.mu.Unlock()
	s.signal()
	reply(w, r, pmetricotlp.NewExportResponse())
}

type marshaler interface {
	MarshalJSON() ([]byte, error)
	MarshalProto() ([]byte, error)
}

func reply(w http.ResponseWriter, r *http.Request, resp marshaler) {
	var out []byte
	if isJSON(r) {
		out, _ = resp.MarshalJSON()
	} else {
		out, _ = resp.MarshalProto()
	}
	w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
	_, _ = w.Write(out)
}

// fail answers 400 and keeps the error for Errors: a payload the sink
// cannot read is a bug to show, not to hide in the collector's log.
func (s *Sink) fail(w http.ResponseWriter, err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
	http.Error(w, err.Error(), http.StatusBadRequest)
}

// Errors returns the payloads the sink could not decode.
func (s *Sink) Errors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

func (s *Sink) signal() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// ReceivedSpan is a span with the service.name of its resource.
type ReceivedSpan struct {
	ptrace.Span
	Service string
}

// Spans returns every span received so far, in arrival order.
func (s *Sink) Spans() []ReceivedSpan {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ReceivedSpan(nil), s.spans...)
}

// Span returns the last span received with this name.
func (s *Sink) Span(name string) (ptrace.Span, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.spans) - 1; i >= 0; i-- {
		if s.spans[i].Name() == name {
			return s.spans[i].Span, true
		}
	}
	return ptrace.Span{}, false
}

// Metrics returns every metrics payload received so far, oldest first.
func (s *Sink) Metrics() []pmetric.Metrics {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]pmetric.Metrics(nil), s.metrics...)
}

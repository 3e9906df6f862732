// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"
)

const jaegerConfig = `
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:${HEALTH}
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:${QUERY}
    grpc:
      endpoint: 127.0.0.1:${QUERY_GRPC}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:${OTLP_GRPC}
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// Jaeger is a running Jaeger v2 with in-memory storage on loopback.
type Jaeger struct {
	*Process
	// OTLPGRPC is the host:port of its OTLP/gRPC receiver.
	OTLPGRPC string
	// QueryURL is the base URL of its UI and query API.
	QueryURL string
}

// StartJaeger writes a config into dir and starts the jaeger binary.
func StartJaeger(ctx context.Context, bin, dir string) (*Jaeger, error) {
	ports := make([]int, 4)
	for i := range ports {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	cfg, err := WriteFile(dir, "jaeger.yaml", Fill(jaegerConfig, "HEALTH", ports[0], "QUERY", ports[1], "QUERY_GRPC", ports[2], "OTLP_GRPC", ports[3]))
	if err != nil {
		return nil, err
	}
	p, err := Start("jaeger", bin, "--config", cfg)
	if err != nil {
		return nil, err
	}
	j := &Jaeger{Process: p, OTLPGRPC: fmt.Sprintf("127.0.0.1:%d", ports[3]), QueryURL: fmt.Sprintf("http://127.0.0.1:%d", ports[1])}
	if err := p.WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/status", ports[0]), http.StatusOK); err != nil {
		p.Stop(5 * time.Second)
		return nil, err
	}
	if err := p.WaitHTTP(ctx, j.QueryURL+"/api/services", http.StatusOK); err != nil {
		p.Stop(5 * time.Second)
		return nil, err
	}
	return j, nil
}

// JaegerSpan is the part of a span in Jaeger's query API answer (GET
// /api/traces, the API the Jaeger UI itself uses) that streamstall reads.
type JaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	Tags          []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
	Logs []struct {
		Timestamp int64 `json:"timestamp"` // microseconds
		Fields    []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"fields"`
	} `json:"logs"`
}

// Tag returns a tag's value as Jaeger returned it.
func (s JaegerSpan) Tag(key string) (any, bool) {
	for _, t := range s.Tags {
		if t.Key == key {
			return t.Value, true
		}
	}
	return nil, false
}

// JaegerTrace is one trace of a query answer.
type JaegerTrace struct {
	TraceID string       `json:"traceID"`
	Spans   []JaegerSpan `json:"spans"`
}

// FindTraces asks Jaeger for the traces of service with spans carrying tags
// (Jaeger matches tag values as strings).
func (j *Jaeger) FindTraces(ctx context.Context, service string, tags map[string]string) ([]JaegerTrace, error) {
	q := url.Values{"service": {service}, "limit": {"1000"}} // the default window is the last 48 h
	if len(tags) > 0 {
		b, err := json.Marshal(tags)
		if err != nil {
			return nil, err
		}
		q.Set("tags", string(b))
	}
	var traces []JaegerTrace
	if err := j.query(ctx, "/api/traces?"+q.Encode(), &traces); err != nil {
		return nil, err
	}
	return traces, nil
}

// Trace asks Jaeger for one trace by id (GET /api/traces/{id}).
func (j *Jaeger) Trace(ctx context.Context, id string) (JaegerTrace, error) {
	var traces []JaegerTrace
	if err := j.query(ctx, "/api/traces/"+url.PathEscape(id), &traces); err != nil {
		return JaegerTrace{}, err
	}
	if len(traces) != 1 || traces[0].TraceID != id {
		return JaegerTrace{}, fmt.Errorf("jaeger trace %s: %d traces in the answer", id, len(traces))
	}
	return traces[0], nil
}

// Services lists the services Jaeger has spans of.
func (j *Jaeger) Services(ctx context.Context) ([]string, error) {
	var services []string
	if err := j.query(ctx, "/api/services", &services); err != nil {
		return nil, err
	}
	return services, nil
}

// query GETs path from the query service and decodes the "data" of its answer.
func (j *Jaeger) query(ctx context.Context, path string, data any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.QueryURL+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("jaeger answered %s with %d: %s", path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &struct {
		Data any `json:"data"`
	}{Data: data}); err != nil {
		return fmt.Errorf("decode jaeger answer to %s: %w", path, err)
	}
	return nil
}

// TempDir makes a directory for configs and logs of one run.
func TempDir() (string, error) { return os.MkdirTemp("", "streamstall-") }

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

// Package e2e runs streamstall where users run it: the collector built by ocb
// from builder-config.yaml, a real Jaeger v2 and the fakellm upstream, all as
// separate processes on loopback. `make e2e` builds them and sets the paths.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// binary returns the program's path, failing the test with what to do when
// it is missing: a skipped end-to-end test would prove nothing.
func binary(t *testing.T, env, name string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		p = filepath.Join("..", "_build", name)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("%s is missing (%v): run these tests with `make e2e`, which builds the collector (ocb), Jaeger and fakellm first, or set %s", abs, err, env)
	}
	return abs
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// start runs a program until the test ends; its output goes to the test log
// when the test fails.
func start(t *testing.T, name, path string, args ...string) *harness.Process {
	t.Helper()
	p, err := harness.Start(name, path, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("---- %s output ----\n%s", name, p.Output())
		}
	})
	return p
}

func waitHTTP(t *testing.T, p *harness.Process, url string, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := p.WaitHTTP(ctx, url, want); err != nil {
		t.Fatal(err)
	}
}

// collector starts otelcol-streamstall with config (health_check merged in,
// and the extensions named enabled) and waits until it is ready; it is
// stopped when the test ends.
func collector(t *testing.T, config string, extensions ...string) *harness.Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := harness.StartCollector(ctx, binary(t, "STREAMSTALL_OTELCOL", "otelcol-streamstall"), t.TempDir(), config, extensions...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("---- otelcol-streamstall output ----\n%s", p.Output())
		}
	})
	return p
}

func startJaeger(t *testing.T) *harness.Jaeger {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	j, err := harness.StartJaeger(ctx, binary(t, "STREAMSTALL_JAEGER", "jaeger"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		j.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("---- jaeger output ----\n%s", j.Output())
		}
	})
	return j
}

func startSink(t *testing.T) *harness.Sink {
	t.Helper()
	s, err := harness.StartSink()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// eventually retries check until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %v", what, timeout, err)
}

func postJSON(ctx context.Context, url string, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

var errNotYet = errors.New("not yet")

// sinkAndMetrics is the part of the tests' collector configs that sends the
// traces to the test's OTLP sink (${SINK}, JSON, nothing retried or queued,
// so that what the sink holds is what the pipeline handed on) and the
// stall_metrics connector's metrics to a Prometheus endpoint (${PROM}).
const sinkAndMetrics = `connectors:
  stall_metrics:
    flush_interval: 1s
exporters:
` + sinkExporter + `  prometheus:
    endpoint: 127.0.0.1:${PROM}
`

// sinkExporter is the otlp_http exporter (under an exporters key) of the
// tests' collector configs that send their traces to the test's OTLP sink
// alone.
const sinkExporter = `  otlp_http:
    endpoint: ${SINK}
    encoding: json
    compression: none
    retry_on_failure:
      enabled: false
    sending_queue:
      enabled: false
`

var fill = harness.Fill

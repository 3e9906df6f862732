// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// idleCollector is a collector with nothing to do but answer its health
// check; its own metrics are as the file merged after it says.
const idleCollector = `
extensions:
  health_check:
    endpoint: 127.0.0.1:${HEALTH}
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${OTLP}
exporters:
  debug:
service:
  extensions: [health_check]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [debug]
`

// TestTwoCollectorsTelemetryPort checks docs/deployment.md's two-collector
// note: a second collector on the first one's telemetry port fails to
// start, and the block the note gives (its port moved to a free one)
// starts it with its metrics served.
func TestTwoCollectorsTelemetryPort(t *testing.T) {
	bin := binary(t, "STREAMSTALL_OTELCOL", "otelcol-streamstall")
	block := docBlock(t, "../docs/deployment.md", "Two collectors on one host", "yaml", 0).Text
	require.Contains(t, block, "port: 8889")
	shared := freePort(t) // stands for the default :8888, which another test may hold
	withPort := func(port int) string { return strings.ReplaceAll(block, "port: 8889", fmt.Sprintf("port: %d", port)) }
	run := func(telemetry string) (*harness.Process, error) {
		dir := t.TempDir()
		health := freePort(t)
		base, err := harness.WriteFile(dir, "otelcol.yaml", fill(idleCollector, "HEALTH", health, "OTLP", freePort(t)))
		require.NoError(t, err)
		tel, err := harness.WriteFile(dir, "telemetry.yaml", telemetry)
		require.NoError(t, err)
		p := start(t, "otelcol-streamstall "+filepath.Base(dir), bin, "--config", base, "--config", tel)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		return p, p.WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/", health), http.StatusOK)
	}
	metrics := func(port int) int {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	_, err := run(withPort(shared))
	require.NoError(t, err, "the first collector")
	assert.Equal(t, http.StatusOK, metrics(shared))

	second, err := run(withPort(shared))
	require.ErrorIs(t, err, harness.ErrExited, "a second collector on the same telemetry port fails")
	assert.Contains(t, second.Output(), "address already in use")

	own := freePort(t)
	_, err = run(withPort(own))
	require.NoError(t, err, "the second collector with the documented block")
	assert.Equal(t, http.StatusOK, metrics(own))
}

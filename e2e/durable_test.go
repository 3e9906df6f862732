// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// durableConfig is examples/persistent-queue.yaml on loopback ports, with a
// storage line that the in-memory variant leaves out.
const durableConfig = `
extensions:
  file_storage/queue:
    directory: ${DIR}
    create_directory: true
    timeout: 1s
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${OTLP}
processors:
  stall:
exporters:
  otlp_http/backend:
    endpoint: ${SINK}
    encoding: json
    compression: none
    sending_queue:
      enabled: true
      queue_size: 5000
${STORAGE}
    retry_on_failure:
      enabled: true
      initial_interval: 100ms
      max_interval: 1s
      max_elapsed_time: 0
service:
  pipelines:
    traces:
      receivers: [otlp]
      processors: [stall]
      exporters: [otlp_http/backend]
`

// TestPersistentQueueSurvivesSIGKILL queues spans for a backend that is
// down, kills the collector with SIGKILL, brings the backend up and starts
// the collector again on the same storage: with file_storage every accepted
// span arrives; with the in-memory queue none of them does, which is what
// docs/deployment.md says a SIGKILL loses.
func TestPersistentQueueSurvivesSIGKILL(t *testing.T) {
	const spans = 200
	for _, tc := range []struct {
		name       string
		storage    string
		wantQueued int
	}{
		{name: "file_storage", storage: "      storage: file_storage/queue", wantQueued: spans},
		{name: "in_memory", storage: "", wantQueued: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			otlp, sinkPort := freePort(t), freePort(t)
			cfg := fill(durableConfig, "DIR", filepath.Join(t.TempDir(), "queue"), "OTLP", otlp,
				"SINK", fmt.Sprintf("http://127.0.0.1:%d", sinkPort), "STORAGE", tc.storage)
			url := fmt.Sprintf("http://127.0.0.1:%d/v1/traces", otlp)

			first := collector(t, cfg, "file_storage/queue")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for i := range spans {
				postSpan(ctx, t, url, fmt.Sprintf("queued-%03d", i))
			}
			first.Kill()

			sink, err := harness.StartSinkAt(fmt.Sprintf("127.0.0.1:%d", sinkPort))
			require.NoError(t, err)
			t.Cleanup(func() { _ = sink.Close() })
			collector(t, cfg, "file_storage/queue")
			// A span sent after the restart shows that the new collector
			// delivers to the backend; what its queue kept follows within
			// seconds, and what it lost never comes.
			postSpan(ctx, t, url, "after-restart")
			eventually(t, time.Minute, "the span sent after the restart", func() error {
				if _, ok := sink.Span("after-restart"); !ok {
					return errNotYet
				}
				return nil
			})
			eventually(t, 30*time.Second, "the queued spans", func() error {
				if got := queuedSpans(sink); got != tc.wantQueued {
					return fmt.Errorf("%d of the %d queued spans delivered, want %d", got, spans, tc.wantQueued)
				}
				return nil
			})
		})
	}
}

func postSpan(ctx context.Context, t *testing.T, url, name string) {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "durable-test")
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName(name)
	var id [16]byte
	copy(id[:], name)
	sp.SetTraceID(pcommon.TraceID(id))
	sp.SetSpanID(pcommon.SpanID([8]byte(id[8:])))
	now := time.Now()
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-time.Second)))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
	require.NoError(t, err)
	status, resp, err := postJSON(ctx, url, body)
	require.NoError(t, err)
	require.Equal(t, 200, status, resp)
}

func queuedSpans(sink *harness.Sink) int {
	seen := map[string]bool{}
	for _, s := range sink.Spans() {
		if strings.HasPrefix(s.Name(), "queued-") {
			seen[s.Name()] = true
		}
	}
	return len(seen)
}

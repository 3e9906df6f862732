// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/semconv"
)

const sampleConfig = `
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${OTLP}
processors:
  groupbytrace:
    wait_duration: 500ms
  stall:
    infer_hedge_outcome: true
exporters:
  otlp_http:
    endpoint: ${SINK}
    encoding: json
service:
  pipelines:
    traces:
      receivers: [otlp]
      processors: [groupbytrace, stall]
      exporters: [otlp_http]
`

// TestSampleSpansWithCurl posts testdata/openllmetry-streams.json with curl,
// as docs/quickstart.md does, and checks what the processor made of it.
func TestSampleSpansWithCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	require.NoError(t, err, "curl is needed for this test (apt-get install curl)")
	sink := startSink(t)
	otlpPort := freePort(t)
	collector(t, fill(sampleConfig, "OTLP", otlpPort, "SINK", sink.URL))

	out, err := exec.Command(curl, "-sS", "--fail-with-body", "-H", "Content-Type: application/json",
		"--data-binary", "@../testdata/openllmetry-streams.json", fmt.Sprintf("http://127.0.0.1:%d/v1/traces", otlpPort)).CombinedOutput()
	require.NoError(t, err, string(out))

	eventually(t, 20*time.Second, "three spans at the sink", func() error {
		if n := len(sink.Spans()); n < 3 {
			return fmt.Errorf("%d spans: %w", n, errNotYet)
		}
		return nil
	})
	byAttempt := map[int64]map[string]any{}
	for _, sp := range sink.Spans() {
		a := sp.Attributes().AsRaw()
		assert.Equal(t, "chat-app", sp.Service)
		if attempt, ok := a[semconv.AttrHedgeAttempt].(int64); ok {
			byAttempt[attempt] = a
			continue
		}
		assert.EqualValues(t, 2, a[semconv.AttrStallCount])
		assert.Equal(t, 9000.0, a[semconv.AttrStallMs])
		assert.Equal(t, 250.0, a[semconv.AttrActiveGenerationMs])
		assert.Equal(t, 28.0, a[semconv.AttrActiveTPS], "(8 - 1) tokens over 250 ms")
	}
	require.Len(t, byAttempt, 2)
	assert.Equal(t, semconv.HedgeOutcomeLoser, byAttempt[0][semconv.AttrHedgeOutcome])
	assert.Equal(t, true, byAttempt[0][semconv.AttrHedgeLoser])
	assert.Equal(t, semconv.HedgeOutcomeWinner, byAttempt[1][semconv.AttrHedgeOutcome])
	assert.Equal(t, true, byAttempt[1][semconv.AttrHedgeOutcomeInferred])
}

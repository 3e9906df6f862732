// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// The guarded proxy with stall_timeout auto: ten times the learned p99.9
// content gap, never below a 300 ms floor, the floor until 8 gaps are in.
// Streams of 50 ms gaps teach it about 500 ms: above the floor, so a cut at
// the learned deadline cannot be the floor's.
const guardAutoConfig = `
receivers:
  sse_capture:
    proxy:
      endpoint: 127.0.0.1:${PROXY}
      upstream:
        endpoint: ${PRIMARY}
      guard:
        stall_timeout: auto
        auto_stall:
          multiple: ${MULTIPLE}
          floor: ${FLOOR}
          min_samples: ${MIN}
exporters:
` + sinkExporter + `service:
  pipelines:
    traces:
      receivers: [sse_capture]
      exporters: [otlp_http]
`

const (
	autoMultiple = 10
	autoFloor    = 300 * time.Millisecond
	// autoMinSamples gaps: two learning streams of four gaps each.
	autoMinSamples  = 8
	autoLearnScript = `{"ttft_ms":20,"gaps_ms":[50,50,50,50]}`
	// autoStallScript: two chunks, then a silence far past anything learned.
	autoStallScript = `{"ttft_ms":20,"gaps_ms":[50,20000]}`
)

// autoStream streams one chat completion through the proxy and returns the
// body and when each content line and the guard's error frame arrived.
func autoStream(ctx context.Context, t *testing.T, proxy, model, script string) (content []time.Time, errorAt time.Time, body string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxy+"/v1/chat/completions",
		strings.NewReader(fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, model)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(fakellm.HeaderScript, script)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		b.WriteString(line + "\n")
		switch {
		case strings.HasPrefix(line, "data:") && strings.Contains(line, `"error"`):
			errorAt = time.Now()
		case strings.HasPrefix(line, "data:") && strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`):
			content = append(content, time.Now())
		}
	}
	require.NoError(t, sc.Err())
	return content, errorAt, b.String()
}

// spansByStart waits for n spans of model at the sink and orders them by
// their start.
func spansByStart(t *testing.T, s *harness.Sink, model string, n int) []ptrace.Span {
	t.Helper()
	var out []ptrace.Span
	eventually(t, 20*time.Second, fmt.Sprintf("%d spans of %s at the sink", n, model), func() error {
		out = out[:0]
		for _, sp := range s.Spans() {
			if strAttr(sp.Span, semconv.AttrRequestModel) == model {
				out = append(out, sp.Span)
			}
		}
		if len(out) < n {
			return fmt.Errorf("%d of %d: %w", len(out), n, errNotYet)
		}
		return nil
	})
	require.Len(t, out, n)
	slices.SortFunc(out, func(a, b ptrace.Span) int { return cmp.Compare(a.StartTimestamp(), b.StartTimestamp()) })
	return out
}

func floatAttr(t *testing.T, sp ptrace.Span, key string) float64 {
	t.Helper()
	v, ok := sp.Attributes().Get(key)
	require.True(t, ok, "the span has no %s", key)
	return v.Double()
}

// maxGapMs is the longest gap between the span's content chunk events, as
// the proxy saw them: what its learner was given.
func maxGapMs(sp ptrace.Span) float64 {
	var prev, longest float64
	evs := sp.Events()
	for i := range evs.Len() {
		e := evs.At(i)
		if e.Name() != semconv.EventChunk {
			continue
		}
		at := float64(e.Timestamp()) / 1e6
		if prev > 0 {
			longest = max(longest, at-prev)
		}
		prev = at
	}
	return longest
}

// TestGuardAutoStallCutsAtTheLearnedDeadline runs stall_timeout: auto in the
// ocb-built collector: the first streams of a model are watched at the
// floor; once min_samples gaps are in, a silence is cut at ten times the
// learned p99.9 gap, which is above the floor, and the span records the
// deadline it was cut at.
func TestGuardAutoStallCutsAtTheLearnedDeadline(t *testing.T) {
	sink := startSink(t)
	primary := startFakellm(t)
	proxyPort := freePort(t)
	collector(t, fill(guardAutoConfig, "PROXY", proxyPort, "PRIMARY", primary, "SINK", sink.URL,
		"MULTIPLE", autoMultiple, "FLOOR", autoFloor, "MIN", autoMinSamples))
	proxy := fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const model = "e2e-guard-auto"

	// Two learning streams: 8 gaps, min_samples. Each one's gaps are
	// learned when its span is emitted, so the next waits for it.
	var learning []ptrace.Span
	for i := range 2 {
		content, errorAt, body := autoStream(ctx, t, proxy, model, autoLearnScript)
		assert.Len(t, content, 5, "stream %d: every chunk came", i)
		assert.True(t, errorAt.IsZero(), "stream %d: not cut: %s", i, body)
		assert.Contains(t, body, "data: [DONE]")
		learning = spansByStart(t, sink, model, i+1)
	}
	longest := 0.0
	for i, sp := range learning {
		assert.Equal(t, float64(autoFloor.Milliseconds()), floatAttr(t, sp, semconv.AttrStallTimeoutMs),
			"stream %d was watched at the floor: fewer than min_samples gaps were in", i)
		assert.Empty(t, strAttr(sp, semconv.AttrErrorType))
		longest = max(longest, maxGapMs(sp))
	}
	learned := autoMultiple * longest // with 8 gaps, the p99.9 is the longest
	t.Logf("longest learned gap %.1f ms: the learned stall timeout is about %.0f ms", longest, learned)
	require.Greater(t, learned, float64(autoFloor.Milliseconds())+50, "the learned timeout is above the floor, or the test tells nothing")

	content, errorAt, body := autoStream(ctx, t, proxy, model, autoStallScript)
	require.Len(t, content, 2, body)
	require.False(t, errorAt.IsZero(), "the silence was cut with the guard's error frame: %s", body)
	assert.Contains(t, body, "stall_timeout")
	silence := errorAt.Sub(content[1])
	t.Logf("cut %s after the last content chunk", silence)

	sp := spansByStart(t, sink, model, 3)[2]
	used := floatAttr(t, sp, semconv.AttrStallTimeoutMs)
	t.Logf("the span says stall_timeout_ms %.1f", used)
	assert.InEpsilon(t, learned, used, 0.03, "the deadline used is the learned one (DDSketch: 1 %)")
	assert.Equal(t, "stall_timeout", strAttr(sp, semconv.AttrErrorType))
	assert.InDelta(t, used, float64(silence.Milliseconds()), 150, "cut at the learned deadline")
	assert.Greater(t, silence, autoFloor+50*time.Millisecond, "not at the floor")
}

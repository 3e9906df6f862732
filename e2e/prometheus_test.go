// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/testbed/dashboard"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// The proxy feeds stall and stall_metrics; a real Prometheus scrapes the
// prometheus exporter. groupbytrace lets the processor infer which attempt
// of a hedged pair won. max_series is small so that the last calls of the
// workload go to the overflow series.
const prometheusPipelineConfig = `
receivers:
  sse_capture:
    proxy:
      endpoint: 127.0.0.1:${PROXY}
      upstream:
        endpoint: ${FAKELLM}
processors:
  groupbytrace:
    wait_duration: 1s
  stall:
    stall_threshold: 500ms
    infer_hedge_outcome: true
connectors:
  stall_metrics:
    flush_interval: 1s
    max_series: 6
exporters:
  prometheus:
    endpoint: 127.0.0.1:${PROM}
service:
  pipelines:
    traces:
      receivers: [sse_capture]
      processors: [groupbytrace, stall]
      exporters: [stall_metrics]
    metrics:
      receivers: [stall_metrics]
      exporters: [prometheus]
`

const rulesFile = "../docs/prometheus/streamstall-rules.yaml"

// prometheusBinary is Debian's prometheus (make prometheus installs it) or
// STREAMSTALL_PROMETHEUS.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("STREAMSTALL_PROMETHEUS"); p != "" {
		return p
	}
	p, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus is not installed (%v): run these tests with `make e2e`, which installs Debian's prometheus package, or set STREAMSTALL_PROMETHEUS", err)
	}
	return p
}

func startPrometheus(t *testing.T, targets ...string) *harness.Prometheus {
	t.Helper()
	rules, err := filepath.Abs(rulesFile)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := harness.StartPrometheus(ctx, prometheusBinary(t), t.TempDir(), "otelcol-streamstall", targets, []string{rules})
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("---- prometheus output ----\n%s", p.Output())
		}
	})
	return p
}

// stream sends one streaming request through the proxy and reads the answer
// to its end; api is "openai" (chat completions) or "anthropic" (messages).
func stream(ctx context.Context, proxy, api, model, script string, hdr map[string]string) error {
	path, body, end := "/v1/chat/completions",
		fmt.Sprintf(`{"model":%q,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, model),
		"data: [DONE]"
	if api == "anthropic" {
		path, body, end = "/v1/messages",
			fmt.Sprintf(`{"model":%q,"max_tokens":256,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, model),
			"message_stop"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxy+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-e2e")
	req.Header.Set(fakellm.HeaderScript, script)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), end) {
		return fmt.Errorf("%s %s: status %d, body %q", api, model, resp.StatusCode, b)
	}
	return nil
}

func traceID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// The stall schedule of one wave: three calls with one 1500 ms stall, one
// with a 1500 ms and a 3000 ms stall (threshold 500 ms).
const (
	oneStall  = `{"ttft_ms":50,"gaps_ms":[20,20,1500,20,20]}`
	twoStalls = `{"ttft_ms":50,"gaps_ms":[20,1500,20,3000,20]}`
	steady    = `{"ttft_ms":30,"gaps_ms":[20,20,20,20]}`
)

// wave runs one round of the workload concurrently: four stalled calls,
// two steady ones, one Anthropic call, and two hedged pairs (in one the
// hedge wins on TTFT, in the other the primary does). Winners only count as
// calls: 9 calls and 4 hedge attempts per wave.
func wave(ctx context.Context, t *testing.T, proxy string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	run := func(delay time.Duration, api, model, script string, hdr map[string]string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(delay)
			errs <- stream(ctx, proxy, api, model, script, hdr)
		}()
	}
	for range 3 {
		run(0, "openai", "gpt-stall", oneStall, nil)
	}
	run(0, "openai", "gpt-stall", twoStalls, nil)
	for range 2 {
		run(0, "openai", "gpt-steady", steady, nil)
	}
	run(0, "anthropic", "claude-steady", steady, nil)
	for _, primaryTTFT := range []int{700, 50} { // the hedge wins, then the primary
		tp := "00-" + traceID(t) + "-00f067aa0ba902b7-01"
		group := traceID(t)[:12]
		run(0, "openai", "gpt-hedge", fmt.Sprintf(`{"ttft_ms":%d,"gaps_ms":[10,10]}`, primaryTTFT), map[string]string{
			"traceparent": tp, "baggage": "llm.hedge.group_id=" + group + ",llm.hedge.attempt=0",
		})
		run(100*time.Millisecond, "openai", "gpt-hedge", `{"ttft_ms":50,"gaps_ms":[10,10]}`, map[string]string{
			"traceparent": tp, "baggage": "llm.hedge.group_id=" + group + ",llm.hedge.attempt=1,llm.hedge.trigger=ttft",
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// scalar evaluates expr and returns its one float value.
func scalar(ctx context.Context, p *harness.Prometheus, expr string) (float64, error) {
	r, err := p.Query(ctx, expr)
	if err != nil {
		return 0, err
	}
	if len(r.Result) != 1 {
		return 0, fmt.Errorf("%s: %d results, want 1", expr, len(r.Result))
	}
	v, ok := r.Result[0].Float()
	if !ok {
		return 0, fmt.Errorf("%s: not a float: %v", expr, r.Result[0])
	}
	return v, nil
}

func waitValue(ctx context.Context, t *testing.T, p *harness.Prometheus, expr string, want float64) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("%s == %v", expr, want), func() error {
		v, err := scalar(ctx, p, expr)
		if err == nil && v != want {
			err = fmt.Errorf("%v", v)
		}
		return err
	})
}

// grafanaRegex formats the values of a multi-value variable set to All as
// Grafana does for Prometheus: regex-escaped, joined into (a|b).
func grafanaRegex(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = regexp.QuoteMeta(v)
	}
	if len(q) == 1 {
		return q[0]
	}
	return "(" + strings.Join(q, "|") + ")"
}

// rateInterval stands in for Grafana's $__rate_interval: a window that holds
// the whole workload.
const rateInterval = "5m"

// expectedQuantile is the q-quantile of values as Prometheus' histogram
// quantile finds it: the value of rank ceil(q*n) (Prometheus interpolates
// inside that observation's bucket, which at scale 6 is 1.1 % wide).
func expectedQuantile(values []float64, q float64) float64 {
	s := slices.Clone(values)
	slices.Sort(s)
	return s[int(math.Ceil(q*float64(len(s))))-1]
}

// recordedStalls reads fakellm's request log: the gaps above threshold
// between the content chunks of model's calls, in seconds, as sent.
func recordedStalls(ctx context.Context, t *testing.T, fake, model string, threshold time.Duration) []float64 {
	t.Helper()
	var reqs []fakellm.Request
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fake+"/_fakellm/requests", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&reqs))
	var stalls []float64
	for _, r := range reqs {
		if r.Model != model {
			continue
		}
		for i := 1; i < len(r.ChunkTimes); i++ {
			if gap := r.ChunkTimes[i].Sub(r.ChunkTimes[i-1]); gap > threshold {
				stalls = append(stalls, gap.Seconds())
			}
		}
	}
	return stalls
}

// TestPrometheusQueries runs a known workload through the ocb-built
// collector, has a real Prometheus (native histograms on) scrape it, and
// evaluates every PromQL expression of the dashboard and the docs through
// Prometheus' HTTP API: each must return data. The stall quantiles land
// within 2 % of the workload's, and the alerting and recording rules load
// and evaluate.
func TestPrometheusQueries(t *testing.T) {
	fake := startFakellm(t)
	proxyPort, promPort := freePort(t), freePort(t)
	collector(t, fill(prometheusPipelineConfig, "PROXY", proxyPort, "FAKELLM", fake, "PROM", promPort))
	prom := startPrometheus(t, fmt.Sprintf("127.0.0.1:%d", promPort))
	proxy := fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// Three waves, each scraped before the next, so every counter and
	// histogram grows inside the rate windows.
	for w := 1; w <= 3; w++ {
		wave(ctx, t, proxy)
		waitValue(ctx, t, prom, `sum(llm_stream_calls_total)`, float64(9*w))
		waitValue(ctx, t, prom, `sum(llm_hedge_attempts_total)`, float64(4*w))
	}
	// Four more models than max_series leaves room for: the last go to the
	// overflow series.
	for i := range 4 {
		require.NoError(t, stream(ctx, proxy, "openai", fmt.Sprintf("gpt-overflow-%d", i), steady, nil))
	}
	eventually(t, 60*time.Second, "the overflow series is scraped", func() error {
		v, err := scalar(ctx, prom, `sum(llm_stream_calls_total{otel_metric_overflow="true"})`)
		if err == nil && v < 1 {
			err = fmt.Errorf("%v", v)
		}
		return err
	})
	waitValue(ctx, t, prom, `sum(llm_stream_calls_total)`, 9*3+4)

	targets, err := prom.Targets(ctx)
	require.NoError(t, err)
	require.Len(t, targets, 1)
	assert.Equal(t, "up", targets[0].Health, targets[0].LastError)

	t.Run("stall quantiles", func(t *testing.T) {
		stalls := recordedStalls(ctx, t, fake, "gpt-stall", 500*time.Millisecond)
		require.Len(t, stalls, 15, "3 waves of five stalls")
		for _, s := range stalls {
			require.True(t, math.Abs(s-1.5) < 0.1 || math.Abs(s-3) < 0.1, "fakellm kept its schedule: %v", stalls)
		}
		for _, q := range []float64{0.5, 0.95} {
			want := expectedQuantile(stalls, q)
			// Every stall of the three waves.
			got, err := scalar(ctx, prom, fmt.Sprintf(`histogram_quantile(%v, sum(llm_stream_stall_duration_seconds{gen_ai_request_model="gpt-stall"}))`, q))
			require.NoError(t, err)
			assert.InEpsilon(t, want, got, 0.02, "p%v of all stalls", q*100)
			t.Logf("p%v: workload %.4f s, Prometheus %.4f s (all stalls)", q*100, want, got)
			// The dashboard's form: a rate over the window (waves alike).
			got, err = scalar(ctx, prom, fmt.Sprintf(`histogram_quantile(%v, sum(rate(llm_stream_stall_duration_seconds{gen_ai_request_model="gpt-stall"}[%s])))`, q, rateInterval))
			require.NoError(t, err)
			assert.InEpsilon(t, want, got, 0.02, "p%v of the stall rate", q*100)
			t.Logf("p%v: workload %.4f s, Prometheus %.4f s (rate over %s)", q*100, want, got, rateInterval)
		}
	})

	t.Run("dashboard and docs", func(t *testing.T) {
		exprs, vars, err := dashboard.Queries("../docs/grafana/streamstall.json")
		require.NoError(t, err)
		require.NotEmpty(t, exprs)
		// Resolve the variables as Grafana does with All selected, in order
		// (a variable's query may use the ones before it).
		values := map[string]string{}
		subst := func(expr string) string {
			r := []string{"$__rate_interval", rateInterval}
			for name, v := range values {
				r = append(r, "${"+name+"}", v, "$"+name, v)
			}
			return strings.NewReplacer(r...).Replace(expr)
		}
		for _, v := range vars {
			require.NotEmpty(t, v.Label, "variable %s is not label_values", v.Name)
			got, err := prom.LabelValues(ctx, v.Label, subst(v.Selector))
			require.NoError(t, err, "variable %s", v.Name)
			require.NotEmpty(t, got, "variable %s: label_values(%s, %s) is empty", v.Name, subst(v.Selector), v.Label)
			values[v.Name] = grafanaRegex(got)
		}
		type source struct{ file, expr string }
		var all []source
		for _, e := range exprs {
			all = append(all, source{"docs/grafana/streamstall.json", subst(e)})
		}
		for _, doc := range []string{"docs/grafana.md", "docs/deployment.md"} {
			es, err := dashboard.MarkdownPromQL("../" + doc)
			require.NoError(t, err)
			require.NotEmpty(t, es, doc)
			for _, e := range es {
				all = append(all, source{doc, e})
			}
		}
		for _, s := range all {
			require.NotContains(t, s.expr, "$", "%s: a variable left unresolved", s.file)
			r, err := prom.Query(ctx, s.expr)
			if !assert.NoError(t, err, "%s: %s", s.file, s.expr) {
				continue
			}
			assert.Empty(t, r.Warnings, "%s: %s", s.file, s.expr)
			assert.True(t, hasData(r), "%s: no data for %s: %+v", s.file, s.expr, r.Result)
			t.Logf("%s: %d series: %s", s.file, len(r.Result), abbreviate(s.expr))
		}
		t.Logf("%d expressions evaluated", len(all))
	})

	t.Run("rules", func(t *testing.T) {
		abs, err := filepath.Abs(rulesFile)
		require.NoError(t, err)
		var groups []harness.RuleGroup
		eventually(t, 30*time.Second, "every rule evaluated without error", func() error {
			if groups, err = prom.Rules(ctx); err != nil {
				return err
			}
			n := 0
			for _, g := range groups {
				for _, r := range g.Rules {
					if r.Health != "ok" {
						return fmt.Errorf("group %s rule %s: health %q %s", g.Name, r.Name, r.Health, r.LastError)
					}
					n++
				}
			}
			if n == 0 {
				return errNotYet
			}
			return nil
		})
		require.Len(t, groups, 3) // recording, the alerts over them, the proxy alert over the collector's own metrics
		for _, g := range groups {
			assert.Equal(t, abs, g.File)
			for _, r := range g.Rules {
				if r.Type != "recording" {
					continue
				}
				res, err := prom.Query(ctx, r.Name)
				require.NoError(t, err)
				assert.True(t, hasData(res), "recording rule %s has no data: %+v", r.Name, res.Result)
			}
		}
		// Every call of gpt-stall stalled: its stalled-call alert is
		// pending (it fires after 10 minutes), gpt-steady's is not.
		eventually(t, 30*time.Second, "LLMStreamStalledCallRatioHigh pending for gpt-stall only", func() error {
			if groups, err = prom.Rules(ctx); err != nil {
				return err
			}
			var models []string
			for _, g := range groups {
				for _, r := range g.Rules {
					if r.Name != "LLMStreamStalledCallRatioHigh" {
						continue
					}
					for _, a := range r.Alerts {
						if a.State == "pending" {
							models = append(models, a.Labels["gen_ai_request_model"])
						}
					}
				}
			}
			if !slices.Equal(models, []string{"gpt-stall"}) {
				return fmt.Errorf("pending for %v", models)
			}
			return nil
		})
	})
}

// hasData reports whether an instant query returned at least one sample
// that is a number (not NaN) or a histogram.
func hasData(r harness.QueryResult) bool {
	for _, s := range r.Result {
		if len(s.Histogram) == 2 {
			return true
		}
		if v, ok := s.Float(); ok && !math.IsNaN(v) {
			return true
		}
	}
	return false
}

func abbreviate(s string) string {
	if len(s) > 110 {
		return s[:110] + "..."
	}
	return s
}

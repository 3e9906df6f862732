// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExprMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`histogram_quantile(0.95, sum by (gen_ai_request_model, le) (rate(ttft_seconds{service_name=~"$service", x="a{b}[c]"}[$__rate_interval])))`: {"ttft_seconds"},
		`sum without (instance) (rate(a_total[5m] offset 1h)) / on (job) group_left (model) sum(rate(b_total{s!="1e3"}[1m]))`:                       {"a_total", "b_total"},
		`histogram_sum(rate(x[5m])) / histogram_count(rate(x[5m])) > bool 0.5 and y unless z`:                                                       {"x", "x", "y", "z"},
		`sum(rate(calls_total{stalled="true"}[${__range}])) or vector(0) * 1e-3 + Inf`:                                                              {"calls_total"},
		`topk(5, count_values("v", up)) + quantile(0.9, w) + atan2(1, 2) + 0x1f`:                                                                    {"up", "w"},
		`{__name__="hidden"}`: nil,
		`ns:recording:rule`:   {"ns:recording:rule"},
	} {
		got, err := ExprMetricNames(expr)
		require.NoError(t, err, expr)
		assert.Equal(t, want, got, expr)
	}
	for _, bad := range []string{`rate(x{a="b"[5m])`, `sum by (a (x)`, `x[5m`} {
		_, err := ExprMetricNames(bad)
		assert.Error(t, err, bad)
	}
}

func TestMetricNames(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "d.json")
	require.NoError(t, os.WriteFile(path, []byte(`{
	  "panels": [
	    {"type": "row", "panels": [{"targets": [{"expr": "rate(nested_total[5m])"}]}]},
	    {"targets": [{"expr": "histogram_quantile(0.5, sum(rate(h_seconds[5m])))"}, {"expr": ""}]},
	    {"type": "text"}
	  ],
	  "templating": {"list": [
	    {"name": "service", "type": "query", "query": "label_values(calls_total{a=\"b\"}, service_name)"},
	    {"name": "model", "type": "query", "query": {"query": "label_values(other_total, gen_ai_request_model)", "refId": "x"}},
	    {"name": "label", "type": "query", "query": "label_values(service_name)"},
	    {"name": "result", "type": "query", "query": "query_result(topk(3, q_total))"},
	    {"name": "DS", "type": "datasource", "query": "prometheus"}
	  ]}
	}`), 0o600))
	names, err := MetricNames(path)
	require.NoError(t, err)
	assert.Equal(t, []string{"calls_total", "h_seconds", "nested_total", "other_total", "q_total"}, names)

	_, err = MetricNames(filepath.Join(dir, "missing.json"))
	assert.Error(t, err)
	require.NoError(t, os.WriteFile(path, []byte(`{"panels": [`), 0o600))
	_, err = MetricNames(path)
	assert.Error(t, err)
}

func TestPrometheusName(t *testing.T) {
	// As seen in a scrape of contrib's prometheus exporter v0.165.1.
	assert.Equal(t, "gen_ai_client_operation_time_to_first_chunk_seconds", PrometheusName("gen_ai.client.operation.time_to_first_chunk", "s", false))
	assert.Equal(t, "llm_stream_calls_total", PrometheusName("llm.stream.calls", "{call}", true))
	assert.Equal(t, "llm_hedge_attempts_total", PrometheusName("llm.hedge.attempts", "{attempt}", true))
	assert.Equal(t, "llm_hedge_wasted_output_tokens_total", PrometheusName("llm.hedge.wasted_output_tokens", "{token}", true))
}

func TestAlternative(t *testing.T) {
	alt, ok := Alternative("gen_ai_client_operation_time_to_first_chunk_seconds")
	assert.True(t, ok)
	assert.Equal(t, "gen_ai_client_inference_time_to_first_chunk_seconds", alt)
	back, ok := Alternative(alt)
	assert.True(t, ok)
	assert.Equal(t, "gen_ai_client_operation_time_to_first_chunk_seconds", back)
	alt, ok = Alternative("gen_ai_client_inference_time_per_output_chunk_seconds")
	assert.True(t, ok)
	assert.Equal(t, "gen_ai_client_operation_time_per_output_chunk_seconds", alt)
	_, ok = Alternative("llm_stream_calls_total")
	assert.False(t, ok)
}

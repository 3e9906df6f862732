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

func TestMarkdownPromQL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	require.NoError(t, os.WriteFile(path, []byte("# Title\n\n"+
		"```promql\n"+
		"# Ratio, per model\n"+
		"  sum by (m) (rate(a_total{s=\"true\"}[5m]))\n"+
		"/ sum by (m) (rate(a_total[5m]))\n"+
		"\n"+
		"# p95\n"+
		"histogram_quantile(0.95, sum(rate(h_seconds[5m])))\n"+
		"```\n\n"+
		"```yaml\nnot: promql\n```\n\n"+
		"- a list item:\n\n"+
		"  ```promql\n"+
		"  sum(x)\n"+
		"\n"+
		"  sum(y)\n"+
		"  ```\n"), 0o600))
	got, err := MarkdownPromQL(path)
	require.NoError(t, err)
	assert.Equal(t, []string{
		`sum by (m) (rate(a_total{s="true"}[5m])) / sum by (m) (rate(a_total[5m]))`,
		`histogram_quantile(0.95, sum(rate(h_seconds[5m])))`,
		`sum(x)`,
		`sum(y)`,
	}, got)

	require.NoError(t, os.WriteFile(path, []byte("```promql\nsum(x)\n"), 0o600))
	_, err = MarkdownPromQL(path)
	assert.ErrorContains(t, err, "unclosed")
	_, err = MarkdownPromQL(filepath.Join(t.TempDir(), "missing.md"))
	assert.Error(t, err)
}

func TestQueries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.json")
	require.NoError(t, os.WriteFile(path, []byte(`{
	  "panels": [
	    {"type": "row", "panels": [{"targets": [{"expr": "rate(nested_total[5m])"}]}]},
	    {"targets": [{"expr": "sum(rate(h_seconds{s=~\"$service\"}[$__rate_interval]))"}, {"expr": ""}]}
	  ],
	  "templating": {"list": [
	    {"name": "service", "type": "query", "query": {"query": "label_values(calls_total, service_name)"}},
	    {"name": "model", "type": "query", "query": "label_values(calls_total{service_name=~\"$service\"}, model)"},
	    {"name": "job", "type": "query", "query": "label_values(job)"},
	    {"name": "top", "type": "query", "query": "query_result(topk(3, x))"},
	    {"name": "c", "type": "custom", "query": "a,b"}
	  ]}
	}`), 0o600))
	exprs, vars, err := Queries(path)
	require.NoError(t, err)
	assert.Equal(t, []string{"rate(nested_total[5m])", `sum(rate(h_seconds{s=~"$service"}[$__rate_interval]))`}, exprs)
	assert.Equal(t, []Variable{
		{Name: "service", Selector: "calls_total", Label: "service_name"},
		{Name: "model", Selector: `calls_total{service_name=~"$service"}`, Label: "model"},
		{Name: "job", Label: "job"},
		{Name: "top", Selector: "topk(3, x)"},
	}, vars)
}

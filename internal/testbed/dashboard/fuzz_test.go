// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"regexp"
	"strings"
	"testing"
)

var metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// FuzzExprMetricNames: any input gives names or an error, never a panic,
// and every name is a valid Prometheus metric name.
func FuzzExprMetricNames(f *testing.F) {
	for _, seed := range []string{
		`histogram_quantile(0.95, sum by (le) (rate(x_seconds{a=~"$v"}[$__rate_interval])))`,
		`sum without (a) (b_total offset 5m) / on (c) group_left (d) e`,
		`{__name__="x"}`, `x[`, `"unterminated`, `$`, `by (`, `1e3 + .5 + 0x1f`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		names, err := ExprMetricNames(expr)
		if err != nil {
			return
		}
		for _, n := range names {
			if !metricName.MatchString(n) {
				t.Fatalf("%q gave metric name %q", expr, n)
			}
		}
	})
}

// FuzzMarkdownPromQL: any document gives expressions or an error, never a
// panic; every expression is one trimmed, non-empty line that is no
// comment, and there are never more expressions than lines.
func FuzzMarkdownPromQL(f *testing.F) {
	for _, seed := range []string{
		"```promql\n# c\n  sum(a)\n/ sum(b)\n\nrate(x[5m])\n```\n",
		"  ```promql\n  x\n  ```\n```yaml\na: b\n```\n",
		"```promql\nunclosed", "```promql\r\nx\r\n```", "",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		exprs, err := markdownPromQL(doc)
		if err != nil {
			return
		}
		if len(exprs) > strings.Count(string(doc), "\n")+1 {
			t.Fatalf("%d expressions from %d lines", len(exprs), strings.Count(string(doc), "\n")+1)
		}
		for _, e := range exprs {
			if e == "" || e != strings.TrimSpace(e) || strings.ContainsAny(e, "\n") || strings.HasPrefix(e, "#") {
				t.Fatalf("expression %q from %q", e, doc)
			}
		}
	})
}

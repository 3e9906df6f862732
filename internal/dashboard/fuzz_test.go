package dashboard

import (
	"regexp"
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

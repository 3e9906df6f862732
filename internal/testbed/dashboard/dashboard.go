// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package dashboard reads the Prometheus queries of a Grafana dashboard and
// of the docs' ```promql blocks, and the metric names they use, so that
// tests can hold them to the metrics the connector really emits: by
// translation (unit test), in a real scrape and on a real Prometheus
// (end-to-end tests).
package dashboard // import "github.com/streamstall/streamstall/internal/testbed/dashboard"

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// MetricNames returns the sorted, distinct metric names used by the PromQL
// of the dashboard at path: every panel target's expr (rows included) and
// every query variable (label_values(selector, label), query_result(expr) or
// plain PromQL).
func MetricNames(path string) ([]string, error) {
	exprs, err := Expressions(path)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, e := range exprs {
		names, err := ExprMetricNames(e)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			seen[n] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// Expressions returns the PromQL of the dashboard at path, in order: every
// panel target's expr (rows included), then the query of every query
// variable.
func Expressions(path string) ([]string, error) {
	d, err := load(path)
	if err != nil {
		return nil, err
	}
	exprs := d.panelExprs()
	vars, err := d.variables()
	if err != nil {
		return nil, err
	}
	for _, v := range vars {
		if v.Selector != "" {
			exprs = append(exprs, v.Selector)
		}
	}
	return exprs, nil
}

// genAIAlternatives pairs the Prometheus names of the two GenAI histograms
// under the connector's metric_names stable (semantic conventions v1.41)
// and latest (the conventions' main branch).
var genAIAlternatives = map[string]string{
	"gen_ai_client_operation_time_to_first_chunk_seconds":   "gen_ai_client_inference_time_to_first_chunk_seconds",
	"gen_ai_client_operation_time_per_output_chunk_seconds": "gen_ai_client_inference_time_per_output_chunk_seconds",
	"gen_ai_client_inference_time_to_first_chunk_seconds":   "gen_ai_client_operation_time_to_first_chunk_seconds",
	"gen_ai_client_inference_time_per_output_chunk_seconds": "gen_ai_client_operation_time_per_output_chunk_seconds",
}

// Alternative returns the name the same GenAI histogram has under the other
// metric_names mode; ok is false for every other metric. The dashboard
// queries both (rate(a) or rate(b)), so a scrape needs only one of them.
func Alternative(name string) (alt string, ok bool) {
	alt, ok = genAIAlternatives[name]
	return alt, ok
}

type dashboard struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

var (
	labelValues = regexp.MustCompile(`^\s*label_values\s*\((.*)\)\s*$`)
	queryResult = regexp.MustCompile(`^\s*query_result\s*\((.*)\)\s*$`)
)

type varQuery struct{ selector, label string }

// variableQuery returns the PromQL inside a query variable (Grafana stores
// it as a string or, since version 9, as {"query": "..."}) and, for
// label_values, the label.
func variableQuery(raw json.RawMessage) (varQuery, error) {
	if len(raw) == 0 {
		return varQuery{}, nil
	}
	var q string
	if err := json.Unmarshal(raw, &q); err != nil {
		var obj struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return varQuery{}, fmt.Errorf("query is neither a string nor an object: %w", err)
		}
		q = obj.Query
	}
	if m := labelValues.FindStringSubmatch(q); m != nil {
		// label_values(label) names no metric; label_values(selector, label)
		// names the selector's.
		i := strings.LastIndex(m[1], ",")
		if i < 0 {
			return varQuery{label: strings.TrimSpace(m[1])}, nil
		}
		return varQuery{selector: strings.TrimSpace(m[1][:i]), label: strings.TrimSpace(m[1][i+1:])}, nil
	}
	if m := queryResult.FindStringSubmatch(q); m != nil {
		return varQuery{selector: m[1]}, nil
	}
	return varQuery{selector: q}, nil
}

// promqlToken matches, in order: strings, numbers and durations (5m, 1e3,
// 0x1f), Grafana variables, identifiers, and any other single character.
var promqlToken = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`" +
	`|[0-9][0-9a-zA-Z_.]*|\.[0-9][0-9a-zA-Z_]*|\$\{[^}]*\}|\$[a-zA-Z0-9_]+|[a-zA-Z_:][a-zA-Z0-9_:]*|\S`)

// keywords are PromQL words that are neither functions nor metric names.
var keywords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true, "Inf": true, "NaN": true,
}

// labelLists are the keywords followed by a parenthesised list of labels.
var labelLists = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// ExprMetricNames returns the metric names a PromQL expression selects, in
// order of appearance: the identifiers that are not functions, keywords,
// label names (inside {...} or after by, without, on, ignoring, group_left,
// group_right) nor inside a range [...]. Unbalanced brackets are an error.
func ExprMetricNames(expr string) ([]string, error) {
	tokens := promqlToken.FindAllString(expr, -1)
	var names []string
	for i := 0; i < len(tokens); i++ {
		tok := tokens[i]
		switch {
		case tok == "{" || tok == "[":
			end, err := closing(tokens, i)
			if err != nil {
				return nil, fmt.Errorf("%w in %q", err, expr)
			}
			i = end
		case labelLists[tok] && i+1 < len(tokens) && tokens[i+1] == "(":
			end, err := closing(tokens, i+1)
			if err != nil {
				return nil, fmt.Errorf("%w in %q", err, expr)
			}
			i = end
		case !isIdentifier(tok) || keywords[tok]:
		case i+1 < len(tokens) && tokens[i+1] == "(":
			// A function call.
		default:
			names = append(names, tok)
		}
	}
	return names, nil
}

// closing returns the index of the bracket that closes tokens[open].
func closing(tokens []string, open int) (int, error) {
	pairs := map[string]string{"{": "}", "[": "]", "(": ")"}
	want := pairs[tokens[open]]
	depth := 0
	for i := open; i < len(tokens); i++ {
		switch tokens[i] {
		case tokens[open]:
			depth++
		case want:
			depth--
			if depth == 0 {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("unclosed %q", tokens[open])
}

func isIdentifier(tok string) bool {
	c := tok[0]
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// PrometheusName is the name contrib's prometheus exporter (v0.165.1, default
// translation strategy UnderscoreEscapingWithSuffixes) gives an OTLP metric
// of the connector: characters outside [a-zA-Z0-9_:] become _, the unit "s"
// appends _seconds, a unit in braces ({call}) appends nothing, and a
// monotonic sum (a counter) appends _total. It covers the connector's units,
// not every unit of the translator.
func PrometheusName(name, unit string, counter bool) string {
	var b strings.Builder
	for _, r := range name {
		if r == '_' || r == ':' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if unit == "s" {
		b.WriteString("_seconds")
	}
	if counter {
		b.WriteString("_total")
	}
	return b.String()
}

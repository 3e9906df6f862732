// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

func load(path string) (*dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read dashboard: %w", err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("parse dashboard %s: %w", path, err)
	}
	return &d, nil
}

// panelExprs returns every non-empty target expr, rows' panels included, in
// the dashboard's order.
func (d *dashboard) panelExprs() []string {
	var exprs []string
	var walk func([]panel)
	walk = func(panels []panel) {
		for _, p := range panels {
			for _, t := range p.Targets {
				if t.Expr != "" {
					exprs = append(exprs, t.Expr)
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return exprs
}

// Variable is a query template variable of a dashboard.
type Variable struct {
	Name string
	// Selector is the PromQL of the query: the series selector of
	// label_values(selector, label), the expr of query_result(expr), or the
	// query itself; empty for label_values(label).
	Selector string
	// Label is the label of label_values(...); empty for other queries.
	Label string
}

func (d *dashboard) variables() ([]Variable, error) {
	var vars []Variable
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := variableQuery(v.Query)
		if err != nil {
			return nil, fmt.Errorf("variable %q: %w", v.Name, err)
		}
		vars = append(vars, Variable{Name: v.Name, Selector: q.selector, Label: q.label})
	}
	return vars, nil
}

// Queries returns the PromQL of a dashboard as Grafana sends it, before
// template variables are replaced: every panel target's expr (rows
// included) in the dashboard's order, and its query variables.
func Queries(path string) ([]string, []Variable, error) {
	d, err := load(path)
	if err != nil {
		return nil, nil, err
	}
	vars, err := d.variables()
	if err != nil {
		return nil, nil, err
	}
	return d.panelExprs(), vars, nil
}

// MarkdownPromQL returns the PromQL expressions of the fenced ```promql
// blocks of a Markdown file (indented blocks, as in list items, included).
// Inside a block, lines starting with # are comments, and blank lines
// separate expressions; the lines of one expression are joined by a space.
func MarkdownPromQL(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	exprs, err := markdownPromQL(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return exprs, nil
}

func markdownPromQL(b []byte) ([]string, error) {
	var exprs, cur []string
	in := false
	flush := func() {
		if len(cur) > 0 {
			exprs = append(exprs, strings.Join(cur, " "))
			cur = nil
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1) // a line may be as long as the document
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case !in && line == "```promql":
			in = true
		case !in:
		case strings.HasPrefix(line, "```"):
			flush()
			in = false
		case line == "":
			flush()
		case strings.HasPrefix(line, "#"):
		default:
			cur = append(cur, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if in {
		return nil, fmt.Errorf("unclosed ```promql block")
	}
	return exprs, nil
}

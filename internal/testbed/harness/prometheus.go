// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// prometheusConfig scrapes the targets every second and evaluates the rule
// files every second, so that a test sees its workload within seconds.
const prometheusConfig = `
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: ${RULES}
scrape_configs:
  - job_name: ${JOB}
    static_configs:
      - targets: ${TARGETS}
`

// Prometheus is a running Prometheus server on loopback.
type Prometheus struct {
	*Process
	// URL is the base URL of its HTTP API.
	URL string
}

// StartPrometheus writes a config into dir and starts the prometheus binary
// with native histograms on (Prometheus 2.40 to 3.8 need the feature flag;
// with it, Prometheus asks for the protobuf exposition, the one format that
// carries native histograms), storage in dir, listening on a free loopback
// port. job names the scrape job of targets (host:port); ruleFiles are
// loaded as rule_files. It returns once Prometheus is ready.
func StartPrometheus(ctx context.Context, bin, dir, job string, targets, ruleFiles []string) (*Prometheus, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	quoted := func(ss []string) string {
		b, _ := json.Marshal(append([]string{}, ss...)) // a JSON list is a YAML flow sequence
		return string(b)
	}
	cfg, err := WriteFile(dir, "prometheus.yml", Fill(prometheusConfig, "RULES", quoted(ruleFiles), "JOB", job, "TARGETS", quoted(targets)))
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p, err := Start("prometheus", bin,
		"--config.file="+cfg,
		"--storage.tsdb.path="+dir+"/data",
		"--web.listen-address="+addr,
		"--enable-feature=native-histograms",
		"--log.level=warn")
	if err != nil {
		return nil, err
	}
	pr := &Prometheus{Process: p, URL: "http://" + addr}
	if err := p.WaitHTTP(ctx, pr.URL+"/-/ready", http.StatusOK); err != nil {
		p.Stop(5 * time.Second)
		return nil, err
	}
	return pr, nil
}

// Sample is one element of an instant query's result: a float sample or a
// native histogram sample.
type Sample struct {
	Metric    map[string]string `json:"metric"`
	Value     []any             `json:"value"`     // [unix time, "float"]
	Histogram []any             `json:"histogram"` // [unix time, {count, sum, buckets}]
}

// Float is the sample's value; ok is false for a histogram sample or an
// unparsable value.
func (s Sample) Float() (float64, bool) {
	if len(s.Value) != 2 {
		return 0, false
	}
	str, isStr := s.Value[1].(string)
	if !isStr {
		return 0, false
	}
	f, err := strconv.ParseFloat(str, 64) // reads NaN and +Inf as Prometheus writes them
	return f, err == nil
}

// QueryResult is the answer to an instant query.
type QueryResult struct {
	ResultType string   `json:"resultType"`
	Result     []Sample `json:"result"`
	// Warnings are Prometheus' warnings about the query.
	Warnings []string `json:"-"`
}

// Query evaluates expr at the current time through /api/v1/query.
func (p *Prometheus) Query(ctx context.Context, expr string) (QueryResult, error) {
	var r QueryResult
	warnings, err := p.get(ctx, "/api/v1/query?"+url.Values{"query": {expr}}.Encode(), &r)
	r.Warnings = warnings
	return r, err
}

// LabelValues lists the values of label among the series matching the
// selector match (all series when match is empty), as Grafana's
// label_values(selector, label) does.
func (p *Prometheus) LabelValues(ctx context.Context, label, match string) ([]string, error) {
	q := url.Values{}
	if match != "" {
		q.Set("match[]", match)
	}
	var values []string
	_, err := p.get(ctx, "/api/v1/label/"+url.PathEscape(label)+"/values?"+q.Encode(), &values)
	return values, err
}

// Rule is one rule of /api/v1/rules.
type Rule struct {
	Name      string `json:"name"`
	Query     string `json:"query"`
	Type      string `json:"type"` // "recording" or "alerting"
	Health    string `json:"health"`
	LastError string `json:"lastError"`
	State     string `json:"state"` // alerting rules: inactive, pending, firing
	// Alerts are an alerting rule's pending and firing alerts.
	Alerts []struct {
		Labels map[string]string `json:"labels"`
		State  string            `json:"state"`
	} `json:"alerts"`
}

// RuleGroup is one group of /api/v1/rules.
type RuleGroup struct {
	Name  string `json:"name"`
	File  string `json:"file"`
	Rules []Rule `json:"rules"`
}

// Rules lists the loaded rule groups.
func (p *Prometheus) Rules(ctx context.Context) ([]RuleGroup, error) {
	var data struct {
		Groups []RuleGroup `json:"groups"`
	}
	_, err := p.get(ctx, "/api/v1/rules", &data)
	return data.Groups, err
}

// Target is one active scrape target of /api/v1/targets.
type Target struct {
	ScrapeURL string `json:"scrapeUrl"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
}

// Targets lists the active scrape targets.
func (p *Prometheus) Targets(ctx context.Context) ([]Target, error) {
	var data struct {
		ActiveTargets []Target `json:"activeTargets"`
	}
	_, err := p.get(ctx, "/api/v1/targets", &data)
	return data.ActiveTargets, err
}

// get GETs path from the HTTP API, checks its status and decodes its data.
func (p *Prometheus) get(ctx context.Context, path string, data any) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var envelope struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Warnings  []string        `json:"warnings"`
	}
	if err := json.Unmarshal(body, &envelope); err != nil {
		return nil, fmt.Errorf("prometheus answered %s with %d: %s", path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if envelope.Status != "success" {
		return envelope.Warnings, fmt.Errorf("prometheus: %s: %s", envelope.ErrorType, envelope.Error)
	}
	if err := json.Unmarshal(envelope.Data, data); err != nil {
		return envelope.Warnings, fmt.Errorf("decode prometheus answer to %s: %w", path, err)
	}
	return envelope.Warnings, nil
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
	"github.com/streamstall/streamstall/internal/testbed/harness"
	"github.com/streamstall/streamstall/internal/testbed/mdcode"
)

// The tests of this file run the configs and commands of the docs as they
// are written, on free loopback ports in place of the docs' fixed ones, and
// hold the docs' sample output to what the run prints.

// docBlock returns the n-th code block with the info string info (""
// for output samples) in the section of path whose heading starts with
// section.
func docBlock(t *testing.T, path, section, info string, n int) mdcode.Block {
	t.Helper()
	blocks, err := mdcode.File(path)
	require.NoError(t, err)
	var found []mdcode.Block
	for _, b := range mdcode.In(blocks, section) {
		if b.Info == info {
			found = append(found, b)
		}
	}
	require.Greater(t, len(found), n, "%s, section %q: no %q block number %d", path, section, info, n)
	return found[n]
}

// relocation moves the docs' fixed loopback ports to free ones.
type relocation map[string]string

func newRelocation(t *testing.T, ports ...int) relocation {
	t.Helper()
	r := relocation{}
	for _, p := range ports {
		r[fmt.Sprintf("127.0.0.1:%d", p)] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		r[fmt.Sprintf("localhost:%d", p)] = r[fmt.Sprintf("127.0.0.1:%d", p)]
	}
	return r
}

func (r relocation) apply(s string) string {
	for from, to := range r {
		s = strings.ReplaceAll(s, from, to)
	}
	return s
}

// addr is where the doc's host:port went.
func (r relocation) addr(docAddr string) string { return r[docAddr] }

// shell runs a doc's shell block with sh in dir and returns its output.
func shell(ctx context.Context, dir, script string) (string, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("sh: %w: %s", err, out)
	}
	return string(out), nil
}

func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "%s is needed to run the docs' commands (apt-get install %s)", tool, tool)
	}
}

// fakellmRequests reads the journal of a fakellm: every request with the
// timing plan it followed.
func fakellmRequests(ctx context.Context, base string) ([]fakellm.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+fakellm.RequestsPath, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var reqs []fakellm.Request
	return reqs, json.NewDecoder(resp.Body).Decode(&reqs)
}

// TestQuickstartOwnCollector runs section 3 of docs/quickstart.md: the
// minimal pipeline as saved in my-collector.yaml, fakellm and the collector
// with the doc's command lines, the doc's curl through the proxy, its grep
// of the debug exporter's output, the sample OpenLLMetry-shaped span, the
// metrics scrape, and grafana.md's text scrape of a native histogram.
func TestQuickstartOwnCollector(t *testing.T) {
	requireTools(t, "curl", "grep")
	const doc = "../docs/quickstart.md"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ports := newRelocation(t, 8787, 4318, 9464, 8080)

	config := docBlock(t, doc, "A minimal pipeline", "yaml", 0).Text
	for docAddr := range ports {
		if strings.HasPrefix(docAddr, "127.0.0.1:") {
			require.Contains(t, config, docAddr, "my-collector.yaml no longer uses %s: update this test's ports", docAddr)
		}
	}
	configPath, err := harness.WriteFile(dir, "my-collector.yaml", ports.apply(config))
	require.NoError(t, err)

	// The doc's two command lines: fakellm, then the collector.
	var fakeArgs []string
	for _, line := range strings.Split(docBlock(t, doc, "A minimal pipeline", "sh", 0).Text, "\n") {
		switch f := strings.Fields(ports.apply(line)); {
		case len(f) > 0 && f[0] == "_build/fakellm":
			fakeArgs = f[1:]
		case len(f) > 0 && f[0] == "_build/otelcol-streamstall":
			require.Equal(t, []string{"--config", "my-collector.yaml", ">", "otelcol.log", "2>&1"}, f[1:], "the collector's command line")
		}
	}
	require.NotEmpty(t, fakeArgs, "the doc starts fakellm")
	fakeURL := "http://" + ports.addr("127.0.0.1:8080")
	fake := start(t, "fakellm", binary(t, "STREAMSTALL_FAKELLM", "fakellm"), fakeArgs...)
	waitHTTP(t, fake, fakeURL+fakellm.RequestsPath, http.StatusOK)
	col, err := harness.StartCollectorFiles(ctx, binary(t, "STREAMSTALL_OTELCOL", "otelcol-streamstall"), dir, configPath)
	require.NoError(t, err)
	t.Cleanup(func() {
		col.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("---- otelcol-streamstall output ----\n%s", col.Output())
		}
	})

	// grep runs the doc's grep on otelcol.log (the collector's output, as
	// the doc redirects it) until its output has want in it.
	grepBlock := docBlock(t, doc, "Point clients at the proxy", "sh", 1).Text
	grep := func(want string) string {
		var out string
		eventually(t, 30*time.Second, "the debug exporter's output has "+want, func() error {
			if err := os.WriteFile(filepath.Join(dir, "otelcol.log"), []byte(col.Output()), 0o600); err != nil {
				return err
			}
			var err error
			if out, err = shell(ctx, dir, grepBlock); err != nil {
				return err
			}
			if !strings.Contains(out, want) {
				return fmt.Errorf("%w: %s", errNotYet, out)
			}
			return nil
		})
		return out
	}

	// Through the proxy, then the span as the doc's grep shows it, against
	// fakellm's own plan for the request.
	out, err := shell(ctx, dir, ports.apply(docBlock(t, doc, "Point clients at the proxy", "sh", 0).Text))
	require.NoError(t, err)
	require.Contains(t, out, "data: [DONE]")
	got := grep(semconv.AttrActiveTPS)
	reqs, err := fakellmRequests(ctx, fakeURL)
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	want := planFigures(t, reqs[0], 2*time.Second)
	sample := docBlock(t, doc, "Point clients at the proxy", "", 0)
	if diffs := spanSampleDiff(sample.Text, got, want); len(diffs) > 0 {
		t.Errorf("quickstart.md line %d, the proxy's span:\n%s\nthe run printed:\n%s", sample.Line, strings.Join(diffs, "\n"), got)
	}

	// The sample span posted with curl: exact figures (its times are given).
	_, err = shell(ctx, dir, ports.apply(docBlock(t, doc, "Instrumented apps", "sh", 0).Text))
	require.NoError(t, err)
	spanSample := docBlock(t, doc, "Instrumented apps", "", 0)
	got = grep("openai.chat")
	assert.True(t, containsLines(got, spanSample.Text), "quickstart.md line %d: the sample span's figures are not in the grep output:\n%s\nwant:\n%s", spanSample.Line, got, spanSample.Text)
	// "the span also gets one llm.stream.stall event", as the proxy's span
	// with its one stall does.
	assert.Equal(t, 2, strings.Count(col.Output(), "-> Name: "+semconv.EventStall+"\n"), "stall events in the debug output")

	// The metrics of both spans, once stall_metrics has flushed them.
	metricsCmd := ports.apply(docBlock(t, doc, "The metrics", "sh", 0).Text)
	metricsSample := docBlock(t, doc, "The metrics", "", 0)
	eventually(t, 30*time.Second, "quickstart.md's metrics sample", func() error {
		out, err := shell(ctx, dir, metricsCmd)
		if err != nil {
			return err
		}
		if out != metricsSample.Text {
			return fmt.Errorf("%w: quickstart.md line %d: got\n%s", errNotYet, metricsSample.Line, out)
		}
		return nil
	})

	// grafana.md's text scrape of the stall histogram of the sample span.
	const grafana = "../docs/grafana.md"
	out, err = shell(ctx, dir, ports.apply(docBlock(t, grafana, "Prometheus must keep native histograms", "sh", 0).Text))
	require.NoError(t, err)
	histSample := docBlock(t, grafana, "Prometheus must keep native histograms", "", 0)
	assert.True(t, matchesLines(out, histSample.Text), "grafana.md line %d: the text scrape does not match:\n%s\nwant:\n%s", histSample.Line, out, histSample.Text)
}

// planFigures are the figures the stall processor must derive for a
// fakellm request that went through the proxy as planned: the one
// definition of each figure (internal/figures) over fakellm's planned chunk
// offsets.
func planFigures(t *testing.T, req fakellm.Request, threshold time.Duration) map[string]float64 {
	t.Helper()
	var times []int64
	for _, off := range req.Plan.Offsets() {
		times = append(times, off.Nanoseconds())
	}
	f := figures.Derive(0, times, threshold.Nanoseconds(), nil)
	want := map[string]float64{
		semconv.AttrChunkCount:          float64(f.ChunkCount),
		semconv.AttrTTFTMs:              figures.Millis(f.TTFT),
		semconv.AttrTimeToFirstAnswerMs: figures.Millis(f.TTFT), // no reasoning
		semconv.AttrGenerationMs:        figures.Millis(f.Generation),
		semconv.AttrStallThresholdMs:    figures.Millis(f.Threshold),
		semconv.AttrStallMs:             figures.Millis(f.StallTotal),
		semconv.AttrStallCount:          float64(f.StallCount),
		semconv.AttrMaxStallMs:          figures.Millis(f.MaxStall),
		semconv.AttrActiveGenerationMs:  figures.Millis(f.Active()),
	}
	if tps, ok := f.ActiveTPS(int64(req.OutputTokens)); ok {
		want[semconv.AttrActiveTPS] = tps
	}
	return want
}

var debugAttr = regexp.MustCompile(`^ {5}-> ([a-z_.]+): (Int|Double|Str|Bool|Bytes)\((.*)\)$`)

// How far a doc's sample may be from fakellm's plan (it was printed by a
// run on an idle machine: the proxy sees each chunk a little after fakellm
// planned it), and how far this run may be (a loaded machine's timers wake
// late). Counts are exact in both.
const (
	docSlackMs, runSlackMs = 25.0, 500.0
	// active_tps divides by the active generation time, tens of
	// milliseconds at the doc's time factor, so a millisecond moves it.
	tpsSlack = 0.5
)

// spanSampleDiff compares a sample of the doc's grep output with this run's
// and both with the plan: the same lines in the same order, the counts
// equal, the durations near the plan.
func spanSampleDiff(sample, got string, plan map[string]float64) []string {
	sl, gl := strings.Split(strings.TrimSuffix(sample, "\n"), "\n"), strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(sl) != len(gl) {
		return []string{fmt.Sprintf("%d lines, the run printed %d:\n%s", len(sl), len(gl), got)}
	}
	var diffs []string
	for i := range sl {
		sm, gm := debugAttr.FindStringSubmatch(sl[i]), debugAttr.FindStringSubmatch(gl[i])
		if sm == nil || gm == nil {
			if sl[i] != gl[i] {
				diffs = append(diffs, fmt.Sprintf("%q, the run printed %q", sl[i], gl[i]))
			}
			continue
		}
		key, kind := sm[1], sm[2]
		if gm[1] != key || gm[2] != kind {
			diffs = append(diffs, fmt.Sprintf("%q, the run printed %q", sl[i], gl[i]))
			continue
		}
		if kind == "Bytes" { // the seal: this process's, never the doc's
			continue
		}
		if kind == "Str" { // a mark, not a figure: the same words
			if sl[i] != gl[i] {
				diffs = append(diffs, fmt.Sprintf("%q, the run printed %q", sl[i], gl[i]))
			}
			continue
		}
		want, ok := plan[key]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s: not a figure the plan gives", key))
			continue
		}
		docV, err1 := strconv.ParseFloat(sm[3], 64)
		runV, err2 := strconv.ParseFloat(gm[3], 64)
		if err1 != nil || err2 != nil {
			diffs = append(diffs, fmt.Sprintf("%s: %q, %q are not numbers", key, sm[3], gm[3]))
			continue
		}
		switch {
		case kind == "Int" || key == semconv.AttrStallThresholdMs:
			if docV != want || runV != want {
				diffs = append(diffs, fmt.Sprintf("%s: doc %v, run %v, plan %v", key, docV, runV, want))
			}
		case key == semconv.AttrActiveTPS:
			if math.Abs(docV-want) > tpsSlack*want {
				diffs = append(diffs, fmt.Sprintf("%s: doc %v, plan %v", key, docV, want))
			}
		default:
			if math.Abs(docV-want) > docSlackMs {
				diffs = append(diffs, fmt.Sprintf("%s: doc %v ms, plan %v ms", key, docV, want))
			}
			if math.Abs(runV-want) > runSlackMs+0.25*want {
				diffs = append(diffs, fmt.Sprintf("%s: run %v ms, plan %v ms", key, runV, want))
			}
		}
	}
	return diffs
}

// containsLines reports whether the lines of sample are consecutive lines
// of out.
func containsLines(out, sample string) bool {
	return strings.Contains("\n"+out, "\n"+sample)
}

// matchesLines reports whether out has, in order, a line matching each
// line of sample, where "..." in a sample line stands for any text.
func matchesLines(out, sample string) bool {
	lines := strings.Split(out, "\n")
	i := 0
	for _, s := range strings.Split(strings.TrimSuffix(sample, "\n"), "\n") {
		re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(s), regexp.QuoteMeta("..."), ".*") + "$")
		for i < len(lines) && !re.MatchString(lines[i]) {
			i++
		}
		if i == len(lines) {
			return false
		}
		i++
	}
	return true
}

// nativeHistogramsFlag is what grafana.md says Prometheus 2.40 to 3.8 must
// be started with.
const nativeHistogramsFlag = "--enable-feature=native-histograms"

// TestGrafanaPrometheusConfig checks grafana.md's prometheus.yml with the
// promtool of the Prometheus that make prometheus installs, then runs that
// Prometheus with it (its targets replaced by a collector) and the flag the
// doc names, and finds the stall histogram stored as a native histogram.
func TestGrafanaPrometheusConfig(t *testing.T) {
	const doc = "../docs/grafana.md"
	promtool, err := exec.LookPath("promtool")
	require.NoError(t, err, "promtool is missing: run these tests with `make e2e`, which installs Debian's prometheus package")
	b, err := os.ReadFile(doc)
	require.NoError(t, err)
	require.Contains(t, string(b), "`"+nativeHistogramsFlag+"`", "grafana.md names the flag this test starts Prometheus with")

	dir := t.TempDir()
	config := docBlock(t, doc, "Prometheus must keep native histograms", "yaml", 0).Text
	path, err := harness.WriteFile(dir, "prometheus.yml", config)
	require.NoError(t, err)
	out, err := exec.Command(promtool, "check", "config", path).CombinedOutput()
	require.NoError(t, err, "promtool check config on grafana.md's prometheus.yml:\n%s", out)

	otlpPort, promPort := freePort(t), freePort(t)
	collector(t, fill(metricsPipelineConfig, "OTLP", otlpPort, "PROM", promPort))
	const docTargets = "['collector-1:9464', 'collector-2:9464']"
	require.Contains(t, config, docTargets, "grafana.md's scrape targets: update this test")
	path, err = harness.WriteFile(dir, "prometheus-e2e.yml", strings.Replace(config, docTargets, fmt.Sprintf("['127.0.0.1:%d']", promPort), 1))
	require.NoError(t, err)
	web := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := start(t, "prometheus", prometheusBinary(t), "--config.file="+path, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+web, nativeHistogramsFlag, "--log.level=warn")
	waitHTTP(t, p, "http://"+web+"/-/ready", http.StatusOK)
	prom := &harness.Prometheus{Process: p, URL: "http://" + web}

	sample, err := os.ReadFile("../testdata/openllmetry-streams.json")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	status, body, err := postJSON(ctx, fmt.Sprintf("http://127.0.0.1:%d/v1/traces", otlpPort), sample)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, body)

	// The doc's scrape_interval is 15 s: the first scrape with the data
	// comes within two of them.
	eventually(t, 45*time.Second, "a native histogram of stalls in Prometheus", func() error {
		r, err := prom.Query(ctx, "llm_stream_stall_duration_seconds")
		if err != nil {
			return err
		}
		for _, s := range r.Result {
			if len(s.Histogram) == 2 {
				return nil
			}
		}
		return fmt.Errorf("%w: %+v", errNotYet, r.Result)
	})
}

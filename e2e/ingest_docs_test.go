// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
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

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/harness"
)

const (
	ingestDoc     = "../docs/ingest.md"
	ingestExample = "browser-ingest.yaml"
)

// ingestOverride moves examples/browser-ingest.yaml's listener to a free
// port and its exporter to the test's sink; THRESHOLD is empty or a
// stall_threshold line.
const ingestOverride = `
receivers:
  sse_capture:
    ingest:
      endpoint: 127.0.0.1:${INGEST}
${THRESHOLD}
exporters:
  otlp_http:
    endpoint: ${SINK}
`

// ingestCollector runs examples/browser-ingest.yaml, with the stall
// threshold changed when threshold is not empty, and returns the
// relocation of its listener and the sink of its exporter.
func ingestCollector(t *testing.T, threshold string) (relocation, *harness.Sink) {
	t.Helper()
	sink := startSink(t)
	ports := newRelocation(t, 8788)
	over := ""
	if threshold != "" {
		over = "processors:\n  stall:\n    stall_threshold: " + threshold
	}
	_, port, _ := strings.Cut(ports.addr("localhost:8788"), ":")
	exampleCollector(t, ingestExample, fill(ingestOverride, "INGEST", port, "THRESHOLD", over, "SINK", sink.URL))
	return ports, sink
}

// exampleThreshold is the stall_threshold of examples/browser-ingest.yaml.
func exampleThreshold(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", ingestExample))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s+stall_threshold:\s*(\S+)\s*$`).FindAllStringSubmatch(string(b), -1)
	require.Len(t, m, 1, "one stall_threshold in %s", ingestExample)
	return m[0][1]
}

// thresholdRow is one row of ingest.md's table of the shell example's
// figures.
type thresholdRow struct {
	threshold, label string
	want             map[string]string // attribute: value as the span prints it
}

// shellExampleTable reads the table that follows the shell example.
func shellExampleTable(t *testing.T) []thresholdRow {
	t.Helper()
	b, err := os.ReadFile(ingestDoc)
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "## From a shell")
	require.True(t, ok)
	var header []string
	var rows []thresholdRow
	code := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		switch {
		case header == nil:
			header = cells
		case strings.HasPrefix(cells[0], "---"):
		default:
			require.Len(t, cells, len(header), line)
			r := thresholdRow{threshold: code.FindStringSubmatch(cells[0])[1], label: cells[0], want: map[string]string{}}
			for i := 1; i < len(cells); i++ {
				r.want[code.FindStringSubmatch(header[i])[1]] = cells[i]
			}
			rows = append(rows, r)
		}
	}
	require.NotEmpty(t, rows, "ingest.md's table of the shell example's figures")
	return rows
}

// TestIngestShellExample posts ingest.md's shell example with its own curl
// command to the collector of examples/browser-ingest.yaml, as it is and
// with each other threshold of the doc's table, and checks the figures the
// table gives.
func TestIngestShellExample(t *testing.T) {
	requireTools(t, "curl")
	script := docBlock(t, ingestDoc, "From a shell", "sh", 0).Text
	rows := shellExampleTable(t)
	own := exampleThreshold(t)
	sawOwn := false
	for _, row := range rows {
		t.Run(row.threshold, func(t *testing.T) {
			override := row.threshold
			if strings.Contains(row.label, ingestExample) {
				require.Equal(t, own, row.threshold, "the row that names %s gives its threshold", ingestExample)
				override, sawOwn = "", true
			}
			ports, sink := ingestCollector(t, override)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, err := shell(ctx, t.TempDir(), ports.apply(script))
			require.NoError(t, err)
			require.JSONEq(t, `{"accepted": 1}`, out)
			eventually(t, 20*time.Second, "the span at the sink", func() error {
				if _, ok := sink.Span("chat gpt-4o"); !ok {
					return errNotYet
				}
				return nil
			})
			span, _ := sink.Span("chat gpt-4o")
			for attr, want := range row.want {
				v, ok := span.Attributes().Get(attr)
				if assert.True(t, ok, attr) {
					assert.Equal(t, want, v.AsString(), "ingest.md, threshold %s: %s", row.threshold, attr)
				}
			}
		})
	}
	assert.True(t, sawOwn, "ingest.md's table has the row of %s", ingestExample)
}

// browserScript is examples/browser-ingest.js as ingest.md's page uses it:
// the doc's snippet with the page's prompt and output element.
const browserScript = `
const prompt = "Why do streams stall?";
const output = {text: "", append(piece) { this.text += piece; }};
${SNIPPET}
if (answer !== output.text || answer === "") throw new Error("onText saw " + JSON.stringify(output.text) + ", answer " + JSON.stringify(answer));
console.log(JSON.stringify({answer}));
`

// TestIngestBrowserExample runs examples/browser-ingest.js with Node, as
// ingest.md's page snippet calls it, with fakellm as the page's backend and
// the collector of examples/browser-ingest.yaml, and checks the span: the
// attributes ingest.md asks for and the figures of fakellm's chunks.
func TestIngestBrowserExample(t *testing.T) {
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node is needed to run the browser example (apt-get install nodejs)")
	ports, sink := ingestCollector(t, "")

	// A stall of 3.5 s, over the example's 3 s threshold, after chunk 3.
	fakeURL := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	fake := start(t, "fakellm", binary(t, "STREAMSTALL_FAKELLM", "fakellm"), "-addr", strings.TrimPrefix(fakeURL, "http://"),
		"-profile", `{"ttft_ms":120,"gaps_ms":[20,20,3500,20,20]}`)
	waitHTTP(t, fake, fakeURL+"/_fakellm/requests", http.StatusOK)

	snippet := docBlock(t, ingestDoc, "From a browser", "js", 1).Text
	module, err := filepath.Abs(filepath.Join("..", "examples", "browser-ingest.js"))
	require.NoError(t, err)
	for from, to := range map[string]string{
		`"./browser-ingest.js"`: strconv.Quote("file://" + module),
		`"/api/chat"`:           strconv.Quote(fakeURL + "/v1/chat/completions"),
	} {
		require.Contains(t, snippet, from, "ingest.md's page snippet")
		snippet = strings.ReplaceAll(snippet, from, to)
	}
	dir := t.TempDir()
	page, err := harness.WriteFile(dir, "page.mjs", fill(browserScript, "SNIPPET", ports.apply(snippet)))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, page).CombinedOutput()
	require.NoError(t, err, "node %s:\n%s", page, out)

	eventually(t, 20*time.Second, "the browser's span at the sink", func() error {
		if _, ok := sink.Span("chat gpt-4o"); !ok {
			return errNotYet
		}
		return nil
	})
	var got harness.ReceivedSpan
	for _, sp := range sink.Spans() {
		if sp.Name() == "chat gpt-4o" {
			got = sp
		}
	}
	assert.Equal(t, "chat-web", got.Service, "service.name goes to the resource")
	attrs := got.Attributes().AsRaw()

	// The attributes ingest.md's Request section asks every record for.
	b, err := os.ReadFile(ingestDoc)
	require.NoError(t, err)
	asked := regexp.MustCompile("(?s)Send `gen_ai.operation.name`, `gen_ai.provider.name` and\\s+`gen_ai.request.model` \\(and `gen_ai.usage.output_tokens` when known\\)")
	require.Regexp(t, asked, string(b), "ingest.md's list of the attributes to send: update this test")
	assert.Equal(t, "chat", attrs[semconv.AttrOperationName])
	assert.Equal(t, "openai", attrs[semconv.AttrProviderName])
	assert.Equal(t, "gpt-4o", attrs[semconv.AttrRequestModel])

	reqs, err := fakellmRequests(ctx, fakeURL)
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	assert.EqualValues(t, reqs[0].OutputTokens, attrs[semconv.AttrUsageOutputTokens])
	assert.EqualValues(t, reqs[0].Chunks(), attrs[semconv.AttrChunkCount], "one offset per content frame")
	assert.EqualValues(t, 1, attrs[semconv.AttrStallCount])
	assert.EqualValues(t, 3000, attrs[semconv.AttrStallThresholdMs])
	// The page times chunks as it reads them: after fakellm sent them, by
	// the time a loaded machine takes to pass them on.
	sent := reqs[0].ChunkOffsetsMillis
	stall := sent[3] - sent[2]
	assert.InDelta(t, stall, attrs[semconv.AttrStallMs], 250+0.1*stall)
	assert.Less(t, math.Abs(attrs[semconv.AttrTTFTMs].(float64)-sent[0]), 250.0)
}

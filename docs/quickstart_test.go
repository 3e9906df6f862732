// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package docs_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/testbed/mdcode"
)

// TestQuickstartQuotesTheDemo checks that the demo output the quickstart
// shows is the golden summary's (cmd/demo's e2e test holds the demo to
// it): every line of the samples, in the golden file's order.
func TestQuickstartQuotesTheDemo(t *testing.T) {
	golden, err := os.ReadFile("../cmd/demo/testdata/summary.golden")
	require.NoError(t, err)
	goldenLines := strings.Split(string(golden), "\n")
	blocks, err := mdcode.File("quickstart.md")
	require.NoError(t, err)
	samples := mdcode.In(blocks, "Reading the summary")
	require.Len(t, samples, 3, "the per-call table, the metrics table and the counters")
	next := 0 // the samples quote the golden file in its order
	for _, b := range samples {
		for _, line := range strings.Split(strings.TrimSuffix(b.Text, "\n"), "\n") {
			i := indexFrom(goldenLines, next, line)
			if !assert.GreaterOrEqual(t, i, 0, "quickstart.md line %d: not a line of the golden summary after the previous one:\n%s", b.Line, line) {
				continue
			}
			next = i + 1
		}
	}
}

func indexFrom(lines []string, from int, line string) int {
	for i := from; i < len(lines); i++ {
		if lines[i] == line {
			return i
		}
	}
	return -1
}

// TestReadmeQuotesTheDemo checks the excerpt of the demo in the README: its
// rows are rows of the golden summary, cell for cell, without the service
// column (left out for width).
func TestReadmeQuotesTheDemo(t *testing.T) {
	golden, err := os.ReadFile("../cmd/demo/testdata/summary.golden")
	require.NoError(t, err)
	rows := map[string][]string{} // golden rows by their first cell, the call's number
	var header []string
	for _, line := range strings.Split(string(golden), "\n") {
		cells := summaryCells(line)
		switch {
		case len(cells) > 1 && cells[0] == "#":
			header = withoutService(cells)
		case len(cells) > 1 && strings.HasPrefix(cells[len(cells)-1], "|"):
			rows[cells[0]] = withoutService(cells)
		}
	}
	require.NotEmpty(t, header)
	blocks, err := mdcode.File("../README.md")
	require.NoError(t, err)
	excerpt := mdcode.In(blocks, "What it shows")
	require.NotEmpty(t, excerpt)
	lines := strings.Split(strings.TrimSuffix(excerpt[0].Text, "\n"), "\n")
	assert.Equal(t, header, summaryCells(lines[0]), "README.md line %d: the header", excerpt[0].Line+1)
	for i, line := range lines[1:] {
		cells := summaryCells(line)
		want, ok := rows[cells[0]]
		if assert.True(t, ok, "README.md line %d: no call %s in the golden summary", excerpt[0].Line+2+i, cells[0]) {
			assert.Equal(t, want, cells, "README.md line %d", excerpt[0].Line+2+i)
		}
	}
}

var cellSep = regexp.MustCompile(`\s{2,}`)

// summaryCells splits a line of the demo's per-call table into its cells:
// they are at least two spaces apart, and the timeline, which has blanks
// of its own, starts at the first '|'.
func summaryCells(line string) []string {
	timeline := ""
	if i := strings.IndexByte(line, '|'); i >= 0 {
		line, timeline = line[:i], line[i:]
	}
	cells := cellSep.Split(strings.TrimSpace(line), -1)
	if timeline != "" {
		cells = append(cells, timeline)
	}
	return cells
}

func withoutService(cells []string) []string {
	return append([]string{cells[0]}, cells[2:]...)
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goldenPath holds the output of a real run of the demo with its default
// options (go test -tags e2e -run TestDemoMatchesGolden -update ./cmd/demo/
// rewrites it). docs/quickstart.md shows lines of it, and a docs test checks
// that they are its lines.
const goldenPath = "testdata/summary.golden"

// The figures of the summary that depend on the machine's timing, and how
// far apart two runs may put them. Everything else (which calls, their
// chunk and stall counts, hedge outcomes, value counts, counters, the
// shape of each timeline) is fixed by fakellm's seeded plans and must match
// exactly.
var (
	msColumns = map[string]bool{"TTFT": true, "TTFA": true, "wall gen": true, "stall": true, "active gen": true}
	sColumns  = map[string]bool{"p50": true, "p95": true, "p99": true, "max": true}
)

const (
	// A figure may drift by 500 ms plus 25 %: on a loaded machine (two
	// cores, load 14) fakellm's timers and the proxy wake late, and first
	// chunks were seen 300 ms behind their plan. What the plans decide
	// (chunk and stall counts, the shape of each timeline) is compared
	// exactly, so the slack hides no change of behaviour.
	msSlack, relSlack = 500.0, 0.25
)

// A call is a burst when its chunks arrived less than 1 ms apart on
// average. The demo's steady chunks are 2.5 ms apart, so on a loaded
// machine, where the proxy reads late and finds several chunks waiting, a
// call or two can look like a burst; more than maxBurstFlips is a change.
const (
	burstColumn, burstSuffix = "wall gen", " (burst)"
	maxBurstFlips            = 3
)

var (
	columnSep  = regexp.MustCompile(`\s{2,}`)
	runDetails = regexp.MustCompile(`http://127\.0\.0\.1:\d+|collector logs in \S+`)
)

// normalizeSummary replaces what differs in every run by design (free
// ports, the temporary directory) in the demo's first line.
func normalizeSummary(s string) string {
	first, rest, _ := strings.Cut(s, "\n")
	first = runDetails.ReplaceAllStringFunc(first, func(m string) string {
		if strings.HasPrefix(m, "http") {
			return "http://127.0.0.1:PORT"
		}
		return "collector logs in DIR"
	})
	return first + "\n" + rest
}

// summaryDiff compares a demo summary with the golden one and returns every
// difference that timing jitter does not explain.
func summaryDiff(golden, got string) []string {
	want, have := strings.Split(normalizeSummary(golden), "\n"), strings.Split(normalizeSummary(got), "\n")
	var diffs []string
	if len(want) != len(have) {
		diffs = append(diffs, fmt.Sprintf("%d lines, golden has %d", len(have), len(want)))
	}
	var columns []string // the header of the table being read, if any
	burstFlips := 0
	for i := range min(len(want), len(have)) {
		w, h := want[i], have[i]
		switch {
		case strings.HasPrefix(w, "Per call,") || strings.HasPrefix(w, "Winner metrics"):
			columns = []string{} // the header follows
		case columns != nil && len(columns) == 0:
			// The header: its cells, since a wider cell below moves them all.
			columns = columnSep.Split(strings.TrimSpace(w), -1)
			if got := columnSep.Split(strings.TrimSpace(h), -1); !slices.Equal(columns, got) {
				diffs = append(diffs, fmt.Sprintf("line %d: columns %q, golden %q", i+1, got, columns))
			}
			continue
		case columns != nil && strings.HasPrefix(w, "  ") && w != "" && !strings.HasPrefix(w, "timeline:"):
			d, flipped := rowDiff(columns, w, h)
			if d != "" {
				diffs = append(diffs, fmt.Sprintf("line %d: %s\n  golden: %s\n  got:    %s", i+1, d, w, h))
			}
			if flipped {
				burstFlips++
			}
			continue
		default:
			columns = nil
		}
		if w != h {
			diffs = append(diffs, fmt.Sprintf("line %d:\n  golden: %s\n  got:    %s", i+1, w, h))
		}
	}
	if burstFlips > maxBurstFlips {
		diffs = append(diffs, fmt.Sprintf("%d calls are a burst in one summary and not in the other: more than the %d a loaded machine explains", burstFlips, maxBurstFlips))
	}
	return diffs
}

// rowDiff compares two rows of a table column by column; burstFlip tells
// that one of the two calls is a burst and the other is not.
func rowDiff(columns []string, want, got string) (diff string, burstFlip bool) {
	wc, gc := rowCells(want), rowCells(got)
	if len(wc) != len(columns) || len(gc) != len(columns) {
		return fmt.Sprintf("%d and %d cells for %d columns", len(wc), len(gc), len(columns)), false
	}
	var diffs []string
	for i, col := range columns {
		w, g := wc[i], gc[i]
		var d string
		switch {
		case col == burstColumn && strings.HasSuffix(w, burstSuffix) != strings.HasSuffix(g, burstSuffix):
			burstFlip = true
			d = figureDiff(strings.TrimSuffix(w, burstSuffix), strings.TrimSuffix(g, burstSuffix), msSlack)
		case col == "timeline":
			d = timelineDiff(w, g)
		case msColumns[col]:
			d = figureDiff(w, g, msSlack)
		case sColumns[col]:
			d = figureDiff(w, g, msSlack/1000)
		case w != g:
			d = fmt.Sprintf("%q, golden %q", g, w)
		}
		if d != "" {
			diffs = append(diffs, col+": "+d)
		}
	}
	return strings.Join(diffs, "; "), burstFlip
}

// rowCells splits a row into its cells: the timeline (from the first '|',
// its blanks are stalls) and the cells before it, which tabwriter set at
// least two spaces apart (a cell itself has single spaces: "chat gpt-4o").
func rowCells(row string) []string {
	timeline := ""
	if i := strings.IndexByte(row, '|'); i >= 0 {
		row, timeline = row[:i], row[i:]
	}
	cells := columnSep.Split(strings.TrimSpace(row), -1)
	if timeline != "" {
		cells = append(cells, timeline)
	}
	return cells
}

// figureDiff compares two figures ("-", "144", "0 (burst)", "0.153"): the
// same kind, and numbers within slack plus relSlack of the larger.
func figureDiff(want, got string, slack float64) string {
	wn, wSuffix, _ := strings.Cut(want, " ")
	gn, gSuffix, _ := strings.Cut(got, " ")
	if wSuffix != gSuffix {
		return fmt.Sprintf("%q, golden %q", got, want)
	}
	wv, werr := strconv.ParseFloat(wn, 64)
	gv, gerr := strconv.ParseFloat(gn, 64)
	if werr != nil || gerr != nil {
		if want != got {
			return fmt.Sprintf("%q, golden %q", got, want)
		}
		return ""
	}
	if math.Abs(wv-gv) > slack+relSlack*math.Max(math.Abs(wv), math.Abs(gv)) {
		return fmt.Sprintf("%s, golden %s", got, want)
	}
	return ""
}

// timelineDiff compares two timelines by their shape: the runs of
// reasoning, answer and stall cells in order. The wait for the first chunk
// ('-') is the TTFT column's, compared with its slack, and quiet cells ('.')
// come and go with a millisecond of jitter in a call of 150 ms.
func timelineDiff(want, got string) string {
	if timelineShape(want) != timelineShape(got) {
		return fmt.Sprintf("shape %q, golden %q", timelineShape(got), timelineShape(want))
	}
	return ""
}

func timelineShape(s string) string {
	var b strings.Builder
	var last rune
	for _, c := range s {
		if c == cellQuiet || c == cellWaiting || c == last {
			continue
		}
		b.WriteRune(c)
		last = c
	}
	return b.String()
}

func readGolden(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(goldenPath)
	require.NoError(t, err)
	return string(b)
}

// TestSummaryDiffTakesJitter: the golden against itself with every timing
// figure moved within the slack, and quiet cells come and gone.
func TestSummaryDiffTakesJitter(t *testing.T) {
	golden := readGolden(t)
	assert.Empty(t, summaryDiff(golden, golden))
	ms, seconds := regexp.MustCompile(`\b\d{3,5}\b`), regexp.MustCompile(`\b\d+\.\d{3}\b`)
	lines := strings.Split(golden, "\n")
	for i, l := range lines {
		switch {
		case strings.Contains(l, "|"): // a call: its milliseconds 20 ms late
			lines[i] = ms.ReplaceAllStringFunc(l, func(m string) string {
				v, _ := strconv.Atoi(m)
				return strconv.Itoa(v + 20)
			})
		case seconds.MatchString(l): // a histogram: its quantiles 20 ms late
			lines[i] = seconds.ReplaceAllStringFunc(l, func(m string) string {
				v, _ := strconv.ParseFloat(m, 64)
				return strconv.FormatFloat(v+0.02, 'f', 3, 64)
			})
		}
	}
	jittered := strings.ReplaceAll(strings.Join(lines, "\n"), "##.##", "#####")
	jittered = strings.Replace(jittered, "fakellm at http://127.0.0.1:PORT", "fakellm at http://127.0.0.1:41234", 1)
	assert.Empty(t, summaryDiff(golden, jittered))
}

// TestSummaryDiffCatchesDrift: what the docs must not silently lose.
func TestSummaryDiffCatchesDrift(t *testing.T) {
	golden := readGolden(t)
	lines := strings.Split(golden, "\n")
	line := func(prefix string) int {
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), prefix) {
				return i
			}
		}
		t.Fatalf("golden has no line starting with %q", prefix)
		return 0
	}
	// call is the line of the first call whose cells satisfy match.
	call := func(what string, match func(cells []string) bool) int {
		for i, l := range lines {
			if strings.Contains(l, "|") && strings.HasPrefix(l, "  ") && match(rowCells(l)) {
				return i
			}
		}
		t.Fatalf("golden has no call %s", what)
		return 0
	}
	// Cells of the per-call table: 3 chunks, 4 TTFT, 8 stalls, 11 timeline.
	setCell := func(i, cell int, f func(string) string) string {
		cells := rowCells(lines[i])
		cells[cell] = f(cells[cell])
		out := append([]string{}, lines...)
		out[i] = "  " + strings.Join(cells, "  ")
		return strings.Join(out, "\n")
	}
	stalled := call("with a stall", func(c []string) bool { return c[8] != "0" && c[8] != "-" })
	reasoned := call("with reasoning", func(c []string) bool { return strings.Contains(c[11], "r") })
	for name, got := range map[string]string{
		"a TTFT far from the plan": setCell(stalled, 4, func(v string) string {
			n, _ := strconv.Atoi(v)
			return strconv.Itoa(n + 1000)
		}),
		"another chunk count":            setCell(stalled, 3, func(string) string { return "59" }),
		"a stall more":                   setCell(stalled, 8, func(v string) string { return v + "1" }),
		"a stall less in the timeline":   setCell(stalled, 11, func(v string) string { return strings.ReplaceAll(v, " ", "#") }),
		"reasoning gone from a timeline": setCell(reasoned, 11, func(v string) string { return strings.ReplaceAll(v, "r", "#") }),
		"a metric line missing":          strings.Replace(golden, lines[line("llm.stream.time_to_first_answer")]+"\n", "", 1),
		"a counter changed": strings.Replace(golden, lines[line("llm.stream.calls{")],
			lines[line("llm.stream.calls{")]+"0", 1),
		"a new column": strings.Replace(golden, lines[line("#")], lines[line("#")]+"  TTFB", 1),
		"every call a burst": func() string {
			out := append([]string{}, lines...)
			for i, l := range out {
				if strings.Contains(l, "|") && strings.HasPrefix(l, "  ") {
					cells := rowCells(l)
					if !strings.HasSuffix(cells[6], burstSuffix) && cells[6] != "-" {
						cells[6] += burstSuffix
					}
					out[i] = "  " + strings.Join(cells, "  ")
				}
			}
			return strings.Join(out, "\n")
		}(),
	} {
		assert.NotEmpty(t, summaryDiff(golden, got), name)
	}
	// The rebuilt rows themselves pass, and so does one call seen as a burst
	// with a wider column: only the mutations above are caught.
	assert.Empty(t, summaryDiff(golden, setCell(stalled, 4, func(v string) string { return v })))
	steady := call("steady", func(c []string) bool { return c[8] == "0" && !strings.HasSuffix(c[6], burstSuffix) })
	assert.Empty(t, summaryDiff(golden, setCell(steady, 6, func(v string) string { return v + burstSuffix })))
}

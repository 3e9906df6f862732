package docs_test

import (
	"os"
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

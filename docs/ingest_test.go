// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package docs_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/testbed/mdcode"
)

// TestIngestShowsTheBrowserExample checks that the browser code ingest.md
// shows is examples/browser-ingest.js, the file the e2e test runs.
func TestIngestShowsTheBrowserExample(t *testing.T) {
	js, err := os.ReadFile("../examples/browser-ingest.js")
	require.NoError(t, err)
	blocks, err := mdcode.File("ingest.md")
	require.NoError(t, err)
	var shown []mdcode.Block
	for _, b := range mdcode.In(blocks, "From a browser") {
		if b.Info == "js" {
			shown = append(shown, b)
		}
	}
	require.Len(t, shown, 2, "the module and its use by a page")
	assert.Equal(t, string(js), shown[0].Text, "ingest.md line %d: not examples/browser-ingest.js", shown[0].Line)
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package mdcode

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	doc := "# Title\n\ntext\n\n```yaml\na: 1\n  b: 2\n```\n\n## Run it\n\n1. Step:\n\n   ```sh\n   echo hi\n\n   echo '#' not a heading\n   ```\n\n```\nplain\n```\n"
	blocks, err := Parse([]byte(doc))
	require.NoError(t, err)
	assert.Equal(t, []Block{
		{Info: "yaml", Section: "Title", Line: 5, Text: "a: 1\n  b: 2\n"},
		{Info: "sh", Section: "Run it", Line: 14, Text: "echo hi\n\necho '#' not a heading\n"},
		{Info: "", Section: "Run it", Line: 20, Text: "plain\n"},
	}, blocks)
	assert.Len(t, In(blocks, "Run"), 2)
	assert.Empty(t, In(blocks, "Elsewhere"))
}

func TestParseUnclosed(t *testing.T) {
	_, err := Parse([]byte("# T\n\n```sh\necho\n"))
	assert.ErrorContains(t, err, "line 3: unclosed code block")
}

func TestParseKeepsHashLinesInsideBlocks(t *testing.T) {
	blocks, err := Parse([]byte("## A\n```sh\n# a comment\n```\n## B\n"))
	require.NoError(t, err)
	require.Len(t, blocks, 1)
	assert.Equal(t, "A", blocks[0].Section)
	assert.Equal(t, "# a comment\n", blocks[0].Text)
}

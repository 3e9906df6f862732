// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package mdcode

import (
	"bytes"
	"testing"
)

func FuzzParse(f *testing.F) {
	f.Add([]byte("# T\n```yaml\na: 1\n```\n"))
	f.Add([]byte("  ```sh\n  x\n  ```\n## H\n```\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		blocks, err := Parse(doc)
		if err != nil {
			return
		}
		lines := bytes.Count(doc, []byte("\n")) + 1
		for _, b := range blocks {
			if b.Line < 1 || b.Line > lines {
				t.Fatalf("block at line %d of a %d-line document", b.Line, lines)
			}
			if len(b.Text) > len(doc) {
				t.Fatalf("block text longer than the document")
			}
		}
	})
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package docs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	// markdownLink is the target of [text](target), without its #fragment.
	markdownLink = regexp.MustCompile(`\]\(([^)#\s]+)(?:#[^)]*)?\)`)
	// repoPath is a path of the repository in backticks, such as
	// `receiver/ssecapture/internal/proxy`.
	releaseTag = regexp.MustCompile(`/v\d+\.\d+\.\d+$`)
	repoPath   = regexp.MustCompile("`((?:receiver|processor|connector|exporter|internal|hedge|cmd|e2e|docs|examples)/[A-Za-z0-9_./-]+)`")
)

// TestDocsNamePathsThatExist checks every Markdown file of the repository:
// each relative link resolves, and each repository path named in backticks
// exists (next to the file or from the root), so that a move of a package
// cannot leave a README or a guide pointing at nothing.
func TestDocsNamePathsThatExist(t *testing.T) {
	out, err := exec.Command("git", "-C", "..", "ls-files", "*.md").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	files := strings.Fields(string(out))
	require.NotEmpty(t, files)
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("..", f))
		require.NoError(t, err)
		dir := filepath.Join("..", filepath.Dir(f))
		for _, m := range markdownLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			assert.True(t, exists(filepath.Join(dir, target)), "%s links to %s, which does not exist", f, target)
		}
		for _, m := range repoPath.FindAllStringSubmatch(string(b), -1) {
			p := strings.TrimRight(m[1], "/.")
			if strings.ContainsAny(p, "*{<") || isTag(p) || isSymbol(p) {
				continue
			}
			assert.True(t, exists(filepath.Join("..", p)) || exists(filepath.Join(dir, p)) || inEveryComponent(p),
				"%s names %s, which does not exist", f, p)
		}
	}
}

// inEveryComponent reports whether p is a path that each component has
// (internal/metadata), named in general.
func inEveryComponent(p string) bool {
	m, _ := filepath.Glob(filepath.Join("..", "*", "*", p, "*.go"))
	return len(m) > 0
}

// isTag tells a module's release tag (hedge/v0.2.0) from a path.
func isTag(p string) bool { return releaseTag.MatchString(p) }

// isSymbol tells a package's exported name (internal/figures.ChunkReader)
// from a path.
func isSymbol(p string) bool {
	base := filepath.Base(p)
	i := strings.IndexByte(base, '.')
	return i > 0 && i+1 < len(base) && base[i+1] >= 'A' && base[i+1] <= 'Z'
}

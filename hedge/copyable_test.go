// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedge_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// internalImports returns the imports of a Go file that a program outside
// this repository could not copy: any path with an "internal" element.
func internalImports(t *testing.T, name string, src any) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
	require.NoError(t, err)
	var bad []string
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		require.NoError(t, err)
		if slices.Contains(strings.Split(path, "/"), "internal") {
			bad = append(bad, path)
		}
	}
	return bad
}

func TestInternalImportsIsFound(t *testing.T) {
	src := "package x_test\nimport (\n\t\"fmt\"\n\t\"github.com/streamstall/streamstall/internal/testbed/fakellm\"\n)\n"
	assert.Equal(t, []string{"github.com/streamstall/streamstall/internal/testbed/fakellm"}, internalImports(t, "x_test.go", src))
	assert.Empty(t, internalImports(t, "y_test.go", "package y_test\nimport \"github.com/streamstall/streamstall/hedge\"\n"))
}

// The examples of the hedge packages are what a user copies: they must
// build outside this repository, so they import no internal package.
func TestExamplesAreCopyable(t *testing.T) {
	examples := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		if !hasExample(f) {
			return nil
		}
		examples++
		assert.Empty(t, internalImports(t, path, nil), "%s: an example must build outside the repository", path)
		return nil
	})
	require.NoError(t, err)
	assert.Positive(t, examples, "no example found")
}

func hasExample(f *ast.File) bool {
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Example") {
			return true
		}
	}
	return false
}

// The code blocks of the README neither import nor name an internal package.
func TestReadmeCodeIsCopyable(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(readme, -1)
	require.NotEmpty(t, blocks, "README.md has no go code block")
	for _, b := range blocks {
		assert.NotRegexp(t, `(^|[/"])internal/`, string(b[1]), "a README example names an internal package")
	}
}

// A program that imports only hedge compiles neither the openai-go SDK (it is
// in hedge/openaisdk) nor any collector module.
func TestPlainClientDeps(t *testing.T) {
	gobin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command must be on PATH")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, gobin, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/streamstall/streamstall/internal/llmstream", "go list -deps answered")
	for _, d := range deps {
		assert.False(t, strings.HasPrefix(d, "github.com/openai/"), "hedge imports %s", d)
		assert.False(t, strings.HasPrefix(d, "go.opentelemetry.io/collector/"), "hedge imports %s", d)
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package buildcheck

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// isTestHelper reports whether importPath is a package meant for tests only:
// the standard library's testing packages, testify, goleak, and by the
// convention of the collector and of OpenTelemetry Go every package whose
// last element ends in "test" (componenttest, consumertest, metadatatest,
// tracetest, ...) or that is a testutil or testdata package.
func isTestHelper(importPath string) bool {
	switch {
	case importPath == "testing", strings.HasPrefix(importPath, "testing/"),
		importPath == "net/http/httptest",
		importPath == "go.uber.org/goleak",
		importPath == "github.com/stretchr/testify", strings.HasPrefix(importPath, "github.com/stretchr/testify/"):
		return true
	}
	last := path.Base(importPath)
	return strings.HasSuffix(last, "test") || strings.Contains(last, "testutil") || last == "testdata"
}

func TestIsTestHelper(t *testing.T) {
	for _, p := range []string{
		"testing",
		"testing/synctest",
		"net/http/httptest",
		"go.uber.org/goleak",
		"github.com/stretchr/testify/require",
		"go.opentelemetry.io/collector/component/componenttest",
		"go.opentelemetry.io/collector/consumer/consumertest",
		"go.opentelemetry.io/otel/sdk/trace/tracetest",
		"go.opentelemetry.io/collector/pdata/testdata",
		"github.com/open-telemetry/opentelemetry-collector-contrib/internal/common/testutil",
		"github.com/streamstall/streamstall/processor/stallprocessor/internal/metadatatest",
	} {
		assert.True(t, isTestHelper(p), p)
	}
	for _, p := range []string{
		"net/http",
		"go.opentelemetry.io/collector/component",
		"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl",
		"github.com/streamstall/streamstall/processor/stallprocessor",
		"github.com/streamstall/streamstall/internal/semconv",
	} {
		assert.False(t, isTestHelper(p), p)
	}
}

// pkg is one package of `go list -deps`.
type pkg struct {
	path, module string
	imports      []string
}

// goList runs the go command at the module root and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command must be on PATH")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list %s: %s", strings.Join(args, " "), stderr.String())
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			lines = append(lines, line)
		}
	}
	require.NoError(t, sc.Err())
	return lines
}

// violations checks the dependency graph of the production packages: no
// package of module may be a test helper or import one. Test helpers that
// third-party modules import are their business, not ours.
func violations(module string, graph []pkg) []string {
	var bad []string
	importers := map[string][]string{}
	for _, p := range graph {
		for _, imp := range p.imports {
			importers[imp] = append(importers[imp], p.path)
		}
	}
	for _, p := range graph {
		if p.module != module {
			continue
		}
		if isTestHelper(p.path) {
			bad = append(bad, p.path+" is a test helper in the production build, imported by "+strings.Join(importers[p.path], ", "))
		}
		for _, imp := range p.imports {
			if isTestHelper(imp) && !isTestHelper(p.path) {
				bad = append(bad, p.path+" imports the test helper "+imp)
			}
		}
	}
	slices.Sort(bad)
	return bad
}

func TestViolations(t *testing.T) {
	const mod = "example.com/m"
	graph := []pkg{
		{path: mod + "/component", module: mod, imports: []string{"go.opentelemetry.io/collector/component/componenttest", mod + "/internal/metadatatest"}},
		{path: mod + "/internal/metadatatest", module: mod, imports: []string{"testing"}},
		{path: "go.opentelemetry.io/collector/component/componenttest", module: "go.opentelemetry.io/collector/component"},
		{path: "github.com/hashicorp/golang-lru", module: "github.com/hashicorp/golang-lru", imports: []string{"testing"}},
	}
	assert.Equal(t, []string{
		mod + "/component imports the test helper " + mod + "/internal/metadatatest",
		mod + "/component imports the test helper go.opentelemetry.io/collector/component/componenttest",
		mod + "/internal/metadatatest is a test helper in the production build, imported by " + mod + "/component",
	}, violations(mod, graph))
	assert.Empty(t, violations(mod, graph[3:]), "a third party's imports are not ours to judge")
}

// TestNoTestHelpersInProduction lists the dependencies of every non-test
// package of the module (the components the collector build imports from
// builder-config.yaml, the hedge client, the commands) and fails when one of
// the module's packages is, or imports, a test helper.
func TestNoTestHelpersInProduction(t *testing.T) {
	module := goList(t, "-m")[0]
	var roots []string
	for _, p := range goList(t, "./...") {
		if !isTestHelper(p) {
			roots = append(roots, p)
		}
	}
	require.NotEmpty(t, roots)
	var graph []pkg
	for _, line := range goList(t, append([]string{"-deps", "-f", "{{.ImportPath}}\t{{with .Module}}{{.Path}}{{end}}\t{{join .Imports \" \"}}"}, roots...)...) {
		fields := strings.Split(line, "\t")
		require.Len(t, fields, 3, line)
		graph = append(graph, pkg{path: fields[0], module: fields[1], imports: strings.Fields(fields[2])})
	}
	for _, want := range []string{"processor/stallprocessor", "receiver/ssecapture", "connector/stallmetricsconnector"} {
		assert.True(t, slices.ContainsFunc(graph, func(p pkg) bool { return p.path == module+"/"+want }), "%s missing from the graph", want)
	}
	assert.Empty(t, violations(module, graph))
}

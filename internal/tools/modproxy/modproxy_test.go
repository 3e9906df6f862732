// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/zip"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A repository with a root module and a nested one, both tagged v0.1.0, is
// served by the proxy that run writes, and a program in an empty module
// builds against it with no other source: the layout the go command reads.
func TestProxyServesTheTaggedModules(t *testing.T) {
	repo := t.TempDir()
	for name, text := range map[string]string{
		"go.mod":       "module example.com/r\n\ngo 1.26.0\n\nrequire example.com/r/sub v0.1.0\n\nreplace example.com/r/sub => ./sub\n",
		"r.go":         "package r\n\nimport \"example.com/r/sub\"\n\nfunc Hello() string { return sub.Word }\n",
		"LICENSE":      "a license\n",
		"sub/go.mod":   "module example.com/r/sub\n\ngo 1.26.0\n",
		"sub/sub.go":   "package sub\n\nconst Word = \"hello\"\n",
		"untracked.go": "package r\n\nvar notCommitted = 1\n",
	} {
		file := filepath.Join(repo, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GIT_AUTHOR_NAME", "test")
	t.Setenv("GIT_AUTHOR_EMAIL", "test@localhost")
	t.Setenv("GIT_COMMITTER_NAME", "test")
	t.Setenv("GIT_COMMITTER_EMAIL", "test@localhost")
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "r.go", "go.mod", "LICENSE", "sub"},
		{"commit", "-q", "-m", "v0.1.0"},
		{"tag", "v0.1.0"},
		{"tag", "sub/v0.1.0"},
		{"tag", "sub/v0.2.0"},
	} {
		if _, err := git(repo, args...); err != nil {
			t.Fatal(err)
		}
	}

	proxy := t.TempDir()
	if err := run(repo, "v0.1.0", proxy); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"example.com/r/@v/v0.1.0.zip", "example.com/r/sub/@v/v0.1.0.mod", "example.com/r/sub/@v/list"} {
		if _, err := os.Stat(filepath.Join(proxy, f)); err != nil {
			t.Errorf("the proxy lacks %s: %v", f, err)
		}
	}
	// A zip holds the tagged commit: no untracked file, no nested module, and
	// the root's LICENSE in the nested module's, as the go command makes them.
	for zipFile, want := range map[string]string{
		"example.com/r/@v/v0.1.0.zip":     "LICENSE go.mod r.go",
		"example.com/r/sub/@v/v0.1.0.zip": "LICENSE go.mod sub.go",
	} {
		if got := zipNames(t, filepath.Join(proxy, zipFile)); got != want {
			t.Errorf("%s holds %q, want %q", zipFile, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(proxy, "example.com/r/sub/@v/v0.2.0.zip")); err == nil {
		t.Error("the proxy serves sub/v0.2.0, a tag of another version")
	}

	user := t.TempDir()
	main := "package main\n\nimport \"example.com/r\"\n\nfunc main() { println(r.Hello()) }\n"
	if err := os.WriteFile(filepath.Join(user, "main.go"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOPROXY=file://"+filepath.ToSlash(proxy), "GOMODCACHE="+t.TempDir(),
		"GOFLAGS=-modcacherw", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local", "GONOPROXY=", "GOPRIVATE=")
	for _, args := range [][]string{
		{"mod", "init", "example.com/user"}, {"get", "example.com/r@v0.1.0"}, {"build", "-o", "user", "."},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = user, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	out, err := exec.Command(filepath.Join(user, "user")).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "hello" {
		t.Fatalf("the program built from the proxy printed %q (%v), want hello", out, err)
	}
}

// zipNames lists a module zip's files without their module@version prefix.
func zipNames(t *testing.T, file string) string {
	t.Helper()
	r, err := zip.OpenReader(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	var names []string
	for _, f := range r.File {
		_, name, _ := strings.Cut(f.Name, "@v0.1.0/")
		names = append(names, path.Clean(name))
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}

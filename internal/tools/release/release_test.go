// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The fixture is a repository laid out like ours: a root module that
// requires a nested one through a replace, a tools module that is never
// tagged, versions.yaml, and the two ocb manifests.
var fixture = map[string]string{
	"go.mod": `module example.com/r

go 1.26.0

require example.com/r/sub v0.1.0

replace example.com/r/sub => ./sub
`,
	"r.go":       "package r\n\nimport _ \"example.com/r/sub\"\n",
	"sub/go.mod": "module example.com/r/sub\n\ngo 1.26.0\n",
	"sub/sub.go": "package sub\n",
	"tools/go.mod": `module example.com/r/tools

go 1.26.0
`,
	"versions.yaml": `# a comment that the release keeps
module-sets:
  r:
    version: v0.1.0 # and this one
    modules:
      - example.com/r
      - example.com/r/sub
excluded-modules:
  - example.com/r/tools
`,
	"README.md": "# r\n\n" + manifestBegin + "\n```yaml\n" + manifestYAML + "```\n" + manifestEnd + "\n",
	"builder-config.yaml": manifestYAML + `replaces:
  - example.com/r => ../
  - example.com/r/sub => ../sub
`,
}

const manifestYAML = `dist:
  name: otelcol-r
  version: 0.1.0
  output_path: ./_build
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver v0.165.0
  - gomod: example.com/r v0.1.0
    import: example.com/r/receiver
`

func newRepo(t *testing.T, edits map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	for name, text := range fixture {
		files[name] = text
	}
	for name, text := range edits {
		files[name] = text
	}
	for name, text := range files {
		file := filepath.Join(dir, filepath.FromSlash(name))
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
	mustGit(t, dir, "init", "-q", "-b", "main")
	mustGit(t, dir, "add", "-A")
	mustGit(t, dir, "commit", "-q", "-m", "initial")
	return dir
}

func mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := git(dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

func read(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestPrepareCommitsAndTagsEveryModule(t *testing.T) {
	dir := newRepo(t, nil)
	var out bytes.Buffer
	if err := prepare(dir, "v0.2.0", &out); err != nil {
		t.Fatal(err)
	}
	if got := mustGit(t, dir, "log", "-1", "--format=%s"); got != "release v0.2.0" {
		t.Errorf("HEAD is %q, want the commit \"release v0.2.0\"", got)
	}
	if got := mustGit(t, dir, "tag", "--points-at", "HEAD"); got != "sub/v0.2.0\nv0.2.0" {
		t.Errorf("tags at HEAD: %q, want v0.2.0 and sub/v0.2.0 (the tools module is never tagged)", got)
	}
	if st := mustGit(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("the tree is not clean after the release:\n%s", st)
	}
	for name, want := range map[string]string{
		"go.mod":              "require example.com/r/sub v0.2.0\n",
		"versions.yaml":       "    version: v0.2.0 # and this one\n",
		"README.md":           "  - gomod: example.com/r v0.2.0\n",
		"builder-config.yaml": "  version: 0.2.0\n",
	} {
		if got := read(t, dir, name); !strings.Contains(got, want) {
			t.Errorf("%s lacks %q after the release:\n%s", name, want, got)
		}
	}
	if got := read(t, dir, "versions.yaml"); !strings.HasPrefix(got, "# a comment that the release keeps\n") {
		t.Errorf("versions.yaml lost its comment:\n%s", got)
	}
	if !strings.Contains(out.String(), "nothing was pushed") {
		t.Errorf("the output does not say that nothing was pushed:\n%s", out.String())
	}
}

func TestPrepareOfTheVersionOnMainTagsHEAD(t *testing.T) {
	dir := newRepo(t, nil)
	before := mustGit(t, dir, "rev-parse", "HEAD")
	if err := prepare(dir, "v0.1.0", &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if got := mustGit(t, dir, "rev-parse", "v0.1.0^{commit}"); got != before {
		t.Errorf("v0.1.0 tags %s, want HEAD %s: every file named v0.1.0 already, so there is nothing to commit", got, before)
	}
}

func TestPrepareRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edits   map[string]string
		setup   func(t *testing.T, dir string)
		version string
		want    string
	}{
		{name: "no v", version: "0.2.0", want: "malformed version"},
		{name: "short", version: "v0.2", want: "malformed version"},
		{name: "build metadata", version: "v0.2.0+x", want: "malformed version"},
		{name: "major above v1", version: "v2.0.0", want: "/v2 suffix"},
		{
			name: "dirty tree", version: "v0.2.0", want: "not clean",
			setup: func(t *testing.T, dir string) {
				if err := os.WriteFile(filepath.Join(dir, "r.go"), []byte("package r // edited\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "untracked file", version: "v0.2.0", want: "not clean",
			setup: func(t *testing.T, dir string) {
				if err := os.WriteFile(filepath.Join(dir, "new.go"), []byte("package r\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "a tag exists", version: "v0.2.0", want: "the tags sub/v0.2.0 exist",
			setup: func(t *testing.T, dir string) { mustGit(t, dir, "tag", "sub/v0.2.0") },
		},
		{
			name: "module not in versions.yaml", version: "v0.2.0", want: "example.com/r/other is in no module set",
			edits: map[string]string{"other/go.mod": "module example.com/r/other\n\ngo 1.26.0\n"},
		},
		{
			name: "module path not its directory", version: "v0.2.0", want: "does not match its directory",
			edits: map[string]string{"sub/go.mod": "module example.com/r/subx\n\ngo 1.26.0\n"},
		},
		{
			name: "README and builder-config differ", version: "v0.2.0", want: "differ in receivers",
			edits: map[string]string{"README.md": "# r\n\n" + manifestBegin + "\n```yaml\n" +
				strings.Replace(manifestYAML, "otlpreceiver v0.165.0", "otlpreceiver v0.164.0", 1) + "```\n" + manifestEnd + "\n"},
		},
		{
			name: "no replace for a sibling", version: "v0.2.0", want: "without `replace example.com/r/sub => ./sub`",
			edits: map[string]string{"go.mod": "module example.com/r\n\ngo 1.26.0\n\nrequire example.com/r/sub v0.1.0\n"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newRepo(t, tc.edits)
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			head := mustGit(t, dir, "rev-parse", "HEAD")
			status := mustGit(t, dir, "status", "--porcelain")
			err := prepare(dir, tc.version, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("prepare %s: got error %v, want one containing %q", tc.version, err, tc.want)
			}
			if got := mustGit(t, dir, "rev-parse", "HEAD"); got != head {
				t.Errorf("a refused release committed %s", got)
			}
			if got := mustGit(t, dir, "tag", "--list", "*"+tc.version); tc.name != "a tag exists" && got != "" {
				t.Errorf("a refused release tagged %s", got)
			}
			if got := mustGit(t, dir, "status", "--porcelain"); got != status {
				t.Errorf("a refused release left the tree changed:\n%s", got)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edits map[string]string
		want  string // "" when the checkout is consistent
	}{
		{name: "consistent"},
		{
			name: "placeholder", want: "go.mod:5: requires example.com/r/sub at the placeholder " + placeholder,
			edits: map[string]string{"go.mod": strings.Replace(fixture["go.mod"], "sub v0.1.0", "sub "+placeholder, 1)},
		},
		{
			name: "placeholder in an excluded module", want: "tools/go.mod:5: requires example.com/r/sub at the placeholder",
			edits: map[string]string{"tools/go.mod": fixture["tools/go.mod"] + "\nrequire example.com/r/sub " + placeholder + "\n"},
		},
		{
			name: "another version", want: "go.mod:5: requires example.com/r/sub v0.0.9, want v0.1.0",
			edits: map[string]string{"go.mod": strings.Replace(fixture["go.mod"], "sub v0.1.0", "sub v0.0.9", 1)},
		},
		{
			name: "README pins another version", want: "README.md:11: gomod \"example.com/r v0.0.9\", want \"example.com/r v0.1.0\"",
			edits: map[string]string{"README.md": strings.Replace(fixture["README.md"], "example.com/r v0.1.0", "example.com/r v0.0.9", 1)},
		},
		{
			name: "README has replaces", want: "a user's manifest has no replaces",
			edits: map[string]string{"README.md": strings.Replace(fixture["README.md"], "```\n<!--", "replaces:\n  - example.com/r => ../\n```\n<!--", 1)},
		},
		{
			name: "builder-config misses a replace", want: "replaces needs `example.com/r/sub => ../sub`",
			edits: map[string]string{"builder-config.yaml": strings.Replace(fixture["builder-config.yaml"], "  - example.com/r/sub => ../sub\n", "", 1)},
		},
		{
			name: "no README manifest", want: "README.md: no ocb manifest",
			edits: map[string]string{"README.md": "# r\n"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newRepo(t, tc.edits)
			l, err := loadLayout(dir)
			if err == nil {
				_, set := l.set()
				err = l.check(set.Version)
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("check: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("check: got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestApplyEditsRefusesAQuotedScalar(t *testing.T) {
	text := "dist:\n  version: \"0.1.0\"\n"
	doc, err := parseYAML("x.yaml", text)
	if err != nil {
		t.Fatal(err)
	}
	v := mapValue(mapValue(doc, "dist"), "version")
	if _, err := applyEdits("x.yaml", text, []scalarEdit{editScalar(v, 0, "0.2.0")}); err == nil || !strings.Contains(err.Error(), "write it unquoted") {
		t.Fatalf("got %v, want a refusal to edit a quoted scalar", err)
	}
}

// TestMain makes sure git exists: every test here runs it.
func TestMain(m *testing.M) {
	if _, err := exec.LookPath("git"); err != nil {
		panic("the release tests need git: " + err.Error())
	}
	os.Exit(m.Run())
}

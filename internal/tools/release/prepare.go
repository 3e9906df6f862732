// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/streamstall/streamstall/internal/tools/internal/gitexec"
)

// prepare makes the release commit and the tags of version in the checkout
// at root, and pushes nothing. It refuses a malformed version, a dirty tree,
// a layout that versions.yaml does not describe, and tags that exist; a
// failed consistency check after the edits undoes them.
func prepare(root, version string, stdout io.Writer) error {
	if err := validVersion(version); err != nil {
		return err
	}
	status, err := git(root, "status", "--porcelain")
	if err != nil {
		return err
	}
	if status != "" {
		return fmt.Errorf("the working tree is not clean: commit or stash these first:\n%s", status)
	}
	l, err := loadLayout(root)
	if err != nil {
		return fmt.Errorf("versions.yaml does not describe the modules of the checkout: %w", err)
	}
	var existing []string
	for _, m := range l.released() {
		if _, err := git(root, "rev-parse", "-q", "--verify", "refs/tags/"+m.tag(version)); err == nil {
			existing = append(existing, m.tag(version))
		}
	}
	if len(existing) > 0 {
		return fmt.Errorf("%s is released already: the tags %s exist", version, strings.Join(existing, ", "))
	}

	if err := l.setVersion(version); err != nil {
		return errors.Join(err, undo(root))
	}
	after, err := loadLayout(root)
	if err == nil {
		err = after.check(version)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("the release commit would not be consistent, so the edits were undone: %w", err), undo(root))
	}

	message := "release " + version
	if changed, err := git(root, "status", "--porcelain"); err != nil {
		return err
	} else if changed == "" {
		_, _ = fmt.Fprintf(stdout, "every file names %s already: tagging HEAD\n", version)
	} else if _, err := git(root, "commit", "-q", "-a", "-m", message); err != nil {
		return err
	}
	var tags []string
	for _, m := range after.released() {
		if _, err := git(root, "tag", "-a", "-m", message, m.tag(version)); err != nil {
			return err
		}
		tags = append(tags, m.tag(version))
	}
	if status, err := git(root, "status", "--porcelain"); err != nil || status != "" {
		return fmt.Errorf("the working tree is not clean after the release (%w):\n%s", err, status)
	}
	head, err := git(root, "log", "-1", "--format=%h %s")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\ntagged %d modules: %s\nnothing was pushed; to publish: git push origin HEAD %s\n",
		strings.TrimSpace(head), len(tags), strings.Join(tags, " "), strings.Join(tags, " "))
	return err
}

// setVersion writes version into every requirement between the modules of
// the set, versions.yaml, the README's ocb manifest and builder-config.yaml.
func (l *layout) setVersion(version string) error {
	for _, m := range l.modules {
		var args []string
		for _, r := range m.file.Require {
			if s := l.byPath(r.Mod.Path); s != nil && s.set != "" {
				args = append(args, "-require="+r.Mod.Path+"@"+version)
			}
		}
		if len(args) == 0 {
			continue
		}
		cmd := exec.Command("go", append(append([]string{"mod", "edit"}, args...), m.goMod())...)
		cmd.Dir = l.root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go mod edit %s: %w: %s", m.goMod(), err, out)
		}
	}

	name, _ := l.set()
	if err := l.editFile("versions.yaml", func(text string) ([]scalarEdit, error) {
		doc, err := parseYAML("versions.yaml", text)
		if err != nil {
			return nil, err
		}
		v := mapValue(mapValue(mapValue(doc, "module-sets"), name), "version")
		if v == nil {
			return nil, fmt.Errorf("versions.yaml: module-sets.%s has no version", name)
		}
		return []scalarEdit{editScalar(v, 0, version)}, nil
	}); err != nil {
		return err
	}
	if err := l.editFile("README.md", func(text string) ([]scalarEdit, error) {
		manifest, first, err := readmeManifest(text)
		if err != nil {
			return nil, err
		}
		doc, err := parseYAML("README.md manifest", manifest)
		if err != nil {
			return nil, err
		}
		return l.manifestEdits(doc, first-1, version), nil
	}); err != nil {
		return err
	}
	return l.editFile("builder-config.yaml", func(text string) ([]scalarEdit, error) {
		doc, err := parseYAML("builder-config.yaml", text)
		if err != nil {
			return nil, err
		}
		return l.manifestEdits(doc, 0, version), nil
	})
}

// manifestEdits pins the root module at version in every gomod line of an
// ocb manifest, and sets the distribution's version.
func (l *layout) manifestEdits(doc *yaml.Node, lineOffset int, version string) []scalarEdit {
	var edits []scalarEdit
	for _, g := range gomodNodes(doc, l.rootModule) {
		edits = append(edits, editScalar(g, lineOffset, l.rootModule+" "+version))
	}
	if v := mapValue(mapValue(doc, "dist"), "version"); v != nil {
		edits = append(edits, editScalar(v, lineOffset, strings.TrimPrefix(version, "v")))
	}
	return edits
}

func (l *layout) editFile(name string, edits func(text string) ([]scalarEdit, error)) error {
	file := filepath.Join(l.root, name)
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	es, err := edits(string(data))
	if err != nil {
		return err
	}
	text, err := applyEdits(name, string(data), es)
	if err != nil {
		return err
	}
	return os.WriteFile(file, []byte(text), 0o644)
}

// undo restores the tracked files; prepare starts from a clean tree, so that
// drops only its own edits.
func undo(root string) error {
	_, err := git(root, "checkout", "--", ".")
	return err
}

var git = gitexec.Run

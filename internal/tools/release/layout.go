// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/mod/modfile"
)

// placeholder is the pseudo-version that `go mod edit -replace` style
// development leaves behind: no module proxy can ever serve it.
const placeholder = "v0.0.0-00010101000000-000000000000"

// versionsFile is versions.yaml, in the layout of contrib's and core's.
type versionsFile struct {
	ModuleSets      map[string]moduleSet `yaml:"module-sets"`
	ExcludedModules []string             `yaml:"excluded-modules"`
}

// moduleSet is a set of modules released together at one version.
type moduleSet struct {
	Version string   `yaml:"version"`
	Modules []string `yaml:"modules"`
}

// module is one go.mod of the repository.
type module struct {
	path string // module path
	dir  string // directory relative to the repository root, "." for the root
	set  string // the module set it belongs to, "" for an excluded module
	file *modfile.File
}

// goMod is the go.mod's path relative to the repository root.
func (m *module) goMod() string { return path.Join(m.dir, "go.mod") }

// tag is the tag that Go resolves for the module at version: the version
// itself for the root module, the directory and the version for a nested one.
func (m *module) tag(version string) string {
	if m.dir == "." {
		return version
	}
	return m.dir + "/" + version
}

// layout is what the release reads from a checkout: versions.yaml and every
// go.mod that git tracks.
type layout struct {
	root       string // absolute directory of the checkout
	rootModule string // module path of the root go.mod
	versions   versionsFile
	modules    []*module // sorted by directory
}

func loadLayout(root string) (*layout, error) {
	l := &layout{root: root}
	data, err := os.ReadFile(filepath.Join(root, "versions.yaml"))
	if err != nil {
		return nil, fmt.Errorf("read versions.yaml: %w", err)
	}
	if err := yaml.Unmarshal(data, &l.versions); err != nil {
		return nil, fmt.Errorf("parse versions.yaml: %w", err)
	}
	if len(l.versions.ModuleSets) != 1 {
		return nil, fmt.Errorf("versions.yaml: want exactly one module set, found %d", len(l.versions.ModuleSets))
	}
	setOf := map[string]string{}
	for name, set := range l.versions.ModuleSets {
		for _, p := range set.Modules {
			if _, dup := setOf[p]; dup {
				return nil, fmt.Errorf("versions.yaml: %s is listed twice", p)
			}
			setOf[p] = name
		}
	}
	for _, p := range l.versions.ExcludedModules {
		if _, dup := setOf[p]; dup {
			return nil, fmt.Errorf("versions.yaml: %s is both in a module set and excluded", p)
		}
		setOf[p] = ""
	}

	out, err := git(root, "ls-files", "--", ":(glob)**/go.mod")
	if err != nil {
		return nil, err
	}
	for _, rel := range strings.Fields(out) {
		// go ignores testdata directories: a go.mod there is data, not a module.
		if slices.Contains(strings.Split(rel, "/"), "testdata") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", rel, err)
		}
		f, err := modfile.Parse(rel, data, nil)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", rel, err)
		}
		if f.Module == nil {
			return nil, fmt.Errorf("%s: no module line", rel)
		}
		l.modules = append(l.modules, &module{path: f.Module.Mod.Path, dir: path.Dir(rel), file: f})
	}
	slices.SortFunc(l.modules, func(a, b *module) int { return strings.Compare(a.dir, b.dir) })
	i := slices.IndexFunc(l.modules, func(m *module) bool { return m.dir == "." })
	if i < 0 {
		return nil, errors.New("no go.mod at the repository root")
	}
	l.rootModule = l.modules[i].path

	var errs []error
	declared := map[string]bool{}
	for _, m := range l.modules {
		declared[m.path] = true
		set, listed := setOf[m.path]
		if !listed {
			errs = append(errs, fmt.Errorf("%s: module %s is in no module set of versions.yaml and not among its excluded-modules", m.goMod(), m.path))
		}
		m.set = set
		// Go finds a nested module's version in the tag <dir>/<version> only
		// when the module path is the root's path followed by that directory.
		if want := path.Join(l.rootModule, m.dir); m.path != want {
			errs = append(errs, fmt.Errorf("%s: module path %s does not match its directory (want %s), so its tags would not resolve", m.goMod(), m.path, want))
		}
	}
	for p := range setOf {
		if !declared[p] {
			errs = append(errs, fmt.Errorf("versions.yaml lists %s, but no go.mod of the repository declares it", p))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return l, errors.Join(errs...)
}

// set returns the name and the module set (there is exactly one).
func (l *layout) set() (string, moduleSet) {
	for name, s := range l.versions.ModuleSets {
		return name, s
	}
	return "", moduleSet{}
}

// released returns the modules of the set, which are tagged together.
func (l *layout) released() []*module {
	var ms []*module
	for _, m := range l.modules {
		if m.set != "" {
			ms = append(ms, m)
		}
	}
	return ms
}

// byPath returns the module with the given path, or nil.
func (l *layout) byPath(p string) *module {
	for _, m := range l.modules {
		if m.path == p {
			return m
		}
	}
	return nil
}

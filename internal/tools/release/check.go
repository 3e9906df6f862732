// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// validVersion accepts what Go accepts as a release tag of these modules.
func validVersion(v string) error {
	if !semver.IsValid(v) || semver.Canonical(v) != v {
		return fmt.Errorf("malformed version %q: want vMAJOR.MINOR.PATCH, optionally with a -prerelease suffix, e.g. v0.2.0", v)
	}
	if major := semver.Major(v); major != "v0" && major != "v1" {
		return fmt.Errorf("version %s: a major version above v1 needs a /%s suffix on every module path", v, major)
	}
	return nil
}

// check returns every reason why the checkout does not name version
// consistently: in the requirements between its modules, in the README's
// ocb manifest and in builder-config.yaml.
func (l *layout) check(version string) error {
	var errs []error
	if err := validVersion(version); err != nil {
		errs = append(errs, fmt.Errorf("versions.yaml: %w", err))
	}
	errs = append(errs, l.checkRequirements(version)...)
	errs = append(errs, l.checkManifests(version)...)
	return errors.Join(errs...)
}

// checkRequirements: no go.mod requires the placeholder pseudo-version, and
// every requirement of a released module names version and is replaced by
// the module's directory, so that the checkout builds in place.
func (l *layout) checkRequirements(version string) []error {
	var errs []error
	for _, m := range l.modules {
		for _, r := range m.file.Require {
			p, v := r.Mod.Path, r.Mod.Version
			line := r.Syntax.Start.Line
			if v == placeholder {
				errs = append(errs, fmt.Errorf("%s:%d: requires %s at the placeholder %s, which no module proxy serves, so no consumer could build a tag: require %s, the version of versions.yaml (the replace directive keeps building the checkout)",
					m.goMod(), line, p, placeholder, version))
				continue
			}
			sibling := l.byPath(p)
			if sibling == nil || sibling.set == "" {
				continue
			}
			if v != version {
				errs = append(errs, fmt.Errorf("%s:%d: requires %s %s, want %s, the version of versions.yaml", m.goMod(), line, p, v, version))
			}
			if !replacedByDir(m, sibling) {
				errs = append(errs, fmt.Errorf("%s: requires %s without `replace %s => %s`, so a build of this checkout would not use the checkout's copy",
					m.goMod(), p, p, relDir(m.dir, sibling.dir)))
			}
		}
	}
	return errs
}

func replacedByDir(m, sibling *module) bool {
	for _, r := range m.file.Replace {
		if r.Old.Path == sibling.path && r.Old.Version == "" && modfile.IsDirectoryPath(r.New.Path) &&
			path.Join(m.dir, r.New.Path) == sibling.dir {
			return true
		}
	}
	return false
}

// relDir is the relative path from directory from to directory to, both
// relative to the repository root, in the ./ or ../ form a replace needs.
func relDir(from, to string) string {
	rel, err := filepath.Rel(filepath.FromSlash(from), filepath.FromSlash(to))
	if err != nil {
		return to
	}
	rel = filepath.ToSlash(rel)
	if !strings.HasPrefix(rel, "../") && rel != ".." {
		rel = "./" + rel
	}
	return rel
}

// checkManifests: the README's manifest and builder-config.yaml pin version,
// describe one distribution, and builder-config.yaml replaces every released
// module with its directory.
func (l *layout) checkManifests(version string) []error {
	readme, offset, builder, err := l.manifests()
	if err != nil {
		return []error{err}
	}
	var errs []error
	errs = append(errs, checkManifest("README.md", readme, offset, l.rootModule, version)...)
	errs = append(errs, checkManifest("builder-config.yaml", builder, 0, l.rootModule, version)...)
	errs = append(errs, sameDistribution(readme, builder)...)

	out := "."
	if o := mapValue(mapValue(builder, "dist"), "output_path"); o != nil {
		out = o.Value
	}
	replaces := map[string]string{}
	if list := mapValue(builder, "replaces"); list != nil {
		for _, r := range list.Content {
			if old, dir, ok := strings.Cut(r.Value, "=>"); ok {
				replaces[strings.TrimSpace(old)] = path.Join(out, strings.TrimSpace(dir))
			}
		}
	}
	for _, m := range l.released() {
		if replaces[m.path] != m.dir {
			errs = append(errs, fmt.Errorf("builder-config.yaml: replaces needs `%s => %s`, so that make otelcol builds this checkout", m.path, relDir(out, m.dir)))
		}
	}
	return errs
}

// manifests reads and parses the README's manifest (with the README line
// before its first line) and builder-config.yaml.
func (l *layout) manifests() (readme *yaml.Node, offset int, builder *yaml.Node, err error) {
	data, err := os.ReadFile(filepath.Join(l.root, "README.md"))
	if err != nil {
		return nil, 0, nil, fmt.Errorf("read README.md: %w", err)
	}
	text, first, err := readmeManifest(string(data))
	if err != nil {
		return nil, 0, nil, err
	}
	if readme, err = parseYAML("README.md manifest", text); err != nil {
		return nil, 0, nil, err
	}
	data, err = os.ReadFile(filepath.Join(l.root, "builder-config.yaml"))
	if err != nil {
		return nil, 0, nil, fmt.Errorf("read builder-config.yaml: %w", err)
	}
	if builder, err = parseYAML("builder-config.yaml", string(data)); err != nil {
		return nil, 0, nil, err
	}
	return readme, first - 1, builder, nil
}

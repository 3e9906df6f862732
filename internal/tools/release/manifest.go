// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The README's ocb manifest sits between these two lines, in a yaml code
// block: the release pins it, the rehearsal builds it.
const (
	manifestBegin = "<!-- ocb manifest: begin (make release pins it, make rehearse builds it) -->"
	manifestEnd   = "<!-- ocb manifest: end -->"
)

// componentKinds are the keys of an ocb manifest that list gomod entries.
var componentKinds = []string{"receivers", "processors", "exporters", "connectors", "extensions", "providers", "converters"}

// readmeManifest returns the YAML of the README's ocb manifest and the
// README line (1-based) of its first line.
func readmeManifest(readme string) (string, int, error) {
	lines := strings.SplitAfter(readme, "\n")
	begin := slices.IndexFunc(lines, func(s string) bool { return strings.TrimSpace(s) == manifestBegin })
	end := slices.IndexFunc(lines, func(s string) bool { return strings.TrimSpace(s) == manifestEnd })
	if begin < 0 || end < begin {
		return "", 0, fmt.Errorf("README.md: no ocb manifest between the lines %q and %q", manifestBegin, manifestEnd)
	}
	block := lines[begin+1 : end]
	if len(block) < 2 || strings.TrimSpace(block[0]) != "```yaml" || strings.TrimSpace(block[len(block)-1]) != "```" {
		return "", 0, errors.New("README.md: the ocb manifest markers must enclose exactly one ```yaml code block")
	}
	return strings.Join(block[1:len(block)-1], ""), begin + 3, nil
}

// parseYAML parses text and returns its top-level mapping.
func parseYAML(name, text string) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: not a YAML mapping", name)
	}
	return doc.Content[0], nil
}

// mapValue returns the value of key in a mapping node, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// gomodNodes returns the gomod scalars of a manifest that name modulePath.
func gomodNodes(manifest *yaml.Node, modulePath string) []*yaml.Node {
	var nodes []*yaml.Node
	for _, kind := range componentKinds {
		list := mapValue(manifest, kind)
		if list == nil {
			continue
		}
		for _, entry := range list.Content {
			if g := mapValue(entry, "gomod"); g != nil && strings.HasPrefix(g.Value, modulePath+" ") {
				nodes = append(nodes, g)
			}
		}
	}
	return nodes
}

// checkManifest checks that a manifest pins modulePath at version, and that
// its distribution carries that version too. lineOffset is the line of the
// file before the manifest's first line.
func checkManifest(name string, manifest *yaml.Node, lineOffset int, modulePath, version string) []error {
	var errs []error
	pins := gomodNodes(manifest, modulePath)
	if len(pins) == 0 {
		errs = append(errs, fmt.Errorf("%s: no component of %s", name, modulePath))
	}
	for _, g := range pins {
		if want := modulePath + " " + version; g.Value != want {
			errs = append(errs, fmt.Errorf("%s:%d: gomod %q, want %q (the version of versions.yaml)", name, g.Line+lineOffset, g.Value, want))
		}
	}
	if v := mapValue(mapValue(manifest, "dist"), "version"); v == nil || v.Value != strings.TrimPrefix(version, "v") {
		errs = append(errs, fmt.Errorf("%s: dist.version must be %s, the version of versions.yaml without its v", name, strings.TrimPrefix(version, "v")))
	}
	return errs
}

// sameDistribution reports, as errors, the keys in which the README's
// manifest and builder-config.yaml differ: builder-config.yaml is the README's
// manifest plus the replaces that build this checkout.
func sameDistribution(readme, builder *yaml.Node) []error {
	var r, b map[string]any
	if err := readme.Decode(&r); err != nil {
		return []error{fmt.Errorf("README.md manifest: %w", err)}
	}
	if err := builder.Decode(&b); err != nil {
		return []error{fmt.Errorf("builder-config.yaml: %w", err)}
	}
	var errs []error
	if _, ok := r["replaces"]; ok {
		errs = append(errs, errors.New("README.md manifest: a user's manifest has no replaces: it builds the published modules"))
	}
	delete(b, "replaces")
	keys := slices.Sorted(maps.Keys(b))
	for k := range r {
		if _, ok := b[k]; !ok && k != "replaces" {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if k != "replaces" && !reflect.DeepEqual(r[k], b[k]) {
			errs = append(errs, fmt.Errorf("README.md manifest and builder-config.yaml differ in %s: the two describe one distribution (builder-config.yaml only adds its replaces)", k))
		}
	}
	return errs
}

// scalarEdit replaces one plain scalar at its position, so that an edit keeps
// the comments and the layout of the file.
type scalarEdit struct {
	line, col int // 1-based, as yaml.Node reports them
	old, new  string
}

func editScalar(n *yaml.Node, lineOffset int, value string) scalarEdit {
	return scalarEdit{line: n.Line + lineOffset, col: n.Column, old: n.Value, new: value}
}

func applyEdits(name, text string, edits []scalarEdit) (string, error) {
	lines := strings.SplitAfter(text, "\n")
	// Right to left, so that an edit never moves the column of the next one.
	slices.SortFunc(edits, func(a, b scalarEdit) int {
		if a.line != b.line {
			return a.line - b.line
		}
		return b.col - a.col
	})
	for _, e := range edits {
		if e.line < 1 || e.line > len(lines) {
			return "", fmt.Errorf("%s:%d: no such line", name, e.line)
		}
		l := lines[e.line-1]
		start := e.col - 1
		if start < 0 || start+len(e.old) > len(l) || l[start:start+len(e.old)] != e.old {
			return "", fmt.Errorf("%s:%d: %q is not a plain scalar there; write it unquoted", name, e.line, e.old)
		}
		lines[e.line-1] = l[:start] + e.new + l[start+len(e.old):]
	}
	return strings.Join(lines, ""), nil
}

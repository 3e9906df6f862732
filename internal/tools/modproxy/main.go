// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Command modproxy writes a file-system module proxy (the GOPROXY layout,
// served with GOPROXY=file://DIR) holding the modules that a git repository
// tags at one version: the tag VERSION for the root module, DIR/VERSION for
// the module in DIR. Each zip is made from the tagged commit alone, as a
// public proxy would make it, so a build against this proxy sees what a
// stranger's `go get` would see after the tags are pushed.
//
//	modproxy -repo CLONE -version v0.99.0 -out PROXYDIR
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"

	"github.com/streamstall/streamstall/internal/tools/internal/gitexec"
)

func main() {
	repo := flag.String("repo", ".", "the git repository (a clone: its .git must be a directory)")
	version := flag.String("version", "", "the version whose tags to serve")
	out := flag.String("out", "", "the proxy directory to write")
	flag.Parse()
	if *version == "" || *out == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*repo, *version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run(repo, version, out string) error {
	if !semver.IsValid(version) {
		return fmt.Errorf("malformed version %q", version)
	}
	repo, err := filepath.Abs(repo)
	if err != nil {
		return err
	}
	list, err := git(repo, "tag", "--list")
	if err != nil {
		return err
	}
	var tags []string
	for _, t := range strings.Fields(list) {
		if t == version || strings.HasSuffix(t, "/"+version) {
			tags = append(tags, t)
		}
	}
	if len(tags) == 0 {
		return fmt.Errorf("%s: no tag of %s", repo, version)
	}
	for _, tag := range tags {
		mod, err := serve(repo, tag, version, out)
		if err != nil {
			return fmt.Errorf("%s: %w", tag, err)
		}
		fmt.Printf("%s@%s\n", mod, version)
	}
	return nil
}

// serve writes the .info, .mod, .zip and list files of the module tagged tag.
func serve(repo, tag, version, out string) (string, error) {
	dir := strings.TrimSuffix(strings.TrimSuffix(tag, version), "/")
	goMod, err := git(repo, "show", tag+":"+path.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	f, err := modfile.ParseLax("go.mod", []byte(goMod), nil)
	if err != nil {
		return "", fmt.Errorf("parse go.mod: %w", err)
	}
	if f.Module == nil {
		return "", errors.New("go.mod has no module line")
	}
	mv := module.Version{Path: f.Module.Mod.Path, Version: version}
	if err := module.Check(mv.Path, mv.Version); err != nil {
		return "", err
	}
	escaped, err := module.EscapePath(mv.Path)
	if err != nil {
		return "", err
	}
	vdir := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return "", err
	}

	committed, err := git(repo, "log", "-1", "--format=%cI", tag+"^{commit}")
	if err != nil {
		return "", err
	}
	when, err := time.Parse(time.RFC3339, strings.TrimSpace(committed))
	if err != nil {
		return "", fmt.Errorf("commit time: %w", err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, when.UTC()})
	if err != nil {
		return "", err
	}

	var z bytes.Buffer
	// CreateFromVCS archives the tagged commit and leaves out nested modules,
	// exactly the files the go command puts in a module zip.
	if err := zip.CreateFromVCS(&z, mv, repo, tag, dir); err != nil {
		return "", err
	}
	for name, data := range map[string][]byte{version + ".info": info, version + ".mod": []byte(goMod), version + ".zip": z.Bytes()} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			return "", err
		}
	}
	return mv.Path, addToList(filepath.Join(vdir, "list"), version)
}

// addToList adds version to a proxy's list file, which `go get m@latest`
// and `go list -m -versions` read.
func addToList(file, version string) error {
	data, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	versions := strings.Fields(string(data))
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	semver.Sort(versions)
	return os.WriteFile(file, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}

var git = gitexec.Run

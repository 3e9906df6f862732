// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Command release cuts a release of the modules that versions.yaml lists,
// the way contrib's and core's multimod does: every requirement between them
// names the release version, and every module is tagged at one commit
// (docs/releasing.md). It pushes nothing.
//
//	release check            versions.yaml, every go.mod and the two ocb manifests name one version
//	release prepare VERSION  the release commit and the tags of VERSION, in this clone
//	release manifest         print the README's ocb manifest (what make rehearse builds)
//	release tags VERSION     print the tags of VERSION, one a line
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage: release [-C dir] check | prepare VERSION | manifest | tags VERSION")

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	dir := fs.String("C", ".", "a directory of the checkout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) == 0 {
		return errUsage
	}
	top, err := git(*dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	root := strings.TrimSpace(top)

	switch cmd := args[0]; {
	case cmd == "prepare" && len(args) == 2:
		return prepare(root, args[1], stdout)
	case cmd == "check" && len(args) == 1:
		l, err := loadLayout(root)
		if err != nil {
			return err
		}
		_, set := l.set()
		if err := l.check(set.Version); err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%d modules name %s; the README's manifest and builder-config.yaml pin it\n", len(l.released()), set.Version)
		return err
	case cmd == "manifest" && len(args) == 1:
		data, err := os.ReadFile(root + "/README.md")
		if err != nil {
			return err
		}
		text, _, err := readmeManifest(string(data))
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, text)
		return err
	case cmd == "tags" && len(args) == 2:
		if err := validVersion(args[1]); err != nil {
			return err
		}
		l, err := loadLayout(root)
		if err != nil {
			return err
		}
		for _, m := range l.released() {
			if _, err := fmt.Fprintln(stdout, m.tag(args[1])); err != nil {
				return err
			}
		}
		return nil
	default:
		return errUsage
	}
}

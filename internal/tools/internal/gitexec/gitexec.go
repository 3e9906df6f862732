// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package gitexec runs git for the release tools, with git's own complaint
// in the error.
package gitexec

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
)

// Run runs git with args in dir and returns its standard output.
func Run(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

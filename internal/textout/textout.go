// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package textout writes the command-line programs' reports.
package textout

import (
	"fmt"
	"io"
)

// Printer writes formatted text and keeps the first error, so a report
// reads as a run of Printf calls and still reports a broken output once,
// at the end, instead of after every line.
type Printer struct {
	W   io.Writer
	Err error
}

// Printf writes unless an earlier write failed.
func (p *Printer) Printf(format string, args ...any) {
	if p.Err == nil {
		_, p.Err = fmt.Fprintf(p.W, format, args...)
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package mdcode reads the fenced code blocks of the Markdown docs, so that
// tests can run the configs and commands the docs show and hold their
// sample output to what a real run prints.
package mdcode // import "github.com/streamstall/streamstall/internal/testbed/mdcode"

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
)

// Block is one fenced code block.
type Block struct {
	// Info is the fence's info string: the language (yaml, sh, ...) or empty.
	Info string
	// Section is the text of the last heading above the block.
	Section string
	// Line is the 1-based line of the opening fence.
	Line int
	// Text is the content, each line ending in a newline, with the fence's
	// indentation removed (blocks inside list items).
	Text string
}

// File returns the fenced code blocks of the Markdown file at path.
func File(path string) ([]Block, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	blocks, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return blocks, nil
}

// Parse returns the fenced code blocks (``` fences) of a Markdown document.
func Parse(doc []byte) ([]Block, error) {
	var (
		blocks  []Block
		cur     *Block
		indent  string
		section string
		text    strings.Builder
	)
	sc := bufio.NewScanner(bytes.NewReader(doc))
	sc.Buffer(nil, len(doc)+1) // a line may be as long as the document
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if cur != nil {
			if strings.HasPrefix(trimmed, "```") && strings.TrimSpace(trimmed) == "```" {
				cur.Text = text.String()
				blocks = append(blocks, *cur)
				cur = nil
				continue
			}
			text.WriteString(strings.TrimPrefix(line, indent))
			text.WriteByte('\n')
			continue
		}
		switch {
		case strings.HasPrefix(trimmed, "```"):
			indent = line[:len(line)-len(trimmed)]
			cur = &Block{Info: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), Section: section, Line: n}
			text.Reset()
		case strings.HasPrefix(line, "#"):
			section = strings.TrimSpace(strings.TrimLeft(line, "#"))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("line %d: unclosed code block", cur.Line)
	}
	return blocks, nil
}

// In returns the blocks of the section whose heading starts with section,
// in order.
func In(blocks []Block, section string) []Block {
	var out []Block
	for _, b := range blocks {
		if strings.HasPrefix(b.Section, section) {
			out = append(out, b)
		}
	}
	return out
}

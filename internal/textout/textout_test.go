// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package textout

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// failAfter accepts n writes, then fails every one.
type failAfter struct {
	n   int
	out strings.Builder
}

var errBroken = errors.New("broken pipe")

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errBroken
	}
	f.n--
	return f.out.Write(p)
}

func TestPrinterKeepsTheFirstError(t *testing.T) {
	w := &failAfter{n: 1}
	p := &Printer{W: w}
	p.Printf("%d\n", 1)
	assert.NoError(t, p.Err)
	p.Printf("%d\n", 2)
	assert.ErrorIs(t, p.Err, errBroken)
	w.n = 5 // writable again: nothing more is written once a write failed
	p.Printf("%d\n", 3)
	assert.Equal(t, "1\n", w.out.String())
	assert.ErrorIs(t, p.Err, errBroken)
}

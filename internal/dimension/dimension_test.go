// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package dimension

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func named(names ...string) []Dimension {
	dims := make([]Dimension, len(names))
	for i, n := range names {
		dims[i] = Dimension{Name: n}
	}
	return dims
}

func TestCheck(t *testing.T) {
	assert.Empty(t, Check(nil, "a"))
	assert.Empty(t, Check(named("x", "y"), "a"))
	errs := Check(named("", "x", "a", "x"), "a")
	require.Len(t, errs, 3)
	assert.EqualError(t, errs[0], "dimensions[0]: name must not be empty")
	assert.EqualError(t, errs[1], `dimensions[2]: duplicate or reserved dimension "a"`)
	assert.EqualError(t, errs[2], `dimensions[3]: duplicate or reserved dimension "x"`)
}

func TestNames(t *testing.T) {
	assert.Equal(t, []string{"x", "", "y"}, Names(named("x", "", "y")))
	assert.Empty(t, Names(nil))
}

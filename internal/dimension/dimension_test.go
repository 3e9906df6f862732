package dimension

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	assert.Empty(t, Check(nil, "a"))
	assert.Empty(t, Check([]string{"x", "y"}, "a"))
	errs := Check([]string{"", "x", "a", "x"}, "a")
	require.Len(t, errs, 3)
	assert.EqualError(t, errs[0], "dimensions[0]: name must not be empty")
	assert.EqualError(t, errs[1], `dimensions[2]: duplicate or reserved dimension "a"`)
	assert.EqualError(t, errs[2], `dimensions[3]: duplicate or reserved dimension "x"`)
}

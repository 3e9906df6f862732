// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The llm.hedge.trigger values of docs/contract.md section 5; the primary has none.
func TestTriggerString(t *testing.T) {
	assert.Empty(t, TriggerPrimary.String())
	assert.Equal(t, "ttft", TriggerTTFT.String())
	assert.Equal(t, "stall", TriggerStall.String())
	assert.Equal(t, "error", TriggerError.String())
}

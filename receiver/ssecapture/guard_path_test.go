// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

// TestGuardRefusesAPathThatLeavesAnAlternatesPrefix: with the primary at
// the root and an alternate under /openai, a path the primary would take
// but that leaves the alternate's prefix gets the primary check's 400
// before any attempt; a model entry's alternates are checked for the calls
// of its models.
func TestGuardRefusesAPathThatLeavesAnAlternatesPrefix(t *testing.T) {
	f := newGuardFixture(t, fakellm.Script{Status: http.StatusServiceUnavailable}, fakellm.Script{TTFTMillis: 1, GapsMillis: []float64{1}},
		func(gc *GuardConfig) {
			alt := gc.Hedge.Alternates[0]
			alt.Endpoint += "/openai"
			gc.Hedge.Alternates = nil // the default rule has none
			gc.Models = []ModelGuardConfig{{Model: "gpt-*", Hedge: ModelHedgeOverrides{Alternates: &[]AlternateConfig{alt}}}}
		})
	addr := strings.TrimPrefix(f.proxyURL, "http://")
	escape := "/v1/%2e%2e/%2e%2e/admin/v1/chat/completions"
	call := func(model string) int {
		return headerRequest(t, addr, rawPost(addr, escape, "Connection: close\r\n", fmt.Sprintf(`{"model":%q,"stream":true}`, model)))
	}
	assert.Equal(t, http.StatusBadRequest, call("gpt-4o"), "the rule of gpt-* may send the call under /openai")
	assert.Empty(t, f.alternate.Requests(), "the alternate got a path out of its prefix")
	// The default rule has no alternate: the path goes to the primary at
	// the root (whose fakellm knows no such path).
	assert.Equal(t, http.StatusNotFound, call("o3"))
}

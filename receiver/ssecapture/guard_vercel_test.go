// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vercelDir holds the Vercel AI SDK project the test runs; its packages are
// installed with `npm ci --prefix receiver/ssecapture/testdata/vercel`.
var vercelDir = filepath.Join("testdata", "vercel")

// vercelRun is what stream.mjs prints: the text deltas the SDK delivered
// and the error parts it raised.
type vercelRun struct {
	Texts  []string `json:"texts"`
	Errors []struct {
		TypeValidation bool   `json:"typeValidation"`
		JSON           string `json:"json"`
	} `json:"errors"`
}

// TestVercelAISDKRaisesOnTheGuardsStallFrame: the Vercel AI SDK's OpenAI
// providers, Chat Completions (openai.chat) and Responses (openai), read
// the guard's stall frame through the proxy as the API's error, not as a
// chunk that fails their schema (AI_TypeValidationError), after the
// content that came before the stall. It needs node and the project's
// packages, and is skipped without them.
func TestVercelAISDKRaisesOnTheGuardsStallFrame(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the Vercel AI SDK test needs it (Node 18 or later)")
	}
	if _, err := os.Stat(filepath.Join(vercelDir, "node_modules", "ai")); err != nil {
		t.Skip("the Vercel AI SDK is not installed: run npm ci --prefix receiver/ssecapture/testdata/vercel")
	}
	for _, api := range []string{"chat", "responses"} {
		t.Run(api, func(t *testing.T) {
			proxyURL := guardedProxy(t, stallingUpstream(t, stalledOpeners[api]), func(g *GuardConfig) {
				g.StallTimeout = AutoDuration(guardStallTimeout)
			})
			cmd := exec.CommandContext(testContext(t), node, "stream.mjs", proxyURL+"/v1", api)
			cmd.Dir = vercelDir
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			require.NoError(t, err, "node stream.mjs: %s", stderr.String())
			var run vercelRun
			require.NoError(t, json.Unmarshal(out, &run), "%s", out)
			assert.Equal(t, []string{firstText, secondText}, run.Texts, "the content before the stall is delivered")
			require.Len(t, run.Errors, 1, "%s", out)
			e := run.Errors[0]
			assert.False(t, e.TypeValidation, "not a chunk that fails the provider's schema: %s", e.JSON)
			assert.Contains(t, e.JSON, "stream stalled")
			assert.Contains(t, e.JSON, `"code":"stall_timeout"`, "the API's error object")
			assert.NotContains(t, e.JSON, secondText)
			if api == "responses" {
				assert.Contains(t, e.JSON, `"sequence_number":5`)
			}
		})
	}
}

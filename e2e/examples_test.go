// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
)

// TestExamplesValidate runs `otelcol-streamstall validate` on every config of
// the gallery, so an example can never rot.
func TestExamplesValidate(t *testing.T) {
	bin := binary(t, "STREAMSTALL_OTELCOL", "otelcol-streamstall")
	configs, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil || len(configs) == 0 {
		t.Fatalf("no example configs found: %v", err)
	}
	for _, cfg := range configs {
		t.Run(filepath.Base(cfg), func(t *testing.T) {
			cmd := exec.Command(bin, "validate", "--config", cfg)
			cmd.Env = append(cmd.Environ(), "PROXY_TOKEN=example-token")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("validate %s: %v\n%s", cfg, err, out)
			}
		})
	}
}

// TestExamplesLimitMemory holds every example to docs/deployment.md's advice:
// a memory_limiter runs first in every pipeline that has processors, so a
// burst is refused before it is held.
func TestExamplesLimitMemory(t *testing.T) {
	configs, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	require.NoError(t, err)
	for _, cfg := range configs {
		t.Run(filepath.Base(cfg), func(t *testing.T) {
			b, err := os.ReadFile(cfg)
			require.NoError(t, err)
			r, err := confmap.NewRetrievedFromYAML(b)
			require.NoError(t, err)
			conf, err := r.AsConf()
			require.NoError(t, err)
			pipelines, _ := conf.Get("service::pipelines").(map[string]any)
			require.NotEmpty(t, pipelines)
			limited := 0
			for name, p := range pipelines {
				procs, _ := p.(map[string]any)["processors"].([]any)
				if len(procs) == 0 {
					continue
				}
				first, _ := procs[0].(string)
				assert.True(t, strings.HasPrefix(first, "memory_limiter"), "pipeline %s starts with %q, not a memory_limiter", name, first)
				limited++
			}
			assert.Positive(t, limited, "no pipeline with processors")
		})
	}
}

//go:build e2e

package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"
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

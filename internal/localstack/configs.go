package localstack

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// StartCollectorFiles runs the ocb-built collector bin with the config
// files in order (later ones merge over earlier ones, as the collector
// merges every --config), plus a health_check config written into dir; it
// returns once the collector reports ready. Tests use it to run a config of
// examples/ as it is, with an override that only moves its endpoints to
// loopback ports.
func StartCollectorFiles(ctx context.Context, bin, dir string, files ...string) (*Process, error) {
	health, err := FreePort()
	if err != nil {
		return nil, err
	}
	extra, err := WriteFile(dir, "otelcol-health.yaml", Fill(healthConfig, "HEALTH", health))
	if err != nil {
		return nil, err
	}
	var args []string
	for _, f := range append(files, extra) {
		args = append(args, "--config", f)
	}
	p, err := Start("otelcol-streamstall", bin, args...)
	if err != nil {
		return nil, err
	}
	if err := p.WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/", health), http.StatusOK); err != nil {
		p.Stop(5 * time.Second)
		return nil, err
	}
	return p, nil
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// healthConfig is merged into every collector config the stack starts: the
// health_check extension tells when the collector is ready, and the
// collector's own metrics stay off (no port to collide on) unless a test
// asks for them on a port of its choosing (selfMetricsConfig).
const healthConfig = `
extensions:
  health_check:
    endpoint: 127.0.0.1:${HEALTH}
service:
  extensions: [health_check${EXTENSIONS}]
  telemetry:
    metrics:
      level: none
`

// selfMetricsConfig is merged after healthConfig when a test reads the
// collector's own metrics: level detailed (every receiver and component
// counter), served for Prometheus to pull on a loopback port.
const selfMetricsConfig = `
service:
  telemetry:
    metrics:
      level: detailed
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: ${PORT}
`

// StartCollector writes config (receivers, processors, exporters,
// connectors and pipelines) into dir and runs the ocb-built collector bin
// with it, merged with a health_check config; it returns once the collector
// reports ready. The merge replaces service.extensions, so extensions the
// config defines are enabled by naming them here.
func StartCollector(ctx context.Context, bin, dir, config string, extensions ...string) (*Process, error) {
	main, err := WriteFile(dir, "otelcol.yaml", config)
	if err != nil {
		return nil, err
	}
	return startCollector(ctx, bin, dir, []string{main}, extensions, 0)
}

// StartCollectorFiles runs the ocb-built collector bin with the config
// files in order (later ones merge over earlier ones, as the collector
// merges every --config), plus a health_check config written into dir; it
// returns once the collector reports ready. Tests use it to run a config of
// examples/ as it is, with an override that only moves its endpoints to
// loopback ports.
func StartCollectorFiles(ctx context.Context, bin, dir string, files ...string) (*Process, error) {
	return startCollector(ctx, bin, dir, files, nil, 0)
}

// StartCollectorFilesWithMetrics is StartCollectorFiles with the
// collector's own metrics (otelcol_receiver_accepted_spans and the
// components' counters) on, at level detailed, served in the Prometheus
// text format at http://127.0.0.1:metricsPort/metrics.
func StartCollectorFilesWithMetrics(ctx context.Context, bin, dir string, metricsPort int, files ...string) (*Process, error) {
	return startCollector(ctx, bin, dir, files, nil, metricsPort)
}

func startCollector(ctx context.Context, bin, dir string, files, extensions []string, metricsPort int) (*Process, error) {
	health, err := FreePort()
	if err != nil {
		return nil, err
	}
	extra, err := WriteFile(dir, "otelcol-health.yaml", Fill(healthConfig, "HEALTH", health, "EXTENSIONS", extensionList(extensions)))
	if err != nil {
		return nil, err
	}
	files = append(append([]string(nil), files...), extra)
	if metricsPort != 0 {
		self, err := WriteFile(dir, "otelcol-self-metrics.yaml", Fill(selfMetricsConfig, "PORT", metricsPort))
		if err != nil {
			return nil, err
		}
		files = append(files, self)
	}
	var args []string
	for _, f := range files {
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

func extensionList(names []string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(", ")
		b.WriteString(n)
	}
	return b.String()
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// The collector the demo runs: the proxy and an OTLP receiver (for the
// hedging client's spans) -> stall -> the demo's own OTLP sink, the debug
// exporter (into the log file) and stall_metrics -> sink and Prometheus.
const collectorConfig = `
receivers:
  sse_capture:
    proxy:
      endpoint: 127.0.0.1:${PROXY}
      service_name: ${SERVICE}
      upstream:
        endpoint: ${FAKELLM}
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${OTLP}
processors:
  stall:
    stall_threshold: 2s
connectors:
  stall_metrics:
    flush_interval: 1s
exporters:
  debug:
    verbosity: basic
  otlp_http/demo:
    endpoint: ${SINK}
    encoding: json
  prometheus:
    endpoint: 127.0.0.1:${PROM}
${JAEGER_EXPORTER}
service:
  pipelines:
    traces:
      receivers: [sse_capture, otlp]
      processors: [stall]
      exporters: [otlp_http/demo, debug, stall_metrics${JAEGER_PIPELINE}]
    metrics:
      receivers: [stall_metrics]
      exporters: [otlp_http/demo, prometheus]
`

const jaegerExporter = `  otlp_grpc/jaeger:
    endpoint: ${JAEGER_OTLP}
    tls:
      insecure: true`

// proxyService is the service.name of the proxy's spans (the hedging
// client's are filed under proxyService-gateway).
const proxyService = "streamstall-demo"

type stack struct {
	dir                  string
	fakellmURL, proxyURL string
	otlpURL, promURL     string
	sink                 *harness.Sink
	jaeger               *harness.Jaeger
	procs                []*harness.Process
}

func (s *stack) stop() {
	defer s.saveLogs()
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].Stop(5 * time.Second)
	}
	if s.sink != nil {
		_ = s.sink.Close()
	}
}

func startStack(ctx context.Context, o options) (_ *stack, err error) {
	s := &stack{}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	if s.dir, err = harness.TempDir(); err != nil {
		return nil, err
	}
	ports := make([]int, 4)
	for i := range ports {
		if ports[i], err = harness.FreePort(); err != nil {
			return nil, err
		}
	}
	fakellmPort, proxyPort, otlpPort, promPort := ports[0], ports[1], ports[2], ports[3]
	s.fakellmURL = fmt.Sprintf("http://127.0.0.1:%d", fakellmPort)
	s.proxyURL = fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	s.otlpURL = fmt.Sprintf("http://127.0.0.1:%d", otlpPort)
	s.promURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", promPort)

	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	fake, err := harness.Start("fakellm", o.fakellm, "-addr", fmt.Sprintf("127.0.0.1:%d", fakellmPort),
		"-profile", "steady", "-seed", fmt.Sprint(o.seed), "-time-factor", fmt.Sprint(o.timeFactor), "-chunks", "60")
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, fake)
	if err := fake.WaitHTTP(startCtx, s.fakellmURL+"/_fakellm/requests", http.StatusOK); err != nil {
		return nil, err
	}

	if s.sink, err = harness.StartSink(); err != nil {
		return nil, err
	}
	jaegerExp, jaegerPipe := "", ""
	if o.jaeger != "" {
		if s.jaeger, err = harness.StartJaeger(startCtx, o.jaeger, s.dir); err != nil {
			return nil, err
		}
		s.procs = append(s.procs, s.jaeger.Process)
		jaegerExp = harness.Fill(jaegerExporter, "JAEGER_OTLP", s.jaeger.OTLPGRPC)
		jaegerPipe = ", otlp_grpc/jaeger"
	}
	cfg := harness.Fill(collectorConfig, "PROXY", proxyPort, "FAKELLM", s.fakellmURL, "OTLP", otlpPort,
		"SINK", s.sink.URL, "PROM", promPort, "SERVICE", proxyService,
		"JAEGER_EXPORTER", jaegerExp, "JAEGER_PIPELINE", jaegerPipe)
	col, err := harness.StartCollector(startCtx, o.otelcol, s.dir, cfg)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, col)
	return s, nil
}

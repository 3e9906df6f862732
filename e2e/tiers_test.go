// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// The overrides move the examples' endpoints to loopback ports and put a
// sink in place of the gateway's trace backend; they change nothing of the
// processing. The connector flushes every second instead of every 15 s so
// that the test does not wait.
const (
	agentOverride = `
receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:${HTTP}}
exporters:
  otlp_grpc/gateway:
    endpoint: 127.0.0.1:${GATEWAY}
`
	gatewayOverride = `
receivers:
  otlp:
    protocols:
      grpc: {endpoint: 127.0.0.1:${GRPC}}
      http: {endpoint: 127.0.0.1:${HTTP}}
connectors:
  stall_metrics:
    flush_interval: 1s
exporters:
  otlp_http/sink:
    endpoint: ${SINK}
  prometheus:
    endpoint: 127.0.0.1:${PROM}
service:
  pipelines:
    traces:
      exporters: [otlp_http/sink, stall_metrics]
`
)

// exampleCollector runs examples/<example> merged with override.
func exampleCollector(t *testing.T, example, override string) {
	t.Helper()
	dir := t.TempDir()
	over, err := harness.WriteFile(dir, "override.yaml", override)
	require.NoError(t, err)
	abs, err := filepath.Abs(filepath.Join("..", "examples", example))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := harness.StartCollectorFiles(ctx, binary(t, "STREAMSTALL_OTELCOL", "otelcol-streamstall"), dir, abs, over)
	require.NoError(t, err, example)
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("---- %s output ----\n%s", example, p.Output())
		}
	})
}

type gateway struct {
	sink     *harness.Sink
	http     int // OTLP/HTTP, for apps that send straight to the gateway
	grpc     int // OTLP/gRPC, for agents
	promPort int
}

func startGateway(t *testing.T) gateway {
	t.Helper()
	g := gateway{sink: startSink(t), http: freePort(t), grpc: freePort(t), promPort: freePort(t)}
	exampleCollector(t, "gateway-tier.yaml", fill(gatewayOverride, "GRPC", g.grpc, "HTTP", g.http, "SINK", g.sink.URL, "PROM", g.promPort))
	return g
}

// tierSpans are the spans both runs receive: two stalls, none, 35 stalls
// (more than the processor's default max_stall_events, 32) and an
// Anthropic call with one stall; default stall_threshold 2 s.
func tierSpans(t *testing.T) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(semconv.AttrServiceName, "tiers-e2e")
	ss := rs.ScopeSpans().AppendEmpty()
	start := time.Now().Add(-time.Minute)
	streamingSpan(ss, "two-stalls", semconv.EventChunk, start, 100, 150, 200, 3200, 3250, 9250, 9300, 9350).
		Attributes().PutStr(semconv.AttrRequestModel, "m-two")
	streamingSpan(ss, "steady", semconv.EventChunk, start, 100, 150, 200, 250).
		Attributes().PutStr(semconv.AttrRequestModel, "m-steady")
	many := []int64{100}
	for i := range int64(35) {
		many = append(many, many[len(many)-1]+20, many[len(many)-1]+20+2100+100*i)
	}
	streamingSpan(ss, "many-stalls", semconv.EventChunk, start, many...).
		Attributes().PutStr(semconv.AttrRequestModel, "m-many")
	a := streamingSpan(ss, "anthropic", semconv.EventChunk, start, 300, 320, 2900, 2920).Attributes()
	a.PutStr(semconv.AttrSystem, "anthropic")
	a.PutStr(semconv.AttrRequestModel, "claude-one")
	body, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	return body
}

func labelKey(m *dto.Metric) string {
	var ls []string
	for _, l := range m.GetLabel() {
		ls = append(ls, l.GetName()+"="+l.GetValue())
	}
	slices.Sort(ls)
	return strings.Join(ls, ",")
}

// TestTwoTiers runs examples/agent-tier.yaml and examples/gateway-tier.yaml
// as two collectors (app -> agent -> gateway) and, beside them, the gateway
// alone (app -> gateway), sends both the same spans, and checks what
// docs/deployment.md says: the same span figures and stall events; the
// chunk events gone behind the agent; the same metrics except no
// time_per_output_chunk values, and stall durations beyond the span's
// stall events recorded at their mean.
func TestTwoTiers(t *testing.T) {
	two := startGateway(t)
	agentHTTP := freePort(t)
	exampleCollector(t, "agent-tier.yaml", fill(agentOverride, "HTTP", agentHTTP, "GATEWAY", two.grpc))
	one := startGateway(t)

	body := tierSpans(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, port := range []int{agentHTTP, one.http} {
		status, resp, err := postJSON(ctx, fmt.Sprintf("http://127.0.0.1:%d/v1/traces", port), body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, resp)
	}
	names := []string{"two-stalls", "steady", "many-stalls", "anthropic"}
	for _, g := range []gateway{one, two} {
		eventually(t, 30*time.Second, "the spans at the gateway's sink", func() error {
			for _, n := range names {
				if _, ok := g.sink.Span(n); !ok {
					return fmt.Errorf("%s: %w", n, errNotYet)
				}
			}
			return nil
		})
	}

	t.Run("spans", func(t *testing.T) {
		for _, n := range names {
			a, _ := one.sink.Span(n)
			b, _ := two.sink.Span(n)
			attrs, through := a.Attributes().AsRaw(), b.Attributes().AsRaw()
			require.Contains(t, attrs, semconv.AttrStallCount, "%s was enriched", n)
			// The seal is no figure: it marks chunk events the processor read
			// for its own collector's stall_metrics, and the agent tier sends
			// the gateway none to seal.
			delete(attrs, semconv.AttrFiguresSeal)
			delete(through, semconv.AttrFiguresSeal)
			assert.Equal(t, attrs, through, "%s: the same figures through both tiers", n)
			stallEvents := func(sp ptrace.Span) (stalls []map[string]any, chunks int) {
				for i := 0; i < sp.Events().Len(); i++ {
					ev := sp.Events().At(i)
					switch ev.Name() {
					case semconv.EventStall:
						m := ev.Attributes().AsRaw()
						m["time"] = ev.Timestamp().AsTime()
						stalls = append(stalls, m)
					case semconv.EventChunk:
						chunks++
					}
				}
				return stalls, chunks
			}
			sa, ca := stallEvents(a)
			sb, cb := stallEvents(b)
			assert.Equal(t, sa, sb, "%s: the same stall events", n)
			assert.EqualValues(t, attrs[semconv.AttrChunkCount], ca, "%s: single tier keeps the chunk events", n)
			assert.Zero(t, cb, "%s: the agent dropped the chunk events", n)
		}
		sp, _ := two.sink.Span("many-stalls")
		assert.EqualValues(t, 35, sp.Attributes().AsRaw()[semconv.AttrStallCount])
	})

	t.Run("metrics", func(t *testing.T) {
		scrapeBoth := func() (a, b map[string]*dto.MetricFamily) {
			var err error
			eventually(t, 30*time.Second, "both gateways export the four calls", func() error {
				for _, p := range []struct {
					port int
					mfs  *map[string]*dto.MetricFamily
				}{{one.promPort, &a}, {two.promPort, &b}} {
					if *p.mfs, err = scrape(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", p.port)); err != nil {
						return err
					}
					total := 0.0
					for _, m := range (*p.mfs)["llm_stream_calls_total"].GetMetric() {
						total += m.GetCounter().GetValue()
					}
					if total != 4 {
						return fmt.Errorf("%v calls: %w", total, errNotYet)
					}
				}
				return nil
			})
			return a, b
		}
		a, b := scrapeBoth()
		const perChunk = "gen_ai_client_operation_time_per_output_chunk_seconds"
		const stall = "llm_stream_stall_duration_seconds"
		require.Contains(t, a, perChunk)
		assert.NotContains(t, b, perChunk, "no gaps behind an agent that dropped the chunk events")
		compared := 0
		for name, fa := range a {
			connector := strings.HasPrefix(name, "llm_") || strings.HasPrefix(name, "gen_ai_")
			if name == perChunk || !connector {
				continue
			}
			fb, ok := b[name]
			if !assert.True(t, ok, "%s missing behind the agent", name) {
				continue
			}
			inB := map[string]*dto.Metric{}
			for _, m := range fb.GetMetric() {
				inB[labelKey(m)] = m
			}
			assert.Len(t, inB, len(fa.GetMetric()), name)
			for _, ma := range fa.GetMetric() {
				key := labelKey(ma)
				mb, ok := inB[key]
				if !assert.True(t, ok, "%s{%s} missing behind the agent", name, key) {
					continue
				}
				compared++
				if fa.GetType() == dto.MetricType_COUNTER {
					assert.Equal(t, ma.GetCounter().GetValue(), mb.GetCounter().GetValue(), "%s{%s}", name, key)
					continue
				}
				ha, hb := ma.GetHistogram(), mb.GetHistogram()
				assert.Equal(t, ha.GetSampleCount(), hb.GetSampleCount(), "%s{%s} count", name, key)
				assert.InDelta(t, ha.GetSampleSum(), hb.GetSampleSum(), 1e-9, "%s{%s} sum", name, key)
				if name == stall && strings.Contains(key, "gen_ai_request_model=m-many") {
					// 32 stall events, the 3 stalls beyond recorded at their mean.
					assert.EqualValues(t, 35, hb.GetSampleCount())
					continue
				}
				assert.Equal(t, ha.GetSchema(), hb.GetSchema(), "%s{%s} schema", name, key)
				assert.Equal(t, ha.GetZeroCount(), hb.GetZeroCount(), "%s{%s} zero count", name, key)
				assert.Equal(t, ha.GetPositiveSpan(), hb.GetPositiveSpan(), "%s{%s} buckets", name, key)
				assert.Equal(t, ha.GetPositiveDelta(), hb.GetPositiveDelta(), "%s{%s} buckets", name, key)
			}
		}
		// Four models: calls, TTFT, time to first answer, wall and active
		// generation; stalls of three.
		assert.Equal(t, 4+4+4+4+4+3, compared, "series compared")
	})
}

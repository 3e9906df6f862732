// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/streamstall/streamstall/hedge"
	"github.com/streamstall/streamstall/internal/advice"
	"github.com/streamstall/streamstall/internal/semconv"
)

const advisorConfig = `
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${OTLP}
processors:
  stall:
exporters:
  hedge_advisor:
    endpoint: 127.0.0.1:${ADVISOR}
    min_samples: 20
  otlp_http:
    endpoint: ${SINK}
    encoding: json
    compression: none
    retry_on_failure:
      enabled: false
    sending_queue:
      enabled: false
service:
  pipelines:
    traces:
      receivers: [otlp]
      processors: [stall]
      exporters: [hedge_advisor, otlp_http]
`

// The hedging client runs in processes of its own: the test binary started
// again with these variables set (see TestMain).
const (
	envClient   = "STREAMSTALL_E2E_HEDGE_CLIENT" // the client's service.name
	envFakeLLM  = "STREAMSTALL_E2E_FAKELLM_URL"
	envOTLP     = "STREAMSTALL_E2E_OTLP_URL" // empty: no export
	envAdvisor  = "STREAMSTALL_E2E_ADVISOR_URL"
	envCalls    = "STREAMSTALL_E2E_CALLS"
	clientModel = "gpt-4o"
)

func TestMain(m *testing.M) {
	if name := os.Getenv(envClient); name != "" {
		if err := runHedgeClient(name); err != nil {
			fmt.Fprintln(os.Stderr, "hedge client:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runHedgeClient makes the calls of one client process against fakellm,
// taking advice from the advisor and exporting its spans over OTLP, and
// prints one line per call: "call <i> <error or ok> <delay source of the
// primary> <its delay in ms>".
func runHedgeClient(name string) error {
	ctx := context.Background()
	mem := tracetest.NewInMemoryExporter()
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithSyncer(mem),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String(semconv.AttrServiceName, name))),
	}
	if u := os.Getenv(envOTLP); u != "" {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u+"/v1/traces"))
		if err != nil {
			return err
		}
		opts = append(opts, sdktrace.WithSyncer(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	defer func() { _ = tp.Shutdown(ctx) }()

	calls, err := strconv.Atoi(os.Getenv(envCalls))
	if err != nil {
		return err
	}
	src := func(n string) hedge.Source {
		return hedge.NewOpenAIChatSource(hedge.Endpoint{Name: n, BaseURL: os.Getenv(envFakeLLM) + "/v1", Model: clientModel})
	}
	h, err := hedge.New([]hedge.Source{src("a"), src("b")}, hedge.TracerProvider(tp),
		hedge.Advice(os.Getenv(envAdvisor), hedge.AdviceTimeout(time.Second)))
	if err != nil {
		return err
	}
	defer h.Close()
	for i := range calls {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := h.Complete(cctx, hedge.Request{Messages: []hedge.Message{{Role: "user", Content: "hello " + strconv.Itoa(i)}}})
		cancel()
		status := "ok"
		if err != nil {
			status = strings.ReplaceAll(err.Error(), " ", "_")
		}
		source, delay := "none", 0.0
		for _, s := range mem.GetSpans() {
			m := map[attribute.Key]attribute.Value{}
			for _, kv := range s.Attributes {
				m[kv.Key] = kv.Value
			}
			if v, ok := m[semconv.AttrHedgeAttempt]; ok && v.AsInt64() == 0 {
				source = m[semconv.AttrHedgeDelaySource].AsString()
				delay = m[semconv.AttrHedgeDelayMs].AsFloat64()
			}
		}
		mem.Reset()
		fmt.Printf("call %d %s %s %g\n", i, status, source, delay)
	}
	return nil
}

type callLine struct {
	ok      bool
	source  string
	delayMs float64
}

// runClient runs one client process to its end and parses its lines.
func runClient(name, fakeURL, otlpURL, advisorURL string, calls int) ([]callLine, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envClient+"="+name, envFakeLLM+"="+fakeURL, envOTLP+"="+otlpURL,
		envAdvisor+"="+advisorURL, envCalls+"="+strconv.Itoa(calls))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("client %s: %w\n%s\n%s", name, err, out, stderr.String())
	}
	var lines []callLine
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var i int
		var status, source string
		var delay float64
		if _, err := fmt.Sscanf(l, "call %d %s %s %g", &i, &status, &source, &delay); err != nil {
			continue // the test binary's own output
		}
		lines = append(lines, callLine{ok: status == "ok", source: source, delayMs: delay})
	}
	if len(lines) != calls {
		return nil, fmt.Errorf("client %s: %d calls reported, want %d:\n%s\n%s", name, len(lines), calls, out, stderr.String())
	}
	return lines, nil
}

func mustRunClient(t *testing.T, name, fakeURL, otlpURL, advisorURL string, calls int) []callLine {
	t.Helper()
	lines, err := runClient(name, fakeURL, otlpURL, advisorURL, calls)
	require.NoError(t, err)
	return lines
}

func fetchAdvice(url string) (advice.Response, error) {
	var resp advice.Response
	r, err := http.Get(url) //nolint:gosec // the test's own advisor on loopback
	if err != nil {
		return resp, err
	}
	defer func() { _ = r.Body.Close() }()
	if r.StatusCode != http.StatusOK {
		return resp, fmt.Errorf("advice answered %d", r.StatusCode)
	}
	return resp, json.NewDecoder(r.Body).Decode(&resp)
}

// TestFleetAdvice: two hedging client processes send their spans to the
// ocb-built collector running stall and hedge_advisor; a fresh third
// client's first call uses the advised delay; with the collector gone a
// client still works, on local learning.
func TestFleetAdvice(t *testing.T) {
	fakePort := freePort(t)
	fake := fmt.Sprintf("http://127.0.0.1:%d", fakePort)
	p := start(t, "fakellm", binary(t, "STREAMSTALL_FAKELLM", "fakellm"), "-addr", fmt.Sprintf("127.0.0.1:%d", fakePort),
		"-profile", "steady", "-time-factor", "0.01", "-chunks", "5")
	waitHTTP(t, p, fake+"/_fakellm/requests", http.StatusOK)

	sink := startSink(t)
	otlpPort, advisorPort := freePort(t), freePort(t)
	col := collector(t, fill(advisorConfig, "OTLP", otlpPort, "ADVISOR", advisorPort, "SINK", sink.URL))
	otlpURL := fmt.Sprintf("http://127.0.0.1:%d", otlpPort)
	advisorURL := fmt.Sprintf("http://127.0.0.1:%d", advisorPort)
	adviceURL := advisorURL + "/v1/hedge/advice?provider=openai&model=" + clientModel

	// Two clients, two processes, at the same time.
	var wg sync.WaitGroup
	results := make([][]callLine, 2)
	errs := make([]error, 2)
	for i, name := range []string{"client-a", "client-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = runClient(name, fake, otlpURL, advisorURL, 20)
		}()
	}
	wg.Wait()
	for i := range results {
		require.NoError(t, errs[i])
		for _, l := range results[i] {
			assert.True(t, l.ok)
		}
	}

	var advised float64
	eventually(t, 20*time.Second, "advice for openai/gpt-4o", func() error {
		resp, err := fetchAdvice(adviceURL)
		if err != nil {
			return err
		}
		if len(resp.Advice) != 1 || resp.Advice[0].HedgeDelayMs == nil {
			return fmt.Errorf("%+v: %w", resp, errNotYet)
		}
		advised = *resp.Advice[0].HedgeDelayMs
		return nil
	})
	t.Logf("advised hedge delay: %.3f ms", advised)

	third := mustRunClient(t, "client-c", fake, otlpURL, advisorURL, 1)
	require.True(t, third[0].ok)
	assert.Equal(t, semconv.HedgeDelaySourceFleet, third[0].source, "the first call of a fresh process uses the fleet's delay")
	assert.InEpsilon(t, advised, third[0].delayMs, 0.001)

	// The same, read from the span the collector received.
	eventually(t, 20*time.Second, "client-c's primary span at the sink", func() error {
		for _, s := range sink.Spans() {
			if s.Service != "client-c" {
				continue
			}
			attrs := s.Attributes().AsRaw()
			if n, ok := attrs[semconv.AttrHedgeAttempt].(int64); !ok || n != 0 {
				continue
			}
			if attrs[semconv.AttrHedgeDelaySource] != semconv.HedgeDelaySourceFleet {
				return fmt.Errorf("delay source %v", attrs[semconv.AttrHedgeDelaySource])
			}
			d, _ := attrs[semconv.AttrHedgeDelayMs].(float64)
			if d <= 0 || d < advised*0.999 || d > advised*1.001 {
				return fmt.Errorf("delay %v ms, advised %v", d, advised)
			}
			return nil
		}
		return errNotYet
	})

	// Without the advisor (the collector is gone) a fresh client still
	// works: the fallback first, its own learning once it has 20 samples.
	col.Stop(10 * time.Second)
	alone := mustRunClient(t, "client-d", fake, "", advisorURL, 25)
	for i, l := range alone {
		assert.True(t, l.ok, "call %d", i)
	}
	assert.Equal(t, semconv.HedgeDelaySourceFallback, alone[0].source)
	assert.Equal(t, semconv.HedgeDelaySourceLocal, alone[len(alone)-1].source)
}

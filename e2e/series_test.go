// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// seriesConfig is metricsPipelineConfig with the connector's max_series set.
var seriesConfig = strings.Replace(metricsPipelineConfig, "    flush_interval: 1s\n",
	"    flush_interval: 1s\n    max_series: ${SERIES}\n", 1)

// seriesOTLPConfig is seriesConfig with the metrics sent over OTLP (to a
// Prometheus with OTLP ingest, or any OTLP backend) instead of scraped.
var seriesOTLPConfig = strings.NewReplacer(
	"  prometheus:\n    endpoint: 127.0.0.1:${PROM}\n", "  otlp_http:\n    endpoint: ${SINK}\n",
	"exporters: [prometheus]", "exporters: [otlp_http]",
).Replace(seriesConfig)

// TestConnectorMemoryPerSeries fills max_series attribute sets (one model
// each, every metric of a winning call with a stall and token usage), then
// either scrapes them three times through the prometheus exporter or lets
// the otlp_http exporter send them three times, and reads how far the whole
// collector's peak resident set rose above where it stood once started.
// This is the measurement behind docs/deployment.md's per-series figures and
// the connector's upper bound on max_series: it runs at the default
// max_series and at the bound, or at the count STREAMSTALL_SERIES names.
// (A peak resident set holds the Go GC's headroom over the garbage of every
// flush and scrape; internal/testbed/perf/memory-per-series.sh reads the
// live heap of the same pipeline in one process.)
func TestConnectorMemoryPerSeries(t *testing.T) {
	counts := []int{2000, 10000}
	if v := os.Getenv("STREAMSTALL_SERIES"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		counts = []int{n}
	}
	for _, n := range counts {
		t.Run("prometheus/"+strconv.Itoa(n), func(t *testing.T) { seriesMemory(t, n, scrapeSeries, seriesBudget) })
		t.Run("otlp/"+strconv.Itoa(n), func(t *testing.T) { seriesMemory(t, n, pushSeries, otlpSeriesBudget) })
	}
}

// seriesExport starts the collector with its metrics exporter, its OTLP
// receiver on port otlp, and returns a function that waits until the n
// series were exported, then for three more exports.
type seriesExport func(ctx context.Context, t *testing.T, otlp, n int) (*harness.Process, func())

func seriesMemory(t *testing.T, n int, export seriesExport, budget float64) {
	require.Contains(t, seriesConfig, "max_series: ${SERIES}", "the connector block of metricsPipelineConfig moved")
	require.Contains(t, seriesOTLPConfig, "exporters: [otlp_http]", "the exporter block of metricsPipelineConfig moved")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	otlp := freePort(t)
	col, exported := export(ctx, t, otlp, n)
	baseline, err := col.PeakRSS()
	require.NoError(t, err)

	start := time.Now().Add(-time.Minute)
	const perRequest = 500
	for first := 0; first < n; first += perRequest {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr(semconv.AttrServiceName, "e2e-series")
		ss := rs.ScopeSpans().AppendEmpty()
		for i := first; i < min(first+perRequest, n); i++ {
			sp := streamingSpan(ss, "chat", semconv.EventChunk, start, 100, 150, 200, 3200, 3250)
			sp.Attributes().PutStr(semconv.AttrRequestModel, fmt.Sprintf("model-%06d", i))
			sp.Attributes().PutInt(semconv.AttrUsageOutputTokens, 5)
			sp.Attributes().PutInt(semconv.AttrUsageInputTokens, 12)
		}
		body, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
		require.NoError(t, err)
		status, resp, err := postJSON(ctx, fmt.Sprintf("http://127.0.0.1:%d/v1/traces", otlp), body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, resp)
	}

	time.Sleep(3 * time.Second) // two flushes: every series is in the exporter
	ingested, err := col.PeakRSS()
	require.NoError(t, err)
	exported()
	peak, err := col.PeakRSS()
	require.NoError(t, err)
	perSeries := float64(peak-baseline) / float64(n)
	t.Logf("%d series: baseline %d MiB, before the first scrape or push %d MiB, peak %d MiB: %.1f KB per series, three exports included",
		n, baseline>>20, ingested>>20, peak>>20, perSeries/1000)
	require.Less(t, perSeries, budget, "per-series peak memory")
}

// scrapeSeries exports through the prometheus exporter and scrapes it as
// a dashboard's refreshes would.
func scrapeSeries(ctx context.Context, t *testing.T, otlp, n int) (*harness.Process, func()) {
	prom := freePort(t)
	col := collector(t, fill(seriesConfig, "OTLP", otlp, "PROM", prom, "SERIES", n))
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", prom)
	return col, func() {
		eventually(t, 2*time.Minute, "every series in the scrape", func() error {
			mfs, err := scrape(ctx, url)
			if err != nil {
				return err
			}
			mf, ok := mfs["llm_stream_calls_total"]
			if !ok || len(mf.GetMetric()) < n {
				return fmt.Errorf("%d of %d series: %w", len(mf.GetMetric()), n, errNotYet)
			}
			return nil
		})
		for range 3 { // a dashboard's refreshes
			_, err := scrape(ctx, url)
			require.NoError(t, err)
		}
	}
}

// pushSeries exports through otlp_http to an endpoint that decodes each
// request, counts the llm.stream.calls points and drops the rest.
func pushSeries(_ context.Context, t *testing.T, otlp, n int) (*harness.Process, func()) {
	var complete atomic.Int64 // requests that held every series
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		req := pmetricotlp.NewExportRequest()
		if err == nil {
			err = req.UnmarshalProto(b)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		points := 0
		for _, rm := range req.Metrics().ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					if m.Name() == semconv.MetricCalls {
						points += m.Sum().DataPoints().Len()
					}
				}
			}
		}
		if points >= n {
			complete.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(must(pmetricotlp.NewExportResponse().MarshalProto()))
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	col := collector(t, fill(seriesOTLPConfig, "OTLP", otlp, "SINK", "http://"+l.Addr().String(), "SERIES", n))
	return col, func() {
		// The first complete export, then three more (a cumulative flush
		// sends every series).
		eventually(t, 2*time.Minute, "every series pushed four times", func() error {
			if got := complete.Load(); got < 4 {
				return fmt.Errorf("%d complete exports: %w", got, errNotYet)
			}
			return nil
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// seriesBudget is docs/deployment.md's bound on the peak per attribute set,
// scrapes included: measured 73 to 101 KB at 2,000 sets and 104 to 134 KB
// at 10,000. otlpSeriesBudget is the bound behind otlp_http, pushes
// included, where the collector keeps nothing past a flush: measured 25 to
// 31 KB and 25 to 33 KB.
const (
	seriesBudget     = 192 << 10
	otlpSeriesBudget = 64 << 10
)

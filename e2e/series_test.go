// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

// seriesConfig is metricsPipelineConfig with the connector's max_series set.
var seriesConfig = strings.Replace(metricsPipelineConfig, "    flush_interval: 1s\n",
	"    flush_interval: 1s\n    max_series: ${SERIES}\n", 1)

// TestConnectorMemoryPerSeries fills max_series attribute sets (one model
// each, every metric of a winning call with a stall and token usage) and
// scrapes them through the prometheus exporter, then reads how far the whole
// collector's peak resident set rose above where it stood once started. This
// is the measurement behind docs/deployment.md's per-series figure and the
// connector's upper bound on max_series: it runs at the default max_series
// and at the bound, or at the count STREAMSTALL_SERIES names.
func TestConnectorMemoryPerSeries(t *testing.T) {
	counts := []int{2000, 10000}
	if v := os.Getenv("STREAMSTALL_SERIES"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		counts = []int{n}
	}
	for _, n := range counts {
		t.Run(strconv.Itoa(n), func(t *testing.T) { seriesMemory(t, n) })
	}
}

func seriesMemory(t *testing.T, n int) {
	require.Contains(t, seriesConfig, "max_series: ${SERIES}", "the connector block of metricsPipelineConfig moved")
	otlp, prom := freePort(t), freePort(t)
	col := collector(t, fill(seriesConfig, "OTLP", otlp, "PROM", prom, "SERIES", n))
	baseline, err := col.PeakRSS()
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
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

	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", prom)
	time.Sleep(3 * time.Second) // two flushes: every series is in the exporter
	ingested, err := col.PeakRSS()
	require.NoError(t, err)
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
	peak, err := col.PeakRSS()
	require.NoError(t, err)
	perSeries := float64(peak-baseline) / float64(n)
	t.Logf("%d series: baseline %d MiB, before the first scrape %d MiB, peak %d MiB: %.1f KB per series, scrape included",
		n, baseline>>20, ingested>>20, peak>>20, perSeries/1000)
	require.Less(t, perSeries, float64(seriesBudget), "per-series peak memory")
}

// seriesBudget is docs/deployment.md's bound on the peak per attribute set,
// scrape included: measured 87 KB at 2,000 sets and 135 KB at 10,000.
const seriesBudget = 192 << 10

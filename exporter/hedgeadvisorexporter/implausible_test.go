// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgeadvisorexporter

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/streamstall/streamstall/exporter/hedgeadvisorexporter/internal/metadatatest"
	"github.com/streamstall/streamstall/internal/semconv"
)

// An attempt with a valid 1 s TTFT and one chunk time past int64 puts no
// gap of 292 years into the gap sketch, nor its TTFT into the TTFT sketch:
// it is skipped whole and counted.
func TestImplausibleAttemptsAreSkippedAndCounted(t *testing.T) {
	cfg := testConfig()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	a, err := newAdvisor(metadatatest.NewSettings(tel), cfg, clockwork.NewFakeClockAt(t0))
	require.NoError(t, err)

	var specs []attemptSpec
	for range cfg.MinSamples {
		specs = append(specs, attemptSpec{provider: "p", model: "m", ttft: time.Second, gaps: []time.Duration{50 * time.Millisecond}})
	}
	td := traces(append(specs, attemptSpec{provider: "p", model: "m", ttft: time.Second})...)
	hostile := td.ResourceSpans().At(cfg.MinSamples).ScopeSpans().At(0).Spans().At(0)
	ev := hostile.Events().AppendEmpty()
	ev.SetName(semconv.EventChunk)
	ev.SetTimestamp(pcommon.Timestamp(math.MaxUint64))
	require.NoError(t, a.consumeTraces(context.Background(), td))

	_, resp := get(t, a, "")
	require.Len(t, resp.Advice, 1)
	assert.Equal(t, int64(cfg.MinSamples), resp.Advice[0].Samples)
	assert.InDelta(t, 50, resp.Advice[0].GapMs["p999"], 1, "no 292-year gap")
	assert.InDelta(t, 1000, resp.Advice[0].TTFTMs["p99"], 20)
	metadatatest.AssertEqualExporterHedgeAdvisorAttemptsImplausible(t, tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualExporterHedgeAdvisorAttemptsRecorded(t, tel, []metricdata.DataPoint[int64]{{Value: int64(cfg.MinSamples)}}, metricdatatest.IgnoreTimestamp())
}

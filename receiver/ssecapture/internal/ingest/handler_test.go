// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/streamstall/streamstall/internal/testbed/takingsink"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

func sumOf(t *testing.T, tel *componenttest.Telemetry, name string) int64 {
	t.Helper()
	m, err := tel.GetMetric(name)
	if err != nil {
		return 0
	}
	var total int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		total += dp.Value
	}
	return total
}

// testLimits are the receiver's defaults.
var testLimits = Limits{
	MaxBody: defaultMaxBody, MaxRecords: defaultMaxRecords, MaxChunks: defaultMaxChunks,
	MaxAttrs: defaultMaxAttrs, MaxValueLen: defaultMaxValueLength,
	MaxStartAge: defaultMaxStartAge, MaxClockSkew: defaultMaxClockSkew, MaxDuration: defaultMaxDuration,
}

// TestCountedBeforeHandedOn: the accepted and refused counters say how many
// spans the pipeline got, whatever it does with them afterwards.
func TestCountedBeforeHandedOn(t *testing.T) {
	const records = 7
	body := strings.Repeat(fmt.Sprintf(`{"name":"chat gpt-4o","start_time_unix_nano":%d,"chunk_offsets_ms":[1,2]}`+"\n", time.Now().UnixNano()), records)
	for _, tt := range []struct {
		name   string
		async  bool
		err    error
		status int
	}{
		{name: "moves the spans out", status: http.StatusOK},
		{name: "works on them after returning", async: true, status: http.StatusOK},
		{name: "moves them out and fails", err: errors.New("pipeline refused"), status: http.StatusServiceUnavailable},
		{name: "works on them after returning and fails", async: true, err: errors.New("pipeline refused"), status: http.StatusServiceUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tel := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
			set := receivertest.NewNopSettings(metadata.Type)
			set.TelemetrySettings = tel.NewTelemetrySettings()
			obs, err := receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
				ReceiverID: component.NewID(metadata.Type), Transport: "http", ReceiverCreateSettings: set,
			})
			require.NoError(t, err)
			sink := &takingsink.Sink{Async: tt.async, Err: tt.err}
			h := NewHandler(testLimits, clockwork.NewRealClock(), sink, obs)
			defer h.Stop()
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/x-ndjson")
			h.ServeHTTP(rec, req)
			require.Equal(t, tt.status, rec.Code, rec.Body.String())

			assert.Equal(t, records, sink.Taken())
			accepted := sumOf(t, tel, "otelcol_receiver_accepted_spans")
			refused := sumOf(t, tel, "otelcol_receiver_refused_spans") + sumOf(t, tel, "otelcol_receiver_failed_spans")
			if tt.err == nil {
				assert.Equal(t, int64(records), accepted)
				assert.Zero(t, refused)
			} else {
				assert.Zero(t, accepted)
				assert.Equal(t, int64(records), refused)
			}
		})
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/streamstall/streamstall/internal/testbed/fakellm"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

func TestStartShutdownTwiceSameInstance(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	p := cfg.Proxy.GetOrInsertDefault()
	p.NetAddr.Endpoint = "127.0.0.1:0"
	p.Upstream.Endpoint = "http://127.0.0.1:1"
	cfg.Ingest.GetOrInsertDefault().NetAddr.Endpoint = "127.0.0.1:0"
	r, err := NewFactory().CreateTraces(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, r.Shutdown(context.Background()), "shutdown without start")
	for range 2 {
		require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
		require.NoError(t, r.Shutdown(context.Background()))
		require.NoError(t, r.Shutdown(context.Background()), "a second shutdown is harmless")
	}
}

func TestStartFailsOnBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	p := cfg.Proxy.GetOrInsertDefault()
	p.NetAddr.Endpoint = "127.0.0.1:0"
	p.Upstream.Endpoint = "http://127.0.0.1:1"
	cfg.Ingest.GetOrInsertDefault().NetAddr.Endpoint = ln.Addr().String()
	r, err := NewFactory().CreateTraces(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	require.NoError(t, err)
	require.Error(t, r.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, r.Shutdown(context.Background()))
}

// TestShutdownCutsStreams: a stream still running when Shutdown's context
// ends is cut (client and upstream), its span is accounted for, and no
// goroutine is left (goleak checks the package).
func TestShutdownCutsStreams(t *testing.T) {
	fake, err := fakellm.New(fakellm.Config{})
	require.NoError(t, err)
	log := &upstreamLog{next: fake}
	upstream := newTestServer(t, log)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	p := cfg.Proxy.GetOrInsertDefault()
	p.NetAddr.Endpoint = "127.0.0.1:0"
	p.Upstream.Endpoint = upstream
	sink := new(consumertest.TracesSink)
	tel := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tel.Shutdown(context.Background())) }()
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	r, err := NewFactory().CreateTraces(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	rcv := r.(*sseCaptureReceiver)
	require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))

	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, "http://"+rcv.addrs["proxy"].String()+shapes[0].path, strings.NewReader(shapes[0].body))
	require.NoError(t, err)
	req.Header = scriptHeader(t, fakellm.Script{TTFTMillis: 1, GapsMillis: []float64{60000}})
	resp, err := testClient(t).Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	_, err = bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_ = rcv.Shutdown(ctx) // reports the deadline: the stream had to be cut
	assert.Less(t, time.Since(start), 5*time.Second)
	reqs, err := fake.WaitFor(testContext(t), 1)
	require.NoError(t, err)
	assert.True(t, reqs[0].Disconnected, "the upstream request was cancelled")
	dropped := int64(0)
	if m, err := tel.GetMetric("otelcol_receiver_sse_capture_spans.dropped"); err == nil {
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			dropped += dp.Value
		}
	}
	assert.Equal(t, int64(1), int64(sink.SpanCount())+dropped, "the cut stream's span is delivered or counted as dropped")
}

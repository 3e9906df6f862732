// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig()
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg.(*Config), confmap.Validate(cfg)
}

func TestLoadConfig(t *testing.T) {
	cfg, err := loadConfig(t, "")
	require.NoError(t, err)
	require.True(t, cfg.Proxy.HasValue())
	assert.False(t, cfg.Ingest.HasValue())
	p := cfg.Proxy.Get()
	assert.Equal(t, "localhost:8787", p.NetAddr.Endpoint, "listeners default to localhost")
	assert.Equal(t, "https://api.openai.com", p.Upstream.Endpoint)
	assert.Equal(t, int64(4<<20), p.MaxRequestBody)
	assert.Equal(t, defaultQueueSize, p.QueueSize)
	assert.Equal(t, int64(64<<20), p.QueueBytes)
	assert.Equal(t, int64(64<<20), p.FrameBufferBytes)
	assert.Equal(t, ChunkEventsConfig{MaxChunkEvents: 2048, KeepGapsAbove: 2 * time.Second}, p.ChunkEvents)
	require.True(t, p.Upstream.Keepalive.HasValue())
	assert.Equal(t, defaultUpstreamIdleConns, p.Upstream.Keepalive.Get().MaxIdleConnsPerHost)
	assert.False(t, p.RecordKeepalives)
	assert.Empty(t, p.Provider)

	cfg, err = loadConfig(t, "both")
	require.NoError(t, err)
	p = cfg.Proxy.Get()
	assert.Equal(t, "localhost:9787", p.NetAddr.Endpoint)
	assert.Equal(t, 20*time.Second, p.Upstream.Timeout)
	assert.Equal(t, "anthropic", p.Provider)
	assert.True(t, p.RecordKeepalives)
	assert.Equal(t, int64(1<<20), p.MaxRequestBody)
	assert.Equal(t, 16384, p.MaxRequestHeaderBytes)
	assert.Equal(t, 50, p.QueueSize)
	assert.Equal(t, int64(1<<20), p.QueueBytes)
	assert.Equal(t, int64(2<<20), p.FrameBufferBytes)
	assert.Equal(t, ChunkEventsConfig{MaxChunkEvents: 512, KeepGapsAbove: 500 * time.Millisecond}, p.ChunkEvents)
	i := cfg.Ingest.Get()
	assert.Equal(t, "localhost:9788", i.NetAddr.Endpoint)
	assert.Equal(t, int64(2048), i.MaxRequestBody)
	assert.Equal(t, 8192, i.MaxRequestHeaderBytes)
	assert.Equal(t, 10, i.MaxRecords)
	assert.Equal(t, 100, i.MaxChunksPerRecord)
	assert.Equal(t, 16, i.MaxAttributesPerRecord)
	assert.Equal(t, 256, i.MaxAttributeValueLength)
	assert.Equal(t, time.Hour, i.MaxStartAge)
	assert.Equal(t, 30*time.Second, i.MaxClockSkew)
	assert.Equal(t, 10*time.Minute, i.MaxStreamDuration)
	assert.Equal(t, 5*time.Second, i.ReadTimeout)
	assert.Equal(t, ChunkEventsConfig{MaxChunkEvents: 256, KeepGapsAbove: time.Second}, i.ChunkEvents)

	cfg, err = loadConfig(t, "ingest_only")
	require.NoError(t, err)
	assert.False(t, cfg.Proxy.HasValue())
	i = cfg.Ingest.Get()
	assert.Equal(t, "localhost:8788", i.NetAddr.Endpoint, "listeners default to localhost")
	assert.Equal(t, int64(16<<20), i.MaxRequestBody)
	assert.Equal(t, 10000, i.MaxRecords)
	assert.Equal(t, 100000, i.MaxChunksPerRecord)
	assert.Equal(t, 128, i.MaxAttributesPerRecord)
	assert.Equal(t, 4096, i.MaxAttributeValueLength)
	assert.Equal(t, 24*time.Hour, i.MaxStartAge)
	assert.Equal(t, 5*time.Minute, i.MaxClockSkew)
	assert.Equal(t, time.Hour, i.MaxStreamDuration)
	assert.Equal(t, 30*time.Second, i.ReadTimeout)
	assert.Equal(t, 10*time.Second, i.ReadHeaderTimeout)
	assert.Equal(t, ChunkEventsConfig{MaxChunkEvents: 2048, KeepGapsAbove: 2 * time.Second}, i.ChunkEvents)
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		errs []error
		msgs []string
	}{
		{name: "none", errs: []error{errNoListener}},
		{name: "no_upstream", errs: []error{errNoUpstream}},
		{name: "bad_upstream", errs: []error{errUpstreamNotAbsURL}},
		{name: "bad_limits", errs: []error{errPositive, errNegativeClockSkew}, msgs: []string{
			"ingest: max_start_age must be positive", "ingest: max_stream_duration must be positive",
			"proxy: max_request_body must be positive", "proxy: queue_size must be positive",
			"proxy: max_request_header_bytes must be positive", "ingest: max_request_header_bytes must be positive",
			"ingest: max_request_body must be positive", "ingest: max_records must be positive",
			"ingest: max_chunks_per_record must be positive",
			"ingest: max_attributes_per_record must be positive", "ingest: max_attribute_value_length must be positive",
			"proxy: queue_bytes must be positive", "proxy: frame_buffer_bytes must be positive",
			"proxy: max_chunk_events must be from 4", "got 3", "proxy: keep_gaps_above must not be negative",
			"ingest: max_chunk_events must be from 4", "got 16385",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(t, tt.name)
			require.Error(t, err)
			for _, want := range tt.errs {
				assert.ErrorIs(t, err, want)
			}
			for _, msg := range tt.msgs {
				assert.ErrorContains(t, err, msg)
			}
		})
	}
}

func TestParseUpstream(t *testing.T) {
	_, err := parseUpstream("https://api.openai.com/v1?x=1")
	require.ErrorIs(t, err, errUpstreamHasQueries)
	_, err = parseUpstream("ftp://example.com")
	require.ErrorIs(t, err, errUpstreamNotAbsURL)
	_, err = parseUpstream("http://[::1")
	require.Error(t, err)
	u, err := parseUpstream("https://gateway.example/openai")
	require.NoError(t, err)
	assert.Equal(t, "/openai", u.Path)
}

func TestLoadConfigProxyBounds(t *testing.T) {
	cfg, err := loadConfig(t, "")
	require.NoError(t, err)
	p := cfg.Proxy.Get()
	assert.Equal(t, 256, p.MaxAttributeValueLength)
	assert.Equal(t, 20*time.Second, p.ShutdownTimeout, "under Kubernetes' 30 s grace period")
	assert.Equal(t, 5*time.Second, p.QueueDrainTimeout, "with the streams' 20 s, still under the 30 s grace period")
	assert.Equal(t, int64(128<<20), p.MaxDecodedResponseBytes)
	assert.Equal(t, time.Minute, p.SendTimeout, "nginx's send_timeout")
	assert.Equal(t, 10000, p.MaxConcurrentRequests)
	assert.Empty(t, p.AuthHeader)

	cfg, err = loadConfig(t, "proxy_bounds")
	require.NoError(t, err)
	p = cfg.Proxy.Get()
	assert.Equal(t, 1024, p.MaxAttributeValueLength)
	assert.Equal(t, 5*time.Second, p.ShutdownTimeout)
	assert.Equal(t, 2*time.Second, p.QueueDrainTimeout)
	assert.Equal(t, 2*time.Minute, p.SendTimeout)
	assert.Equal(t, 500, p.MaxConcurrentRequests)
	assert.Equal(t, int64(1<<20), p.MaxDecodedResponseBytes)

	_, err = loadConfig(t, "bad_proxy_bounds")
	require.ErrorIs(t, err, errPositive)
	assert.ErrorContains(t, err, "proxy: max_attribute_value_length must be positive")
	assert.ErrorContains(t, err, "proxy: max_decoded_response_bytes must be positive")
	require.ErrorIs(t, err, errNegativeShutdownTimeout)
	require.ErrorIs(t, err, errNegativeQueueDrain)
	require.ErrorIs(t, err, errNegativeSendTimeout)
	require.ErrorIs(t, err, errNegativeMaxConcurrent)
	require.ErrorIs(t, err, errNegativeMaxPerClient)
}

// TestExampleWithAuth: the proxy section of the auth example is valid and
// names the header its authenticator reads.
func TestExampleWithAuth(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("..", "..", "examples", "anthropic-proxy-with-auth.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub("receivers::sse_capture")
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig()
	require.NoError(t, sub.Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))
	p := cfg.(*Config).Proxy.Get()
	ext, err := cm.Sub("extensions::bearertokenauth/proxy")
	require.NoError(t, err)
	assert.Equal(t, ext.Get("header"), p.AuthHeader, "auth_header is the header the authenticator reads")
	assert.NotEqual(t, "authorization", strings.ToLower(p.AuthHeader), "the client's provider key keeps Authorization")
}

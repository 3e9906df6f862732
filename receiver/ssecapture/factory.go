// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/proxy"
)

const (
	defaultProxyEndpoint      = "localhost:8787"
	defaultIngestEndpoint     = "localhost:8788"
	defaultProxyMaxBody       = 4 << 20
	defaultIngestMaxBody      = 16 << 20
	defaultMaxRecords         = 10000
	defaultMaxChunksPerRecord = 100000
	// As the OpenTelemetry SDKs' default span attribute count limit.
	defaultMaxAttributesPerRecord = 128
	// Model names, ids and finish reasons are tens of bytes; 4 KiB leaves
	// room for long legitimate values while a record's attributes stay
	// under 128 x 4 KiB.
	defaultIngestMaxValueLength = 4096
	// A record describes a stream its client just timed: one that started
	// more than a day before it was posted is a replay or a broken clock.
	defaultMaxStartAge = 24 * time.Hour
	// Client clocks run ahead by seconds, rarely minutes (NTP-less
	// browsers and phones); further ahead is a wrong clock.
	defaultMaxClockSkew = 5 * time.Minute
	// The longest LLM calls (deep research, long reasoning) run for tens
	// of minutes; a longer record more likely has a wrong end, which would
	// stretch every figure and histogram it reached.
	defaultMaxStreamDuration = time.Hour
	// defaultMaxHeaderBytes bounds a request's line and headers on both
	// listeners. LLM SDKs send a few KiB (a key, a dozen x-stainless-*
	// headers, baggage and traceparent); net/http's own default of 1 MiB
	// would let every connection make the server parse and hold a
	// megabyte of headers before any authenticator looks at them.
	defaultMaxHeaderBytes = 64 << 10
	defaultQueueSize      = 1000
	// 64 MiB of OTLP: a thousand spans of 64 KiB (a few hundred chunks
	// each), or 180 of the largest span max_chunk_events allows. Queued
	// pdata holds about three times its OTLP size in memory.
	defaultQueueBytes = 64 << 20
	// Real frames are a few KiB and fit the free 64 KiB of each buffer;
	// 64 MiB lets eight streams hold a frame of the 8 MiB per-stream cap at
	// once.
	defaultFrameBufferBytes  = 64 << 20
	defaultUpstreamIdleConns = 1000
	// defaultReadTimeout bounds the reading of a whole request, headers and
	// body, on both listeners: a client that trickles its body in cannot
	// hold a connection and a handler open. It does not bound a streamed
	// response.
	defaultReadTimeout = 30 * time.Second
	// defaultReadHeaderTimeout bounds the reading of the headers alone.
	defaultReadHeaderTimeout = 10 * time.Second
)

// Defaults of the proxy's bounds on hostile input.
const (
	// Model names, response ids and finish reasons are identifiers of tens
	// of bytes; 256 keeps every real one whole while bounding what a hostile
	// body can make a span, and each metric series built from it, carry.
	defaultProxyMaxValueLength = 256
	// Kubernetes kills a pod 30 s after SIGTERM by default; streams get 20 s
	// to end, which leaves the rest of the pipeline time to export their
	// spans (and the ones of the streams ended then).
	defaultShutdownTimeout = 20 * time.Second
	// defaultQueueDrainTimeout leaves, after the streams' 20 s, room under
	// Kubernetes' 30 s grace period for the exporters' own flush.
	defaultQueueDrainTimeout = 5 * time.Second
	// The proxy package says why (128 MiB).
	defaultMaxDecodedResponseBytes = proxy.DefaultMaxDecodedResponseBytes
	// nginx's send_timeout (60 s).
	defaultSendTimeout = proxy.DefaultSendTimeout
	// An open stream holds about 75 KiB of the proxy's memory before its
	// chunk events (goroutines, connection buffers, the tee;
	// TestOpenStreamMemory): 10,000 of them about 750 MiB, within what a
	// collector pod is commonly given.
	defaultMaxConcurrentRequests = 10000
)

// NewFactory returns the factory of the sse_capture receiver.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(
		metadata.Type,
		createDefaultConfig,
		receiver.WithTraces(createTraces, metadata.TracesStability),
	)
}

func createDefaultConfig() component.Config {
	proxy := confighttp.NewDefaultServerConfig()
	proxy.NetAddr.Endpoint = defaultProxyEndpoint
	proxy.ReadTimeout = defaultReadTimeout
	proxy.ReadHeaderTimeout = defaultReadHeaderTimeout
	proxy.CompressionAlgorithms = defaultProxyEncodings()
	upstream := defaultUpstreamClientConfig()
	ingest := confighttp.NewDefaultServerConfig()
	ingest.NetAddr.Endpoint = defaultIngestEndpoint
	ingest.ReadTimeout = defaultReadTimeout
	ingest.ReadHeaderTimeout = defaultReadHeaderTimeout
	ingest.CompressionAlgorithms = defaultIngestEncodings()
	// Both listeners are off until configured; configuring one (even as an
	// empty section) fills in these defaults.
	return &Config{
		Proxy: configoptional.Default(ProxyConfig{
			ServerConfig:          proxy,
			Upstream:              upstream,
			MaxRequestBody:        defaultProxyMaxBody,
			MaxRequestHeaderBytes: defaultMaxHeaderBytes,
			QueueSize:             defaultQueueSize,
			QueueBytes:            defaultQueueBytes,
			FrameBufferBytes:      defaultFrameBufferBytes,
			ChunkEvents:           defaultChunkEvents(),

			MaxAttributeValueLength: defaultProxyMaxValueLength,
			MaxDecodedResponseBytes: defaultMaxDecodedResponseBytes,
			ShutdownTimeout:         defaultShutdownTimeout,
			QueueDrainTimeout:       defaultQueueDrainTimeout,
			SendTimeout:             defaultSendTimeout,
			MaxConcurrentRequests:   defaultMaxConcurrentRequests,
			Guard:                   configoptional.Default(defaultGuardConfig()),
		}),
		Ingest: configoptional.Default(IngestConfig{
			ServerConfig:            ingest,
			MaxRequestBody:          defaultIngestMaxBody,
			MaxRequestHeaderBytes:   defaultMaxHeaderBytes,
			MaxRecords:              defaultMaxRecords,
			MaxChunksPerRecord:      defaultMaxChunksPerRecord,
			MaxAttributesPerRecord:  defaultMaxAttributesPerRecord,
			MaxAttributeValueLength: defaultIngestMaxValueLength,
			MaxStartAge:             defaultMaxStartAge,
			MaxClockSkew:            defaultMaxClockSkew,
			MaxStreamDuration:       defaultMaxStreamDuration,
			ChunkEvents:             defaultChunkEvents(),
		}),
	}
}

// defaultUpstreamClientConfig is the client of the primary upstream and of
// every alternate before their keys are laid over it.
func defaultUpstreamClientConfig() confighttp.ClientConfig {
	c := confighttp.NewDefaultClientConfig()
	// Every stream goes to one host: keep as many idle connections to it as
	// a busy proxy has streams in flight, not net/http's default of two, so
	// that streams do not pay a new connection (and TLS handshake) each.
	if ka := c.Keepalive.Get(); ka != nil {
		ka.MaxIdleConnsPerHost = defaultUpstreamIdleConns
		ka.MaxIdleConns = defaultUpstreamIdleConns
	}
	return c
}

func defaultChunkEvents() ChunkEventsConfig {
	return ChunkEventsConfig{MaxChunkEvents: figures.DefaultMaxChunkEvents, KeepGapsAbove: figures.DefaultKeepGapsAbove}
}

func createTraces(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Traces) (receiver.Traces, error) {
	return newReceiver(cfg.(*Config), set, next)
}

// defaultIngestEncodings are the request encodings ingest decodes unless
// compression_algorithms says otherwise: those docs/ingest.md lists ("" is
// an uncoded body), not every one confighttp knows (zlib, lz4 and
// x-snappy-framed are off).
func defaultIngestEncodings() []string { return []string{"", "gzip", "zstd", "snappy", "deflate"} }

// defaultProxyEncodings are the request encodings the proxy decodes unless
// compression_algorithms says otherwise: the streaming ones only. A body in
// confighttp's snappy (block format) is read and decoded whole, up to
// max_request_body, by the listener before any handler runs, so a request
// the proxy would shed (max_concurrent_requests) or refuse would first cost
// its whole decoded size; a streaming decoder reads nothing until the
// handler does.
func defaultProxyEncodings() []string { return []string{"", "gzip", "zstd", "deflate"} }

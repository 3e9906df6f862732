// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/confmap"
	"golang.org/x/net/http/httpguts"
)

// Config configures the sse_capture receiver. At least one listener is
// required.
type Config struct {
	Proxy  configoptional.Optional[ProxyConfig]  `mapstructure:"proxy"`
	Ingest configoptional.Optional[IngestConfig] `mapstructure:"ingest"`

	_ struct{}
}

// ProxyConfig configures the reverse proxy listener.
type ProxyConfig struct {
	confighttp.ServerConfig `mapstructure:",squash"`
	// Upstream is the one LLM API every request is forwarded to.
	Upstream confighttp.ClientConfig `mapstructure:"upstream"`
	// Provider is gen_ai.provider.name; empty infers it from the API shape.
	Provider string `mapstructure:"provider"`
	// ServiceName is the service.name of the spans' resource: the proxy
	// speaks for the clients behind it. Empty: the receiver's component ID.
	ServiceName string `mapstructure:"service_name"`
	// RecordKeepalives records non-content frames as llm.stream.keepalive events.
	RecordKeepalives bool `mapstructure:"record_keepalives"`
	// MaxRequestBody bounds a request body in bytes; larger ones get 413.
	MaxRequestBody int64 `mapstructure:"max_request_body"`
	// MaxRequestHeaderBytes bounds the request line and headers in bytes;
	// larger ones get 431 before any handler (or authenticator) runs.
	MaxRequestHeaderBytes int `mapstructure:"max_request_header_bytes"`
	// QueueSize bounds the spans waiting for the next consumer; when it is
	// full, spans are dropped and counted, and streams are never slowed.
	QueueSize int `mapstructure:"queue_size"`
	// QueueBytes bounds the OTLP bytes of the spans waiting for (or being
	// handed to) the next consumer; past it, spans are dropped and counted
	// (reason queue_bytes).
	QueueBytes int64 `mapstructure:"queue_bytes"`
	// FrameBufferBytes bounds the bytes all streams together may buffer
	// for SSE frames (or lines) not complete yet, beyond a free 64 KiB per
	// buffer; a frame that would pass it is skipped by telemetry (never by
	// the client) and counted in llm.stream.oversized_frames.
	FrameBufferBytes int64 `mapstructure:"frame_buffer_bytes"`
	// ChunkEvents bounds the chunk events of a span.
	ChunkEvents ChunkEventsConfig `mapstructure:",squash"`
	// MaxAttributeValueLength bounds, in bytes, every string the proxy
	// records from a request or response (model names, response ids,
	// finish reasons, error types, llm.hedge.* baggage): longer ones are
	// cut on a UTF-8 character boundary.
	MaxAttributeValueLength int `mapstructure:"max_attribute_value_length"`
	// AuthHeader names the request header the listener's authenticator
	// (auth) reads, e.g. bearertokenauth's `header`. The proxy removes it
	// before the request goes upstream, so the collector's own credential
	// never reaches the provider. Required when auth is set: the proxy
	// cannot learn it from the extension.
	AuthHeader string `mapstructure:"auth_header"`
	// MaxDecodedResponseBytes bounds the decoded bytes of one gzip or
	// deflate response that the proxy decodes on the side for its frames;
	// past it capture stops (llm.stream.capture_error = decoded_limit) and
	// the client still gets every byte.
	MaxDecodedResponseBytes int64 `mapstructure:"max_decoded_response_bytes"`
	// ShutdownTimeout bounds how long Shutdown waits for streams in flight
	// to end on their own; streams still open then are ended, and their
	// spans are exported with error.type=shutdown. Zero ends them at once.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// QueueDrainTimeout bounds how long Shutdown, once the streams have
	// ended, hands the queued spans to the next consumer; then the
	// consumer's context is cancelled and the spans still queued are
	// dropped and counted (reason shutdown), so that a pipeline that
	// cannot take them (an exporter retrying a backend that is down) never
	// holds the collector's shutdown. Zero drops them at once.
	QueueDrainTimeout time.Duration `mapstructure:"queue_drain_timeout"`
	// SendTimeout bounds how long one write of a response may wait for the
	// client to accept a byte (nginx's send_timeout): past it the response
	// and its upstream request are ended (error.type=send_timeout). A
	// stream may stall for any time; only a client that stops reading is
	// cut. Zero leaves writes unbounded.
	SendTimeout time.Duration `mapstructure:"send_timeout"`
	// MaxConcurrentRequests bounds the requests the proxy serves at once
	// (streams and all): past it a request gets 503 with Retry-After and
	// is not forwarded, so that a burst cannot hold more open streams
	// than the collector's memory allows. Zero: no bound.
	MaxConcurrentRequests int `mapstructure:"max_concurrent_requests"`
	// MaxConcurrentRequestsPerClient bounds the requests one client has in
	// flight at once (nginx's limit_conn): past it the client's request
	// gets 429 with Retry-After and is not forwarded, so that one client
	// cannot take every slot of max_concurrent_requests. A client is the
	// guard budget's: the authenticated client, else its IP address (an
	// IPv6 one cut to its network). Zero: no bound, the default, since
	// behind a load balancer every request may come from its address.
	MaxConcurrentRequestsPerClient int `mapstructure:"max_concurrent_requests_per_client"`
	// Guard acts on streaming calls: hedging and failover before their
	// first content chunk, a stall watchdog after it. Off when absent.
	Guard configoptional.Optional[GuardConfig] `mapstructure:"guard"`

	_ struct{}
}

// IngestConfig configures the ingest listener.
type IngestConfig struct {
	confighttp.ServerConfig `mapstructure:",squash"`
	// MaxRequestBody bounds a request body in bytes; larger ones get 413.
	MaxRequestBody int64 `mapstructure:"max_request_body"`
	// MaxRequestHeaderBytes bounds the request line and headers in bytes;
	// larger ones get 431 before any handler (or authenticator) runs.
	MaxRequestHeaderBytes int `mapstructure:"max_request_header_bytes"`
	// MaxRecords bounds the records of one request; more get 413.
	MaxRecords int `mapstructure:"max_records"`
	// MaxChunksPerRecord bounds the chunk times of one record; more get 413.
	MaxChunksPerRecord int `mapstructure:"max_chunks_per_record"`
	// MaxAttributesPerRecord bounds the attributes of one record; more get 413.
	MaxAttributesPerRecord int `mapstructure:"max_attributes_per_record"`
	// MaxAttributeValueLength bounds, in bytes, a string attribute value
	// (and each string of an array, and the record's name), and the
	// elements of an array value; more get 413.
	MaxAttributeValueLength int `mapstructure:"max_attribute_value_length"`
	// MaxStartAge bounds how long before the request arrived a record's
	// stream may have started; older ones get 400.
	MaxStartAge time.Duration `mapstructure:"max_start_age"`
	// MaxClockSkew bounds how far after the request arrived a record's
	// start, end and chunk times may lie; later ones get 400.
	MaxClockSkew time.Duration `mapstructure:"max_clock_skew"`
	// MaxStreamDuration bounds a record's stream, from its start to its
	// end or last chunk; longer ones get 400.
	MaxStreamDuration time.Duration `mapstructure:"max_stream_duration"`
	// ChunkEvents bounds the chunk events of a span.
	ChunkEvents ChunkEventsConfig `mapstructure:",squash"`

	_ struct{}
}

// ChunkEventsConfig bounds the chunk events of one span (docs/contract.md
// section 3): a stream with more chunks keeps the ones its figures need,
// and counts the others, so that its figures stay exact.
type ChunkEventsConfig struct {
	// MaxChunkEvents bounds the chunk events of a span (and, in the proxy,
	// its keepalive events apart).
	MaxChunkEvents int `mapstructure:"max_chunk_events"`
	// KeepGapsAbove is the gap above which both chunks of a gap are kept
	// once chunks are elided. It must be at most the smallest
	// stall_threshold in use: for a shorter threshold the stall processor
	// can only apply this gap.
	KeepGapsAbove time.Duration `mapstructure:"keep_gaps_above"`
}

// maxChunkEventsLimit keeps a span under 4 MiB of OTLP, what a default gRPC
// receiver takes: a chunk event with its elision counts is about 160 bytes.
const maxChunkEventsLimit = 16384

func (c *ChunkEventsConfig) validate(listener string) []error {
	var errs []error
	if c.MaxChunkEvents < 4 || c.MaxChunkEvents > maxChunkEventsLimit {
		errs = append(errs, fmt.Errorf("%s: max_chunk_events must be from 4 (the first, first answer, first reasoning and last chunk) to %d (a span under 4 MiB), got %d",
			listener, maxChunkEventsLimit, c.MaxChunkEvents))
	}
	if c.KeepGapsAbove < 0 {
		errs = append(errs, fmt.Errorf("%s: keep_gaps_above must not be negative, got %v", listener, c.KeepGapsAbove))
	}
	return errs
}

var (
	_                      component.Config  = (*Config)(nil)
	_                      confmap.Validator = (*Config)(nil)
	errNoListener                            = errors.New("at least one of proxy and ingest must be configured")
	errNoUpstream                            = errors.New("proxy: upstream.endpoint must be set")
	errPositive                              = errors.New("must be positive")
	errUpstreamNotAbsURL                     = errors.New("proxy: upstream.endpoint must be an absolute http or https URL")
	errUpstreamHasQueries                    = errors.New("proxy: upstream.endpoint must not carry a query or fragment")
	errUpstreamHasUserinfo                   = errors.New("proxy: upstream.endpoint must not carry credentials (user:password@), " +
		"which the proxy would not send: give them in upstream.headers or upstream.auth")
	errAuthHeaderRequired = errors.New("proxy: auth is set, so auth_header must name the request header its " +
		"authenticator reads (for bearertokenauth, its `header` setting, Authorization by default); " +
		"the proxy removes that header before forwarding, so the collector's credential never reaches the upstream")
	errAuthHeaderWithoutAuth   = errors.New("proxy: auth_header is set but auth is not")
	errAuthHeaderInvalid       = errors.New("proxy: auth_header is not a valid header name")
	errNegativeShutdownTimeout = errors.New("proxy: shutdown_timeout must not be negative")
	errNegativeQueueDrain      = errors.New("proxy: queue_drain_timeout must not be negative")
	errNegativeSendTimeout     = errors.New("proxy: send_timeout must not be negative")
	errNegativeMaxConcurrent   = errors.New("proxy: max_concurrent_requests must not be negative")
	errNegativeMaxPerClient    = errors.New("proxy: max_concurrent_requests_per_client must not be negative")
	errNegativeClockSkew       = errors.New("ingest: max_clock_skew must not be negative")
)

// Validate checks the configuration.
func (cfg *Config) Validate() error {
	if !cfg.Proxy.HasValue() && !cfg.Ingest.HasValue() {
		return errNoListener
	}
	var errs []error
	if cfg.Proxy.HasValue() {
		errs = append(errs, cfg.Proxy.Get().validate())
	}
	if cfg.Ingest.HasValue() {
		errs = append(errs, cfg.Ingest.Get().validate())
	}
	return errors.Join(errs...)
}

func (p *ProxyConfig) validate() error {
	var errs []error
	if p.Upstream.Endpoint == "" {
		errs = append(errs, errNoUpstream)
	} else if _, err := parseUpstream(p.Upstream.Endpoint); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, checkClient("proxy: upstream", &p.Upstream)...)
	if p.MaxRequestBody <= 0 {
		errs = append(errs, fmt.Errorf("proxy: max_request_body %w", errPositive))
	}
	errs = append(errs, checkBodySizes("proxy", p.MaxRequestBodySize, p.MaxRequestBody)...)
	if p.MaxRequestHeaderBytes <= 0 {
		errs = append(errs, fmt.Errorf("proxy: max_request_header_bytes %w", errPositive))
	}
	if p.QueueSize <= 0 {
		errs = append(errs, fmt.Errorf("proxy: queue_size %w", errPositive))
	}
	if p.QueueBytes <= 0 {
		errs = append(errs, fmt.Errorf("proxy: queue_bytes %w", errPositive))
	}
	if p.FrameBufferBytes <= 0 {
		errs = append(errs, fmt.Errorf("proxy: frame_buffer_bytes %w", errPositive))
	}
	errs = append(errs, p.ChunkEvents.validate("proxy")...)
	if p.MaxAttributeValueLength <= 0 {
		errs = append(errs, fmt.Errorf("proxy: max_attribute_value_length %w", errPositive))
	}
	if p.MaxDecodedResponseBytes <= 0 {
		errs = append(errs, fmt.Errorf("proxy: max_decoded_response_bytes %w", errPositive))
	}
	if p.ShutdownTimeout < 0 {
		errs = append(errs, errNegativeShutdownTimeout)
	}
	if p.QueueDrainTimeout < 0 {
		errs = append(errs, errNegativeQueueDrain)
	}
	if p.SendTimeout < 0 {
		errs = append(errs, errNegativeSendTimeout)
	}
	if p.MaxConcurrentRequests < 0 {
		errs = append(errs, errNegativeMaxConcurrent)
	}
	if p.MaxConcurrentRequestsPerClient < 0 {
		errs = append(errs, errNegativeMaxPerClient)
	}
	switch {
	case p.Auth.HasValue() && p.AuthHeader == "":
		errs = append(errs, errAuthHeaderRequired)
	case !p.Auth.HasValue() && p.AuthHeader != "":
		errs = append(errs, errAuthHeaderWithoutAuth)
	case p.AuthHeader != "" && !httpguts.ValidHeaderFieldName(p.AuthHeader):
		errs = append(errs, errAuthHeaderInvalid)
	}
	if p.Guard.HasValue() {
		errs = append(errs, p.Guard.Get().validate())
	}
	return errors.Join(errs...)
}

func (i *IngestConfig) validate() error {
	var errs []error
	if i.MaxRequestBody <= 0 {
		errs = append(errs, fmt.Errorf("ingest: max_request_body %w", errPositive))
	}
	errs = append(errs, checkBodySizes("ingest", i.MaxRequestBodySize, i.MaxRequestBody)...)
	if i.MaxRequestHeaderBytes <= 0 {
		errs = append(errs, fmt.Errorf("ingest: max_request_header_bytes %w", errPositive))
	}
	if i.MaxRecords <= 0 {
		errs = append(errs, fmt.Errorf("ingest: max_records %w", errPositive))
	}
	if i.MaxChunksPerRecord <= 0 {
		errs = append(errs, fmt.Errorf("ingest: max_chunks_per_record %w", errPositive))
	}
	if i.MaxAttributesPerRecord <= 0 {
		errs = append(errs, fmt.Errorf("ingest: max_attributes_per_record %w", errPositive))
	}
	if i.MaxAttributeValueLength <= 0 {
		errs = append(errs, fmt.Errorf("ingest: max_attribute_value_length %w", errPositive))
	}
	if i.MaxStartAge <= 0 {
		errs = append(errs, fmt.Errorf("ingest: max_start_age %w", errPositive))
	}
	if i.MaxClockSkew < 0 {
		errs = append(errs, errNegativeClockSkew)
	}
	if i.MaxStreamDuration <= 0 {
		errs = append(errs, fmt.Errorf("ingest: max_stream_duration %w", errPositive))
	}
	errs = append(errs, i.ChunkEvents.validate("ingest")...)
	return errors.Join(errs...)
}

func parseUpstream(endpoint string) (*url.URL, error) {
	u, err := parseURL(endpoint)
	if err != nil {
		return nil, fmt.Errorf("proxy: upstream.endpoint: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errUpstreamNotAbsURL
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, errUpstreamHasQueries
	}
	if u.User != nil {
		return nil, errUpstreamHasUserinfo
	}
	return u, nil
}

// parseURL parses an endpoint and never quotes it in its error, as
// url.Parse does: it may carry a password.
func parseURL(endpoint string) (*url.URL, error) {
	u, err := url.Parse(endpoint)
	if uerr, ok := errors.AsType[*url.Error](err); ok {
		return nil, uerr.Err
	}
	return u, err
}

// checkClient refuses the settings of an upstream client that the proxy
// would accept and never use: a negative timeout, TLS settings on an
// http:// endpoint (an operator who set ca_file or a client certificate
// believes the upstream is verified, or that it gets the certificate),
// and a cookie jar (the proxy passes cookies between the client and the
// upstream as they are sent, and keeps none).
func checkClient(where string, c *confighttp.ClientConfig) []error {
	var errs []error
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("%s.timeout must not be negative (0: none)", where))
	}
	t := &c.TLS
	tlsSet := t.CAFile != "" || t.CAPem != "" || t.CertFile != "" || t.CertPem != "" ||
		t.KeyFile != "" || t.KeyPem != "" || t.ServerName != "" || t.InsecureSkipVerify
	if tlsSet && strings.HasPrefix(strings.ToLower(c.Endpoint), "http:") {
		errs = append(errs, fmt.Errorf("%s.tls has no effect on an http:// endpoint; use https:// or remove it", where))
	}
	if c.Cookies.HasValue() {
		errs = append(errs, fmt.Errorf("%s.cookies are not kept by the proxy, which passes cookies between client and upstream as sent; remove the key", where))
	}
	return errs
}

// checkBodySizes refuses confighttp's max_request_body_size below the
// listener's own max_request_body: the listener answers past its own bound
// with its JSON 413 and raises confighttp's to it (confighttp's would cut
// the body first with a plain-text error), so a lower one would be
// accepted and not applied.
func checkBodySizes(where string, confighttpSize, own int64) []error {
	if confighttpSize > 0 && confighttpSize < own {
		return []error{fmt.Errorf("%s: max_request_body_size %d is below max_request_body %d, the bound this listener applies: set max_request_body instead", where, confighttpSize, own)}
	}
	return nil
}

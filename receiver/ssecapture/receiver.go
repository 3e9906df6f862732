// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/confighttp/xconfighttp"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/streamstall/streamstall/receiver/ssecapture/internal/guard"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/ingest"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/proxy"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/spanqueue"
)

// formatProxy is what receiverhelper.ObsReport reports proxy spans as.
const formatProxy = "sse"

// handlerGrace bounds how long the proxy's shutdown waits, once
// shutdown_timeout has run out, for its handlers to write how each call
// still open ends (a guarded stream's error frame, the 503 of a request
// still waiting for its upstream's headers) before it closes the
// connections. Those are a few hundred bytes: a client that cannot take
// them in a second is cut.
const handlerGrace = time.Second

type sseCaptureReceiver struct {
	cfg       *Config
	settings  receiver.Settings
	next      consumer.Traces
	clock     clockwork.Clock
	telemetry *metadata.TelemetryBuilder
	obsProxy  *receiverhelper.ObsReport
	obsIngest *receiverhelper.ObsReport

	servers    []*http.Server
	proxySrv   *http.Server        // the proxy's, among servers
	addrs      map[string]net.Addr // bound addresses by listener name, for tests
	queue      *spanqueue.Queue
	proxy      *proxy.Proxy
	fleet      *guard.Fleet // the guard's advice from a hedge_advisor, nil without one
	ingest     *ingest.Handler
	shutdownWG sync.WaitGroup
}

var _ receiver.Traces = (*sseCaptureReceiver)(nil)

func newReceiver(cfg *Config, set receiver.Settings, next consumer.Traces) (*sseCaptureReceiver, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	obsProxy, err := receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID: set.ID, Transport: "http", ReceiverCreateSettings: set,
	})
	if err != nil {
		return nil, err
	}
	obsIngest, err := receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID: set.ID, Transport: "http", LongLivedCtx: false, ReceiverCreateSettings: set,
	})
	if err != nil {
		return nil, err
	}
	return &sseCaptureReceiver{
		cfg: cfg, settings: set, next: next, clock: clockwork.NewRealClock(),
		telemetry: tb, obsProxy: obsProxy, obsIngest: obsIngest,
	}, nil
}

// Start opens the configured listeners.
func (r *sseCaptureReceiver) Start(ctx context.Context, host component.Host) error {
	if r.cfg.Proxy.HasValue() {
		pcfg := r.cfg.Proxy.Get()
		r.queue = spanqueue.New(pcfg.QueueSize, pcfg.QueueBytes, formatProxy, r.next, r.obsProxy, r.telemetry)
		p, err := r.newProxy(ctx, host, pcfg)
		if err != nil {
			return errors.Join(err, r.Shutdown(ctx))
		}
		r.proxy = p
		if r.fleet != nil {
			// The first fetch, bounded by the advisor's timeout, before the
			// first call: a fresh proxy has the fleet's values at once.
			r.fleet.Start()
		}
		// The collector's own HTTP server instrumentation stays off the proxy
		// listener: it would wrap every write and flush of every stream, and
		// its request duration and span per request repeat, less precisely,
		// the span this receiver records for each call.
		noServerTelemetry := xconfighttp.WithOtelHTTPOptions(otelhttp.WithFilter(func(*http.Request) bool { return false }))
		if err := r.serve(ctx, host, "proxy", pcfg.ServerConfig, requestLimits{body: pcfg.MaxRequestBody, headerBytes: pcfg.MaxRequestHeaderBytes}, p, noServerTelemetry,
			confighttp.WithErrorHandler(proxy.ServerError)); err != nil {
			return errors.Join(err, r.Shutdown(ctx))
		}
		r.proxySrv = r.servers[len(r.servers)-1]
	}
	if r.cfg.Ingest.HasValue() {
		icfg := r.cfg.Ingest.Get()
		h := ingest.NewHandler(ingest.Limits{
			MaxBody:      icfg.MaxRequestBody,
			MaxRecords:   icfg.MaxRecords,
			MaxChunks:    icfg.MaxChunksPerRecord,
			MaxAttrs:     icfg.MaxAttributesPerRecord,
			MaxValueLen:  icfg.MaxAttributeValueLength,
			MaxStartAge:  icfg.MaxStartAge,
			MaxClockSkew: icfg.MaxClockSkew,
			MaxDuration:  icfg.MaxStreamDuration,

			MaxChunkEvents: icfg.ChunkEvents.MaxChunkEvents,
			KeepGapsAbove:  icfg.ChunkEvents.KeepGapsAbove,
		}, r.clock, r.next, r.obsIngest)
		r.ingest = h
		if err := r.serve(ctx, host, "ingest", icfg.ServerConfig, requestLimits{body: icfg.MaxRequestBody, headerBytes: icfg.MaxRequestHeaderBytes}, h,
			confighttp.WithErrorHandler(ingest.ServerError)); err != nil {
			return errors.Join(err, r.Shutdown(ctx))
		}
	}
	return nil
}

// newProxy builds the proxy from its configuration, with an upstream
// client from confighttp.
func (r *sseCaptureReceiver) newProxy(ctx context.Context, host component.Host, pcfg *ProxyConfig) (*proxy.Proxy, error) {
	upstream, err := parseUpstream(pcfg.Upstream.Endpoint)
	if err != nil {
		return nil, err
	}
	// Without providers, confighttp does not wrap the upstream transport in
	// otelhttp: that wrapper would start a collector-internal span per call
	// and replace the traceparent naming our span, and it costs CPU per
	// chunk. The spans this receiver emits already describe every call.
	clientSet := r.settings.TelemetrySettings
	clientSet.TracerProvider, clientSet.MeterProvider = nil, nil
	client, err := pcfg.Upstream.ToClient(ctx, host.GetExtensions(), clientSet)
	if err != nil {
		return nil, fmt.Errorf("proxy: upstream client: %w", err)
	}
	service := pcfg.ServiceName
	if service == "" {
		service = r.settings.ID.String()
	}
	var g *guard.Guard
	ipv6Prefix := 0 // guard.DefaultIPv6Prefix
	if pcfg.Guard.HasValue() {
		if g, err = r.newGuard(ctx, host, pcfg.Guard.Get(), &pcfg.Upstream, clientSet); err != nil {
			return nil, err
		}
		// One client for the per-client bound as for the hedge budget.
		ipv6Prefix = pcfg.Guard.Get().Hedge.Budget.IPv6PrefixLength
	}
	return proxy.New(proxy.Settings{
		Upstream:                       upstream,
		Transport:                      client.Transport,
		HeaderTimeout:                  pcfg.Upstream.Timeout,
		Provider:                       pcfg.Provider,
		Service:                        service,
		AuthHeader:                     pcfg.AuthHeader,
		AuthParams:                     authParams(pcfg),
		MaxRequestBody:                 pcfg.MaxRequestBody,
		MaxValueLength:                 pcfg.MaxAttributeValueLength,
		MaxDecodedResponseBytes:        pcfg.MaxDecodedResponseBytes,
		RecordKeepalives:               pcfg.RecordKeepalives,
		MaxChunkEvents:                 pcfg.ChunkEvents.MaxChunkEvents,
		KeepGapsAbove:                  pcfg.ChunkEvents.KeepGapsAbove,
		FrameBufferBytes:               pcfg.FrameBufferBytes,
		SendTimeout:                    pcfg.SendTimeout,
		MaxConcurrentRequests:          int64(pcfg.MaxConcurrentRequests),
		MaxConcurrentRequestsPerClient: int64(pcfg.MaxConcurrentRequestsPerClient),
		ClientIPv6Prefix:               ipv6Prefix,
		Guard:                          g,
		Clock:                          r.clock,
		Logger:                         r.settings.Logger,
		Telemetry:                      r.telemetry,
		Emit:                           r.queue.Push,
	})
}

// requestLimits are what a listener's server bounds before its handler runs.
type requestLimits struct {
	body        int64
	headerBytes int
}

func (r *sseCaptureReceiver) serve(ctx context.Context, host component.Host, name string, sc confighttp.ServerConfig, limits requestLimits, h http.Handler,
	opts ...confighttp.ToServerOption,
) error {
	// Our own body limit answers 413 with a JSON error; make sure the
	// generic one of confighttp is never the tighter of the two.
	if sc.MaxRequestBodySize < limits.body {
		sc.MaxRequestBodySize = limits.body
	}
	srv, err := sc.ToServer(ctx, host.GetExtensions(), r.settings.TelemetrySettings, h, opts...)
	if err != nil {
		return err
	}
	// confighttp has no setting for it: net/http answers 431 to larger
	// headers before any handler, so before any authenticator, runs.
	srv.MaxHeaderBytes = limits.headerBytes
	// net/http logs what a peer does wrong before any handler (a failed TLS
	// handshake, a connection closed at once), one line per connection:
	// confighttp's error level would let anyone who can open a connection
	// flood the collector's log. Debug, as the proxy's own ErrorLog.
	if srv.ErrorLog, err = zap.NewStdLogAt(r.settings.Logger, zapcore.DebugLevel); err != nil {
		return err
	}
	ln, err := sc.ToListener(ctx)
	if err != nil {
		return err
	}
	r.servers = append(r.servers, srv)
	if r.addrs == nil {
		r.addrs = map[string]net.Addr{}
	}
	r.addrs[name] = ln.Addr()
	r.settings.Logger.Info("Starting "+name+" server", zap.String("endpoint", ln.Addr().String()))
	r.shutdownWG.Go(func() {
		if errHTTP := srv.Serve(ln); errHTTP != nil && !errors.Is(errHTTP, http.ErrServerClosed) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(errHTTP))
		}
	})
	return nil
}

// Shutdown stops the listeners. The proxy's streams get shutdown_timeout
// (and no more than ctx allows) to end on their own; those still open then
// are ended (their clients and upstream requests are closed) and their spans,
// with error.type=shutdown and the chunks seen so far, are queued like any
// other. The queue then hands its spans on for queue_drain_timeout (and no
// more than ctx allows); those the pipeline has not taken by then are
// dropped and counted.
func (r *sseCaptureReceiver) Shutdown(ctx context.Context) error {
	if r.ingest != nil {
		r.ingest.Stop() // requests still decoding stop
	}
	errs := make([]error, len(r.servers))
	var wg sync.WaitGroup
	for i, srv := range r.servers {
		wg.Go(func() {
			if srv == r.proxySrv && r.proxy != nil {
				errs[i] = r.shutdownProxy(ctx, srv)
				return
			}
			if err := srv.Shutdown(ctx); err != nil {
				errs[i] = errors.Join(err, srv.Close())
			}
		})
	}
	wg.Wait()
	r.servers, r.proxySrv = nil, nil
	r.shutdownWG.Wait()
	if r.proxy != nil {
		r.proxy.Wait()
		r.proxy.Stop() // releases its context
		r.proxy = nil
	}
	if r.fleet != nil {
		r.fleet.Shutdown()
		r.fleet = nil
	}
	if r.queue != nil {
		// Handlers are done: the queue sees no more pushes.
		drain := r.cfg.Proxy.Get().QueueDrainTimeout
		dropped, err := r.queue.Shutdown(ctx, drain)
		if err != nil {
			errs = append(errs, err)
		}
		if dropped > 0 {
			r.settings.Logger.Warn("Dropped the proxy's spans the pipeline had not taken at shutdown",
				zap.Int64("spans", dropped), zap.Duration("queue_drain_timeout", drain))
		}
		r.queue = nil
	}
	return errors.Join(errs...)
}

// shutdownProxy lets the proxy's streams end on their own for
// shutdown_timeout, then ends those still open and waits for their handlers,
// which queue their spans. Ending streams when the timeout runs out is no
// error; ctx running out first is.
func (r *sseCaptureReceiver) shutdownProxy(ctx context.Context, srv *http.Server) error {
	drainCtx, cancel := context.WithTimeout(ctx, r.cfg.Proxy.Get().ShutdownTimeout)
	defer cancel()
	if srv.Shutdown(drainCtx) == nil {
		return nil
	}
	open := r.proxy.InFlight()
	r.proxy.Stop()
	handlersDone := make(chan struct{})
	go func() {
		r.proxy.Wait()
		close(handlersDone)
	}()
	// The handlers end each call with its answer (the guard's error frame,
	// a 503): they get a moment to write it before the connections close.
	grace := time.NewTimer(handlerGrace)
	select {
	case <-handlersDone:
	case <-grace.C:
	case <-ctx.Done():
	}
	grace.Stop()
	err := srv.Close()
	<-handlersDone
	if open > 0 {
		r.settings.Logger.Info("Ended the proxy's streams still open at shutdown",
			zap.Int64("streams", open), zap.Duration("shutdown_timeout", r.cfg.Proxy.Get().ShutdownTimeout))
	}
	return errors.Join(ctx.Err(), err)
}

// authParams are the query parameters the proxy listener's authenticator
// reads (auth.request_params), which the proxy removes before a request
// goes upstream, as it removes auth_header.
func authParams(pcfg *ProxyConfig) []string {
	if !pcfg.Auth.HasValue() {
		return nil
	}
	return pcfg.Auth.Get().RequestParameters
}

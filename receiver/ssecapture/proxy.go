package ssecapture

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

// proxy forwards every request to the one configured upstream and records
// each LLM call as a span. It is an httputil.ReverseProxy with three hooks:
// Rewrite pins the upstream, ModifyResponse wraps the body in a capture tee,
// ErrorHandler answers 502/504 in JSON.
type proxy struct {
	cfg           *ProxyConfig
	service       string // service.name of every span's resource
	upstream      *url.URL
	prefix        string // the upstream's path, cleaned: "/" or "/openai"
	serverAddress string
	serverPort    int64
	clock         clockwork.Clock
	queue         *spanQueue
	telemetry     *metadata.TelemetryBuilder
	logger        *zap.Logger
	rp            *httputil.ReverseProxy
	inflight      sync.WaitGroup
	active        atomic.Int64 // requests in flight, for the shutdown log
	// stopCtx is cancelled when the streams still in flight at shutdown
	// are to be ended.
	stopCtx context.Context
	stop    context.CancelFunc
}

type callKey struct{}

func newProxy(ctx context.Context, cfg *ProxyConfig, service string, set component.TelemetrySettings, host component.Host,
	clock clockwork.Clock, queue *spanQueue, tb *metadata.TelemetryBuilder,
) (*proxy, error) {
	upstream, err := parseUpstream(cfg.Upstream.Endpoint)
	if err != nil {
		return nil, err
	}
	// Without providers, confighttp does not wrap the upstream transport in
	// otelhttp: that wrapper would start a collector-internal span per call
	// and replace the traceparent naming our span, and it costs CPU per
	// chunk. The spans this receiver emits already describe every call.
	clientSet := set
	clientSet.TracerProvider, clientSet.MeterProvider = nil, nil
	client, err := cfg.Upstream.ToClient(ctx, host.GetExtensions(), clientSet)
	if err != nil {
		return nil, fmt.Errorf("proxy: upstream client: %w", err)
	}
	p := &proxy{
		service: service,
		cfg:     cfg, upstream: upstream, clock: clock, queue: queue, telemetry: tb, logger: set.Logger,
	}
	p.stopCtx, p.stop = context.WithCancel(context.Background())
	p.prefix = path.Clean("/" + upstream.Path)
	p.serverAddress, p.serverPort = serverAddressPort(upstream)
	errorLog, err := zap.NewStdLogAt(set.Logger, zapcore.DebugLevel)
	if err != nil {
		return nil, err
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      &headerTimeout{next: client.Transport, timeout: cfg.Upstream.Timeout},
		FlushInterval:  -1, // write every read through at once: SSE must not wait in a buffer
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.errorHandler,
		ErrorLog:       errorLog,
		BufferPool:     bufferPool{},
	}
	return p, nil
}

func serverAddressPort(u *url.URL) (string, int64) {
	port, err := strconv.ParseInt(u.Port(), 10, 64)
	if err != nil {
		port = 80
		if u.Scheme == "https" {
			port = 443
		}
	}
	return u.Hostname(), port
}

// wait blocks until every request being proxied has finished.
func (p *proxy) wait() { p.inflight.Wait() }

func (p *proxy) inflightCount() int64 { return p.active.Load() }

// stopped reports whether the streams in flight were told to end.
func (p *proxy) stopped() bool { return p.stopCtx.Err() != nil }

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.inflight.Add(1)
	defer p.inflight.Done()
	p.active.Add(1)
	defer p.active.Add(-1)

	// The request, and the upstream request made from it, also end when
	// the streams in flight are stopped at shutdown.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(p.stopCtx, cancel)()
	r = r.WithContext(ctx)

	// Streams outlive any server write timeout; clear it for this request
	// (the otelhttp and confighttp wrappers unwrap to the real connection).
	rc := http.NewResponseController(w)
	if err := rc.SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		p.logger.Debug("cannot clear the write deadline", zap.Error(err))
	}

	if !p.staysUnderPrefix(r.URL) {
		writeJSONError(w, http.StatusBadRequest, "bad_request", "the request path leaves the upstream's path")
		return
	}

	body, err := readBody(r, p.cfg.MaxRequestBody)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeJSONError(w, http.StatusRequestEntityTooLarge, "request_too_large",
				fmt.Sprintf("request body exceeds %d bytes", p.cfg.MaxRequestBody))
			return
		}
		writeJSONError(w, http.StatusBadRequest, "bad_request", "cannot read the request body")
		return
	}

	shape := llmstream.ShapeFromPath(r.URL.Path)
	if shape == llmstream.ShapeUnknown || r.Method != http.MethodPost {
		// Not an LLM call we understand (model lists, files...): forwarded
		// as it is, without a span.
		p.rp.ServeHTTP(w, r)
		return
	}

	c := newCall(p, r, shape, body)
	defer c.finish() // also when ReverseProxy aborts the handler with http.ErrAbortHandler
	ctx = context.WithValue(r.Context(), callKey{}, c)
	p.rp.ServeHTTP(w, r.WithContext(c.outgoingContext(ctx)))
}

// maxPathDecodings bounds how many layers of percent-encoding are peeled off
// a request path to check it: an upstream (or a gateway in front of it) may
// decode more than once.
const maxPathDecodings = 3

// staysUnderPrefix reports whether the request path, joined to the
// upstream's path prefix, stays under that prefix however it is read: as
// sent, and after each of up to maxPathDecodings rounds of percent-decoding,
// with backslashes taken as slashes and dot segments resolved. The request
// is forwarded as it came, but only when every reading stays under.
func (p *proxy) staysUnderPrefix(u *url.URL) bool {
	if p.prefix == "/" {
		return true // nothing is above the root
	}
	v := u.EscapedPath()
	for range maxPathDecodings + 1 {
		joined := path.Clean(p.prefix + "/" + strings.ReplaceAll(v, `\`, "/"))
		if joined != p.prefix && !strings.HasPrefix(joined, p.prefix+"/") {
			return false
		}
		next, err := url.PathUnescape(v)
		if err != nil || next == v {
			return true
		}
		v = next
	}
	// Still encoded after that many rounds: no legitimate path is.
	return false
}

// readBody buffers the request body (so the model can be read without
// delaying the stream that follows) up to limit bytes. An in-memory body
// also keeps the Transport's write loop off the server's request body,
// which the server drains and closes once the response is flushed: a plain
// ReverseProxy that streams the body can lose the upstream connection to
// that race (see the go_bare baseline in bench/harness_test.go).
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r.Header.Del("Transfer-Encoding")
	return body, nil
}

// rewrite pins the upstream: neither an absolute-form request URI nor a Host
// header can choose where a request goes. Inbound X-Forwarded-* headers are
// dropped (Rewrite does that) and none are added: the upstream is a third
// party that has no use for the addresses of our clients. The header the
// listener's authenticator read stays here: it is the collector's
// credential, not the provider's.
func (p *proxy) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(p.upstream)
	pr.Out.Host = ""
	if p.cfg.AuthHeader != "" {
		pr.Out.Header.Del(p.cfg.AuthHeader)
	}
	// An SSE stream must be readable as it arrives: ask for it uncompressed.
	pr.Out.Header.Set("Accept-Encoding", "identity")
	if c, ok := pr.In.Context().Value(callKey{}).(*call); ok {
		c.injectTraceContext(pr.Out.Header)
	}
}

func (p *proxy) modifyResponse(resp *http.Response) error {
	if c, ok := resp.Request.Context().Value(callKey{}).(*call); ok {
		c.response(resp)
	}
	return nil
}

// errorHandler answers when the upstream could not be reached (or did not
// answer in time), in the error shape OpenAI and Anthropic clients parse.
func (p *proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	c, _ := r.Context().Value(callKey{}).(*call)
	if p.stopped() {
		// Shutdown ended the request before the upstream answered.
		if c != nil {
			c.failed(http.StatusServiceUnavailable, errTypeShutdown)
		}
		writeJSONError(w, http.StatusServiceUnavailable, errTypeShutdown, "the collector is shutting down")
		return
	}
	if r.Context().Err() != nil {
		// The client went away first: nobody is left to answer.
		if c != nil {
			c.cancelled()
		}
		return
	}
	status, typ, msg := http.StatusBadGateway, errTypeUpstreamUnreachable, "upstream unreachable"
	var nerr net.Error
	if errors.Is(err, errUpstreamTimeout) || (errors.As(err, &nerr) && nerr.Timeout()) {
		status, typ, msg = http.StatusGatewayTimeout, errTypeUpstreamTimeout, "upstream did not answer in time"
	}
	p.logger.Debug("upstream request failed", zap.Error(err))
	if c != nil {
		c.failed(status, typ)
	}
	writeJSONError(w, status, typ, msg)
}

func writeJSONError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type":  "error",
		"error": map[string]string{"type": typ, "message": msg},
	})
}

var errUpstreamTimeout = errors.New("upstream response headers timed out")

// headerTimeout bounds the wait for the upstream's response headers by the
// upstream client's timeout, and never the stream that follows: a stream
// may legitimately stall for minutes.
type headerTimeout struct {
	next    http.RoundTripper
	timeout time.Duration
}

func (h *headerTimeout) RoundTrip(req *http.Request) (*http.Response, error) {
	if h.timeout <= 0 {
		return h.next.RoundTrip(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	timer := time.AfterFunc(h.timeout, func() { cancel(errUpstreamTimeout) })
	resp, err := h.next.RoundTrip(req.WithContext(ctx))
	if !timer.Stop() && err != nil {
		cancel(nil)
		return nil, fmt.Errorf("%w: %w", errUpstreamTimeout, err)
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel(nil)
	return err
}

// bufferPool recycles ReverseProxy's copy buffers across requests.
type bufferPool struct{}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *copyBuffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }

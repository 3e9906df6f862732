// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package proxy is the sse_capture receiver's reverse proxy: it forwards
// every request to one upstream LLM API and records each call as a span
// with one event per content chunk.
package proxy // import "github.com/streamstall/streamstall/receiver/ssecapture/internal/proxy"

import (
	"cmp"
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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/sse"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/guard"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

// Settings configure a Proxy. The receiver builds them from its
// configuration: this package knows nothing of the collector's config.
type Settings struct {
	// Upstream is the one API every request goes to (an absolute URL,
	// without query or fragment).
	Upstream *url.URL
	// Transport carries the upstream requests.
	Transport http.RoundTripper
	// HeaderTimeout bounds the wait for the upstream's response headers,
	// never the stream that follows; zero waits as long as the request.
	HeaderTimeout time.Duration
	// Provider is gen_ai.provider.name; empty infers it from the API shape.
	Provider string
	// Service is the service.name of every span's resource.
	Service string
	// AuthHeader is removed before a request goes upstream: it is the
	// collector's credential, not the provider's.
	AuthHeader string
	// AuthParams are the query parameters the listener's authenticator
	// reads (confighttp's auth.request_params): removed from the query
	// before a request goes upstream, with the header the listener copied
	// each into.
	AuthParams []string
	// MaxRequestBody bounds a request body in bytes; larger ones get 413.
	MaxRequestBody int64
	// MaxValueLength bounds every string recorded from a request or response.
	MaxValueLength int
	// MaxDecodedResponseBytes bounds the decoded bytes of a content-coded
	// response read for its frames; zero is DefaultMaxDecodedResponseBytes.
	MaxDecodedResponseBytes int64
	// RecordKeepalives records non-content frames as events.
	RecordKeepalives bool
	// MaxChunkEvents bounds the chunk events of a span (and its keepalive
	// events apart); past it chunks are elided (figures.Keeper) with
	// KeepGapsAbove. Zero is figures.DefaultMaxChunkEvents.
	MaxChunkEvents int
	KeepGapsAbove  time.Duration
	// FrameBufferBytes bounds the bytes the streams together buffer for
	// unfinished frames (SSE events, NDJSON lines, JSON array elements),
	// past a free 64 KiB a buffer (sse.Budget); zero leaves them bounded
	// per stream only.
	FrameBufferBytes int64
	// Guard, when set, guards streaming calls (see package guard).
	Guard *guard.Guard
	// SendTimeout bounds each write to a client (sendDeadline); zero
	// leaves writes unbounded.
	SendTimeout time.Duration
	// MaxConcurrentRequests bounds the requests being proxied at once;
	// past it a request is answered 503 and not forwarded. Zero: no bound.
	MaxConcurrentRequests int64
	// MaxConcurrentRequestsPerClient bounds the requests of one client
	// (guard.ClientOf, its IPv6 addresses cut to ClientIPv6Prefix bits)
	// in flight at once; past it a request gets 429. Zero: no bound.
	MaxConcurrentRequestsPerClient int64
	ClientIPv6Prefix               int

	Clock     clockwork.Clock
	Logger    *zap.Logger
	Telemetry *metadata.TelemetryBuilder
	// Emit takes each finished call's span; it must not block.
	Emit func(ptrace.Traces)
}

// Proxy forwards every request to the one configured upstream and records
// each LLM call as a span. It is an httputil.ReverseProxy with three hooks:
// Rewrite pins the upstream, ModifyResponse wraps the body in a capture tee,
// ErrorHandler answers 502/504 in JSON.
type Proxy struct {
	upstream       *url.URL
	prefix         string // the upstream's path, cleaned: "/" or "/openai"
	authHeader     string
	authParams     []string
	maxRequestBody int64
	sendTimeout    time.Duration
	maxConcurrent  int64
	perClient      *clientSlots // nil: no bound per client
	calls          *callDeps
	guard          *guard.Guard
	logger         *zap.Logger
	rp             *httputil.ReverseProxy
	inflight       sync.WaitGroup
	active         atomic.Int64 // requests in flight, for the shutdown log
	// stopCtx is cancelled when the streams still in flight at shutdown
	// are to be ended.
	stopCtx context.Context
	stop    context.CancelFunc
}

type callKey struct{}

// New returns a proxy; Stop releases it.
func New(set Settings) (*Proxy, error) {
	p := &Proxy{
		upstream:       set.Upstream,
		prefix:         path.Clean("/" + set.Upstream.Path),
		authHeader:     set.AuthHeader,
		authParams:     set.AuthParams,
		maxRequestBody: set.MaxRequestBody,
		sendTimeout:    set.SendTimeout,
		maxConcurrent:  set.MaxConcurrentRequests,
		guard:          set.Guard,
		logger:         set.Logger,
	}
	if set.MaxConcurrentRequestsPerClient > 0 {
		p.perClient = &clientSlots{max: set.MaxConcurrentRequestsPerClient, ipv6Prefix: set.ClientIPv6Prefix, held: make(map[string]int64)}
	}
	p.stopCtx, p.stop = context.WithCancel(context.Background())
	serverAddress, serverPort := serverAddressPort(set.Upstream)
	p.calls = &callDeps{
		clock:         set.Clock,
		logger:        set.Logger,
		maxValueLen:   set.MaxValueLength,
		maxDecoded:    cmp.Or(set.MaxDecodedResponseBytes, DefaultMaxDecodedResponseBytes),
		keepalives:    set.RecordKeepalives,
		maxEvents:     set.MaxChunkEvents,
		keepGapsAbove: set.KeepGapsAbove,
		frameBudget:   frameBudget(set.FrameBufferBytes),
		provider:      set.Provider,
		service:       set.Service,
		serverAddress: serverAddress,
		serverPort:    serverPort,
		stopping:      p.stopCtx,
		telemetry:     set.Telemetry,
		emit:          set.Emit,
	}
	errorLog, err := zap.NewStdLogAt(set.Logger, zapcore.DebugLevel)
	if err != nil {
		p.stop()
		return nil, err
	}
	var transport http.RoundTripper = &headerTimeout{next: set.Transport, timeout: set.HeaderTimeout}
	if set.Guard != nil {
		transport = &guardTransport{next: transport}
	}
	transport = &noInformational{next: transport}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      transport,
		FlushInterval:  -1, // write every read through at once: SSE must not wait in a buffer
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.errorHandler,
		ErrorLog:       errorLog,
		BufferPool:     bufferPool{},
	}
	return p, nil
}

func frameBudget(n int64) *sse.SharedBudget {
	if n <= 0 {
		return nil
	}
	return sse.NewSharedBudget(n)
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

// FrameBufferBytes is what the streams hold of the frame budget now.
func (p *Proxy) FrameBufferBytes() int64 {
	if p.calls.frameBudget == nil {
		return 0
	}
	return p.calls.frameBudget.Used()
}

// Wait blocks until every request being proxied has finished.
func (p *Proxy) Wait() { p.inflight.Wait() }

// InFlight returns the number of requests being proxied.
func (p *Proxy) InFlight() int64 { return p.active.Load() }

// Stop ends the streams in flight (their clients and upstream requests are
// closed; their spans say error.type=shutdown) and releases the proxy.
func (p *Proxy) Stop() { p.stop() }

// stopped reports whether the streams in flight were told to end.
func (p *Proxy) stopped() bool { return p.stopCtx.Err() != nil }

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(r.TransferEncoding) > 0 || !r.ProtoAtLeast(1, 1) {
		// A chunked request may also have come with a Content-Length, which
		// net/http drops without a trace: a server in front that framed it
		// by that length would take the bytes after the chunked body for its
		// next client's request, which this connection would serve. RFC 9112
		// asks to close the connection after such a request; the proxy
		// cannot tell it apart, so it closes after every chunked one (SDKs
		// send a Content-Length). On HTTP/1.0 net/http drops a
		// Transfer-Encoding before the handler can see it, and RFC 9112
		// asks the same close for that: every HTTP/1.0 request is the last
		// of its connection (no SDK speaks HTTP/1.0).
		w.Header().Set("Connection", "close")
	}
	p.inflight.Add(1)
	defer p.inflight.Done()
	active := p.active.Add(1)
	defer p.active.Add(-1)
	if p.maxConcurrent > 0 && active > p.maxConcurrent {
		// Shed before anything is read or sent upstream: a burst past the
		// bound costs a 503 each, not the memory of open streams. The SDKs
		// retry a 503 with backoff, after Retry-After when it is given.
		p.calls.telemetry.ReceiverSseCaptureRequestsShed.Add(r.Context(), 1)
		w.Header().Set("Retry-After", "1")
		writeJSONError(w, http.StatusServiceUnavailable, errTypeOverloaded,
			fmt.Sprintf("the proxy has %d requests in flight (max_concurrent_requests)", p.maxConcurrent))
		return
	}
	if p.perClient != nil {
		client := guard.ClientOf(r.Context(), p.perClient.ipv6Prefix)
		if !p.perClient.take(client) {
			// One client's share: the others keep the slots it would
			// take. The SDKs retry a 429 with backoff.
			p.calls.telemetry.ReceiverSseCaptureRequestsLimited.Add(r.Context(), 1)
			w.Header().Set("Retry-After", "1")
			writeJSONError(w, http.StatusTooManyRequests, errTypeTooManyRequests,
				fmt.Sprintf("the client has %d requests in flight (max_concurrent_requests_per_client)", p.perClient.max))
			return
		}
		defer p.perClient.give(client)
	}
	p.calls.telemetry.ReceiverSseCaptureRequestsInFlight.Add(r.Context(), 1)
	defer p.calls.telemetry.ReceiverSseCaptureRequestsInFlight.Add(context.Background(), -1)

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

	if tunnelMethod(r.Method) {
		w.Header().Set("Allow", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
		writeJSONError(w, http.StatusMethodNotAllowed, "method_not_allowed",
			fmt.Sprintf("the proxy forwards API calls, not %s", r.Method))
		return
	}
	overridden := false
	for _, m := range methodOverrides(r.Header) {
		if tunnelMethod(m) {
			// An upstream that honours the override would tunnel or echo.
			w.Header().Set("Allow", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
			writeJSONError(w, http.StatusMethodNotAllowed, "method_not_allowed",
				fmt.Sprintf("the proxy forwards API calls, not %s (named in a method override header)", m))
			return
		}
		overridden = overridden || m != r.Method
	}
	if len(p.authParams) > 0 {
		r = withoutAuthParams(r, p.authParams)
	}
	r = withoutQuerySignature(r)
	if r.URL.Opaque != "" {
		// A target with a scheme and no path ("a:http://other/admin"):
		// net/url keeps it as Opaque, which no path check reads, and the
		// upstream request would be sent with it as its request target,
		// an absolute URL naming a host and path of the client's choosing
		// (to an egress proxy, the host it forwards to).
		writeJSONError(w, http.StatusBadRequest, "bad_request", "the request target is not a path")
		return
	}
	if !staysUnderPrefix(p.prefix, r.URL) {
		writeJSONError(w, http.StatusBadRequest, "bad_request", "the request path leaves the upstream's path")
		return
	}

	if r.ContentLength > p.maxRequestBody {
		// Refused on its length, before a byte of the body is read: a
		// client that sent Expect: 100-continue is never told to send it,
		// and the proxy neither waits for a body it would refuse nor reads
		// the limit's worth of it. Over HTTP/1 the bytes that follow on the
		// connection are that body, not a request: it is closed after the
		// answer. Over HTTP/2 they are the refused stream's alone, and the
		// connection carries the client's other streams on.
		if r.ProtoMajor < 2 {
			w.Header().Set("Connection", "close")
		}
		p.refuseTooLarge(w)
		return
	}
	body, err := readBody(r, p.maxRequestBody)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			p.refuseTooLarge(w)
			return
		}
		writeJSONError(w, http.StatusBadRequest, "bad_request", "cannot read the request body")
		return
	}

	var send *sendDeadline
	if p.sendTimeout > 0 {
		send = newSendDeadline(w, p.sendTimeout, time.Now) // a connection deadline is wall-clock time
		defer send.finish()
		w = send
	}

	ep := llmstream.ParseEndpoint(endpointPath(r.URL.Path)).OnHost(p.upstream.Hostname())
	if ep.Shape != llmstream.ShapeUnknown && r.Method == http.MethodPost && overridden {
		// An upstream that honours the override runs another method than
		// the one the proxy judged the call by, and one that ignores it
		// runs a call the proxy would not have recorded or guarded as
		// such: neither is forwarded.
		writeJSONError(w, http.StatusBadRequest, "bad_request",
			"a method override header on an API call: send the method itself")
		return
	}
	if ep.Shape == llmstream.ShapeUnknown || r.Method != http.MethodPost {
		// Not an LLM call we understand (model lists, files...): forwarded
		// as it is, without a span.
		p.rp.ServeHTTP(w, r)
		return
	}

	c := newCall(p.calls, r, ep, body)
	c.send = send
	if p.guard != nil && c.req.Stream && guardable(ep.Shape) {
		c.startGuard(p.guard, r, body)
		// Every upstream the call may go to holds its prefix, checked
		// before any attempt: an alternate's path is joined as the
		// primary's is, under its own prefix.
		for _, up := range c.guard.s.Policy().Alternates() {
			if !staysUnderPrefix(path.Clean("/"+up.URL.Path), r.URL) {
				writeJSONError(w, http.StatusBadRequest, "bad_request", "the request path leaves the upstream's path")
				return
			}
		}
	}
	defer c.finish() // also when ReverseProxy aborts the handler with http.ErrAbortHandler
	ctx = context.WithValue(r.Context(), callKey{}, c)
	p.rp.ServeHTTP(w, r.WithContext(c.outgoingContext(ctx)))
}

func (p *Proxy) refuseTooLarge(w http.ResponseWriter) {
	writeJSONError(w, http.StatusRequestEntityTooLarge, "request_too_large",
		fmt.Sprintf("request body exceeds %d bytes", p.maxRequestBody))
}

// methodOverrideHeaders are the request headers by which frameworks and
// gateways (Google's front ends, OData, Express's method-override, ...)
// let a client run another method than the request line's.
var methodOverrideHeaders = []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// methodOverrides returns the methods a request's override headers name,
// upper-cased, every value of every one of them: an upstream may read any.
func methodOverrides(h http.Header) []string {
	var ms []string
	for _, name := range methodOverrideHeaders {
		for _, v := range h.Values(name) {
			for m := range strings.SplitSeq(v, ",") {
				if m = strings.ToUpper(strings.TrimSpace(m)); m != "" {
					ms = append(ms, m)
				}
			}
		}
	}
	return ms
}

// tunnelMethod reports whether a request method is never an API call:
// CONNECT asks for a tunnel (the upstream, were it a forward proxy, would
// open one past every bound of the proxy), TRACE and TRACK echo the
// request back (with the upstream's configured credential headers), and
// PRI is HTTP/2's connection preface sent as HTTP/1.
func tunnelMethod(m string) bool {
	switch m {
	case http.MethodConnect, http.MethodTrace, "TRACK", "PRI":
		return true
	}
	return false
}

// maxPathDecodings bounds how many layers of percent-encoding are peeled off
// a request path to check it: an upstream (or a gateway in front of it) may
// decode more than once.
const maxPathDecodings = 3

// staysUnderPrefix reports whether the request path, joined to an
// upstream's path prefix (cleaned: "/" or "/openai"), stays under that
// prefix however it is read: as sent, and after each of up to
// maxPathDecodings rounds of percent-decoding, with backslashes taken as
// slashes, path parameters cut off and dot segments resolved. The request
// is forwarded as it came, but only when every reading stays under. The
// primary and every alternate are checked with it.
func staysUnderPrefix(prefix string, u *url.URL) bool {
	if prefix == "/" {
		return true // nothing is above the root
	}
	v := u.EscapedPath()
	for range maxPathDecodings + 1 {
		joined := path.Clean(prefix + "/" + withoutParameters(strings.ReplaceAll(v, `\`, "/")))
		if joined != prefix && !strings.HasPrefix(joined, prefix+"/") {
			return false
		}
		next := unescapeLeniently(v)
		if next == v {
			return true
		}
		v = next
	}
	// Still encoded after that many rounds: no legitimate path is.
	return false
}

// unescapeLeniently decodes every valid %XX of p and keeps the rest as it
// is, as Python's unquote and PHP's rawurldecode do: an escape that does not
// decode ("%zz", a "%" at the end) must not end the check before the valid
// ones beside it are read, since a lenient upstream decodes those.
func unescapeLeniently(p string) string {
	if !strings.Contains(p, "%") {
		return p
	}
	b := make([]byte, 0, len(p))
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) && isHex(p[i+1]) && isHex(p[i+2]) {
			b = append(b, unhex(p[i+1])<<4|unhex(p[i+2]))
			i += 2
			continue
		}
		b = append(b, p[i])
	}
	return string(b)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// endpointPath is the path an upstream may serve a request for, the one
// its API is told by: cleaned of empty and dot segments and of path
// parameters, as nginx, Envoy and the Java servers read a path before
// routing it. Read as sent, "/v1/chat/completions/." or
// "/v1/chat/completions;x" would pass as no API call and go on without a
// span or a guard, and still be served as one.
func endpointPath(p string) string {
	return path.Clean("/" + withoutParameters(p))
}

// withoutParameters cuts each segment of p at its first ';': the servers
// that read path parameters (Tomcat, Jetty, and the gateways built on
// them) cut them before resolving dot segments, so that "..;" or "..;x=1"
// is ".." to them.
func withoutParameters(p string) string {
	if !strings.Contains(p, ";") {
		return p
	}
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		segs[i], _, _ = strings.Cut(seg, ";")
	}
	return strings.Join(segs, "/")
}

// readBody buffers the request body (so the model can be read without
// delaying the stream that follows) up to limit bytes. An in-memory body
// also keeps the Transport's write loop off the server's request body,
// which the server drains and closes once the response is flushed: a plain
// ReverseProxy that streams the body can lose the upstream connection to
// that race (see the go_bare baseline in bench/harness_test.go).
//
// The request goes on with a Content-Length and without trailers: a
// trailer is a header the listener's authenticator never saw and the
// proxy never filtered (X-Collector-Token as a trailer), so none is sent
// upstream. Its GetBody refuses once the body is being sent
// (guard.RequestBody), which makes net/http's Transport unable to send it
// again on its own (a POST with Idempotency-Key is replayed on every reused
// connection that dies under it) while a signer can still hash it: an
// upstream request is an attempt, counted and bounded by the guard, or the
// call's one request.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	r.Trailer = nil
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	_ = r.Body.Close()
	r.Trailer = nil // the server fills it in at the end of the body
	if err != nil {
		return nil, err
	}
	r.Body, r.GetBody = guard.RequestBody(body)
	r.ContentLength = int64(len(body))
	r.TransferEncoding = nil
	r.Header.Del("Transfer-Encoding")
	r.Header.Del("Trailer")
	return body, nil
}

// rewrite pins the upstream: neither an absolute-form request URI nor a Host
// header can choose where a request goes. Inbound X-Forwarded-* headers are
// dropped (Rewrite does that) and none are added: the upstream is a third
// party that has no use for the addresses of our clients. The header the
// listener's authenticator read stays here: it is the collector's
// credential, not the provider's.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(p.upstream)
	pr.Out.URL.Opaque = "" // ServeHTTP refuses an opaque target; none is ever sent
	pr.Out.Host = ""
	if p.authHeader != "" {
		pr.Out.Header.Del(p.authHeader)
	}
	dropClientSignature(pr.Out.Header)
	dropForwarding(pr.Out.Header)
	// ReverseProxy drops the hop-by-hop headers, then puts back "TE:
	// trailers" and, for an upgrade, "Connection: Upgrade" and "Upgrade"
	// before calling Rewrite. Nothing hop-by-hop goes on: an LLM call never
	// switches protocols, and an upstream has no use for our client's
	// trailer support. Nor does Expect: the body is read whole already (the
	// server sent the client its 100 Continue), and the Transport would
	// wait for the upstream's before sending it.
	for _, h := range []string{"Connection", "Te", "Upgrade", "Expect"} {
		pr.Out.Header.Del(h)
	}
	// The client's codings that the proxy can decode on the side, or
	// identity: the client gets bytes it can read, the proxy frames it can.
	pr.Out.Header.Set("Accept-Encoding", forwardedAcceptEncoding(pr.In.Header.Values("Accept-Encoding")))
	if c, ok := pr.In.Context().Value(callKey{}).(*call); ok {
		c.injectTraceContext(pr.Out.Header)
	}
}

// dropForwarding removes what a client says a proxy in front of the
// upstream would: ReverseProxy's Rewrite drops Forwarded and three
// X-Forwarded-* headers, and leaves the others (X-Forwarded-Prefix, -Port,
// -Server, -Uri...), X-Real-Ip, and X-Original-Url and X-Rewrite-Url, with
// which a proxy in front tells a server (IIS, Symfony) the path a request
// was really for: a server that honours them routes by them, past the
// prefix the request path was checked against. No proxy is in front of the
// upstream but this one, which tells it nothing of its clients: each of
// them is the client's invention.
func dropForwarding(h http.Header) {
	for name := range h {
		if forwardingHeader(name) {
			delete(h, name)
		}
	}
}

// forwardingHeader reports whether a header is one dropForwarding removes,
// its name read as servers that take an underscore for a hyphen (CGI and
// WSGI: X-Forwarded_Prefix is their HTTP_X_FORWARDED_PREFIX) read it.
func forwardingHeader(name string) bool {
	n := strings.ReplaceAll(strings.ToLower(name), "_", "-")
	switch n {
	case "x-real-ip", "x-original-url", "x-rewrite-url":
		return true
	}
	return strings.HasPrefix(n, "x-forwarded-")
}

// errSwitchedProtocols: the upstream answered 101, which no request of
// the proxy asks for (it never forwards Upgrade).
var errSwitchedProtocols = errors.New("upstream switched protocols unasked")

func (p *Proxy) modifyResponse(resp *http.Response) error {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// Refused here, ReverseProxy closes the body (the raw connection)
		// and answers 502; refused by its own check, it left the
		// connection open.
		return errSwitchedProtocols
	}
	if c, ok := resp.Request.Context().Value(callKey{}).(*call); ok {
		c.response(resp)
	}
	return nil
}

// errorHandler answers when the upstream could not be reached (or did not
// answer in time), in the error shape OpenAI and Anthropic clients parse.
func (p *Proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
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

// ServerError answers, in the proxy's JSON error, what confighttp refuses
// before the proxy runs: a request Content-Encoding it does not decode, or
// a body that does not decode in it (400), and a failed authentication
// (401). Its own answer is text, which an SDK cannot read as an API error.
func ServerError(w http.ResponseWriter, _ *http.Request, msg string, status int) {
	typ := "bad_request"
	switch {
	case status == http.StatusUnauthorized:
		typ = "unauthorized"
	case status >= 500:
		typ = "internal_error"
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
	if !timer.Stop() {
		// The timeout has cancelled the request: headers that came as it
		// did head a body whose first read fails, a 200 and a cut stream
		// the upstream never cut. Past the deadline the wait is a timeout.
		if err == nil {
			_ = resp.Body.Close()
			err = errors.New("the response headers came as the timeout ran out")
		}
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

// withoutAuthParams returns r without the collector's credential that
// confighttp's auth.request_params took from its query: the listener's
// authenticator read each named parameter there, after copying it into the
// request's headers under the parameter's own spelling (not canonical), and
// left both in place. Each parameter the query holds is removed from it,
// every other byte of the query kept as sent, and so is its copy in the
// headers; the upstream, an alternate and the span see neither.
func withoutAuthParams(r *http.Request, params []string) *http.Request {
	if r.URL.RawQuery == "" {
		return r
	}
	query := r.URL.Query()
	var found []string
	for _, name := range params {
		if _, ok := query[name]; ok {
			found = append(found, name)
		}
	}
	if len(found) == 0 {
		return r
	}
	out := r.Clone(r.Context())
	for _, name := range found {
		delete(out.Header, name) // the spelling the listener wrote it under
	}
	out.URL.RawQuery, _ = guard.DropQueryPairs(out.URL.RawQuery, func(name string) bool { return slices.Contains(found, name) })
	out.RequestURI = out.URL.RequestURI()
	return out
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/sse"
	"github.com/streamstall/streamstall/internal/truncate"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/frames"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/guard"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

// error.type values of proxy spans (besides provider error types and HTTP
// status codes). They are low-cardinality identifiers, as the semantic
// conventions ask.
const (
	// errTypeCancelled: the client went away before the response ended; the
	// upstream request was cancelled with it.
	errTypeCancelled = "cancelled"
	// errTypeTruncated: the upstream closed or broke the stream before its
	// terminal frame.
	errTypeTruncated           = "stream_truncated"
	errTypeUpstreamUnreachable = "upstream_unreachable"
	errTypeUpstreamTimeout     = "upstream_timeout"
	// errTypeShutdown: the stream was still open when the receiver's
	// shutdown_timeout ran out; the proxy ended it.
	errTypeShutdown = "shutdown"
	// errTypeSendTimeout: the client accepted no byte of the response for
	// the proxy's send_timeout; the proxy ended it, and the upstream
	// request with it.
	errTypeSendTimeout = "send_timeout"
	// errTypeOverloaded: the error type of the 503 a request gets when
	// the proxy has max_concurrent_requests in flight (no span is made).
	errTypeOverloaded = "overloaded"
	// errTypeTooManyRequests: the error type of the 429 a request gets
	// when its client has max_concurrent_requests_per_client in flight.
	errTypeTooManyRequests = "too_many_requests"
)

// MaxHedgeAttributes bounds the llm.hedge.* baggage entries recorded per
// span (the hedging client sets six); more are ignored.
const MaxHedgeAttributes = 16

// MaxFinishReasons bounds the finish reasons recorded per span: one per
// choice, and providers cap choices at 128.
const MaxFinishReasons = 128

// maxResponseCapture bounds the bytes of a non-streaming response kept to
// read its usage and ids; beyond it the metadata is skipped, never the bytes.
const maxResponseCapture = 1 << 20

type frameEvent struct {
	at   int64
	kind string
}

// callDeps is what a call needs beyond its request: how its span is
// shaped and where it goes. The proxy builds one, shared by every call.
type callDeps struct {
	clock       clockwork.Clock
	logger      *zap.Logger
	maxValueLen int
	maxDecoded  int64 // decoded bytes of a content-coded stream
	keepalives  bool  // record non-content frames
	// maxEvents bounds the chunk events of a span, and its keepalive
	// events apart; keepGapsAbove is the keeper's gap (figures.Keeper).
	maxEvents     int
	keepGapsAbove time.Duration
	// frameBudget bounds the frame buffers of every stream together.
	frameBudget   *sse.SharedBudget
	provider      string // configured; empty infers it from the request path
	service       string // service.name of every span's resource
	serverAddress string
	serverPort    int64
	// stopping is done once the streams in flight are to be ended.
	stopping  context.Context
	telemetry *metadata.TelemetryBuilder
	emit      func(ptrace.Traces)
}

// call is one proxied LLM call on its way to becoming a span. All its
// methods run on the handler's goroutine (ReverseProxy reads and closes the
// upstream body there), so it needs no lock.
type call struct {
	d      *callDeps
	ctx    context.Context // the inbound request's: done when the client leaves
	shape  llmstream.Shape
	ep     llmstream.Endpoint // what the request path says
	start  int64
	req    llmstream.Request
	sc     trace.SpanContext // ours: the inbound trace, our span id
	parent pcommon.SpanID
	hedge  pcommon.Map

	status    int
	streaming bool
	meta      llmstream.Meta
	chunks    *figures.Keeper // nil until the first content frame
	frames    []frameEvent    // non-content frames, kept with record_keepalives
	// framesDropped counts the non-content frames past maxEvents.
	framesDropped int64
	terminal      bool // a done or error frame, or a whole JSON body, arrived
	eof           bool
	readErr       error
	send          *sendDeadline // nil without a send_timeout
	errType       string
	parseErr      error
	oversized     int64 // stream frames skipped for their size
	// captureErr says why the frames could not be read (all of them):
	// llm.stream.capture_error.
	captureErr string
	guard      *guardCall // set on a guarded call
}

func newCall(d *callDeps, r *http.Request, ep llmstream.Endpoint, body []byte) *call {
	c := &call{d: d, ctx: r.Context(), shape: ep.Shape, ep: ep, start: d.clock.Now().UnixNano(), hedge: pcommon.NewMap()}
	// On a body it cannot read, ParseRequest still returns what the path says.
	c.req, _ = ep.ParseRequest(body)
	c.req.Model = c.capValue(c.req.Model)
	inbound := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(r.Header)))
	cfg := trace.SpanContextConfig{TraceFlags: trace.FlagsSampled, SpanID: newSpanID()}
	if inbound.IsValid() {
		// The caller's sampling decision travels on upstream; the span itself
		// is always recorded: measuring every stream is this receiver's job.
		cfg.TraceID, cfg.TraceState, cfg.TraceFlags = inbound.TraceID(), inbound.TraceState(), inbound.TraceFlags()
		c.parent = pcommon.SpanID(inbound.SpanID())
	} else {
		cfg.TraceID = newTraceID()
	}
	c.sc = trace.NewSpanContext(cfg)
	c.readHedgeBaggage(r.Header.Values("baggage"))
	return c
}

func newSpanID() (id trace.SpanID) {
	for id == (trace.SpanID{}) {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

func newTraceID() (id trace.TraceID) {
	for id == (trace.TraceID{}) {
		binary.BigEndian.PutUint64(id[:8], rand.Uint64())
		binary.BigEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

// readHedgeBaggage turns llm.hedge.* baggage entries into typed attributes.
// Other entries are none of our business and are not recorded.
func (c *call) readHedgeBaggage(headers []string) {
	for _, h := range headers {
		bag, err := baggage.Parse(h)
		if err != nil {
			c.d.logger.Debug("ignoring malformed baggage", zap.Error(err))
			continue
		}
		for _, m := range bag.Members() {
			key, value := m.Key(), c.capValue(m.Value())
			if !strings.HasPrefix(key, "llm.hedge.") || len(key) > c.d.maxValueLen {
				continue
			}
			if _, seen := c.hedge.Get(key); !seen && c.hedge.Len() >= MaxHedgeAttributes {
				c.d.logger.Debug("ignoring hedge baggage past the limit", zap.Int("limit", MaxHedgeAttributes))
				continue
			}
			switch key {
			case semconv.AttrHedgeAttempt:
				n, err := strconv.ParseInt(value, 10, 64)
				if err != nil {
					c.d.logger.Debug("ignoring a non-integer hedge attempt", zap.String("value", value))
					continue
				}
				c.hedge.PutInt(key, n)
			case semconv.AttrHedgeLoser, semconv.AttrHedgeOutcomeInferred:
				b, err := strconv.ParseBool(value)
				if err != nil {
					continue
				}
				c.hedge.PutBool(key, b)
			case semconv.AttrHedgeDelayMs:
				// A double of milliseconds (docs/contract.md section 5).
				ms, err := strconv.ParseFloat(value, 64)
				if err != nil || !(ms >= 0) || math.IsInf(ms, 0) {
					c.d.logger.Debug("ignoring a hedge delay that is no finite, non-negative number", zap.String("value", value))
					continue
				}
				c.hedge.PutDouble(key, ms)
			default:
				c.hedge.PutStr(key, value)
			}
		}
	}
}

// outgoingContext carries our span context, so that an instrumented upstream
// transport (the collector's own telemetry) parents its span on ours.
func (c *call) outgoingContext(ctx context.Context) context.Context {
	return trace.ContextWithSpanContext(ctx, c.sc)
}

// injectTraceContext sends a traceparent naming our span upstream.
func (c *call) injectTraceContext(h http.Header) {
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), c.sc), propagation.HeaderCarrier(h))
}

// response inspects the upstream's response headers and wraps its body: a
// stream (Server-Sent Events, Ollama's NDJSON, Gemini's JSON array) is
// classified frame by frame, anything else read whole.
func (c *call) response(resp *http.Response) {
	c.status = resp.StatusCode
	if c.status >= 400 {
		c.meta.ErrorType = c.capValue(llmstream.BedrockErrorType(c.shape, resp.Header))
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	coding, decodable := frames.ResponseCoding(resp.Header.Values("Content-Encoding"))
	if framing, ok := llmstream.StreamFraming(c.shape, c.req.Stream, resp.StatusCode, mediaType); ok {
		c.streaming = true
		b := newStreamTee(c, resp.Body, framing, coding, decodable)
		resp.Body = b
		if c.guard != nil {
			c.guard.watch(b)
		}
		return
	}
	if !decodable {
		c.captureFailed(captureUnsupportedEncoding, coding, nil)
	}
	resp.Body = &jsonTee{rc: resp.Body, c: c, coding: coding}
}

func (c *call) failed(status int, errType string) {
	c.status, c.errType = status, errType
}

func (c *call) cancelled() { c.errType = errTypeCancelled }

// provider is gen_ai.provider.name: the configured one, else the one the
// request path names.
func (c *call) provider() string {
	if c.d.provider != "" {
		return c.d.provider
	}
	return c.ep.Provider
}

// capValue bounds a string taken from a request or response before it
// becomes an attribute or part of the span name.
func (c *call) capValue(s string) string {
	return truncate.UTF8(s, c.d.maxValueLen)
}

// merge adds what a frame or a response body says about the response,
// every value bounded: the span keeps what it records, and no more.
func (c *call) merge(m *llmstream.Meta) {
	reasons := len(c.meta.FinishReasons)
	c.meta.Merge(m)
	c.meta.ResponseID = c.capValue(c.meta.ResponseID)
	c.meta.ResponseModel = c.capValue(c.meta.ResponseModel)
	c.meta.ErrorType = c.capValue(c.meta.ErrorType)
	c.meta.ErrorMessage = "" // never recorded: it may echo the request
	if len(c.meta.FinishReasons) > MaxFinishReasons {
		clear(c.meta.FinishReasons[MaxFinishReasons:])
		c.meta.FinishReasons = c.meta.FinishReasons[:MaxFinishReasons]
	}
	for i := reasons; i < len(c.meta.FinishReasons); i++ {
		c.meta.FinishReasons[i] = c.capValue(c.meta.FinishReasons[i])
	}
}

func (c *call) onFrame(f *llmstream.Frame, at int64) {
	c.merge(&f.Meta)
	switch f.Kind {
	case llmstream.KindContent:
		if c.chunks == nil {
			c.chunks = figures.NewKeeper(c.maxEvents(), c.d.keepGapsAbove)
		}
		c.chunks.Add(at, f.ChunkKind)
		if c.guard != nil {
			c.guard.content(at, f.ChunkKind)
		}
		return
	case llmstream.KindDone:
		c.terminal = true
	case llmstream.KindError:
		c.terminal = true
		if c.errType == "" {
			c.errType = c.capValue(f.Meta.ErrorType)
		}
	}
	if c.terminal && c.guard != nil {
		c.guard.terminal()
	}
	if c.d.keepalives {
		if len(c.frames) >= c.maxEvents() {
			c.framesDropped++
			return
		}
		c.frames = append(c.frames, frameEvent{at: at, kind: f.Kind.String()})
	}
}

// bodyError fails a call whose whole response body, under a success
// status, is its API's error object (a gateway answering 200 with the
// error), as an error frame fails a stream: with the error's code or type,
// or error when it names none (Ollama's). Under an error status outcome
// reads it already.
func (c *call) bodyError(m *llmstream.Meta) {
	if c.status >= 400 || c.errType != "" || (m.ErrorType == "" && m.ErrorMessage == "") {
		return
	}
	c.errType = c.capValue(cmp.Or(m.ErrorType, llmstream.ErrorTypeUnknown))
}

func (c *call) maxEvents() int {
	if c.d.maxEvents > 0 {
		return c.d.maxEvents
	}
	return figures.DefaultMaxChunkEvents
}

// outcome settles error.type: a complete response is fine, one the client
// abandoned is cancelled, one the upstream cut is truncated.
func (c *call) outcome() string {
	if c.errType != "" {
		return c.errType
	}
	if c.status >= 400 {
		if c.meta.ErrorType != "" {
			return c.meta.ErrorType
		}
		return strconv.Itoa(c.status)
	}
	complete := c.terminal || (c.streaming && c.eof && len(c.meta.FinishReasons) > 0)
	switch {
	case complete:
		return ""
	case c.d.stopping.Err() != nil:
		return errTypeShutdown
	case c.send != nil && c.send.timedOut:
		return errTypeSendTimeout
	case c.ctx.Err() != nil, errors.Is(c.readErr, context.Canceled), c.readErr == nil && !c.eof:
		// Without a read error or an end of body, the copy stopped on the
		// client's side.
		return errTypeCancelled
	case c.captureErr != "" && c.readErr == nil:
		// The body ended as it should, but the proxy could not read its
		// frames to the end: whether the stream was whole is unknown, and
		// llm.stream.capture_error says so.
		return ""
	}
	return errTypeTruncated
}

// finish turns the call into a span and queues it.
func (c *call) finish() {
	if c.guard != nil {
		c.settleGuard()
	}
	end := c.d.clock.Now().UnixNano()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(semconv.AttrServiceName, c.d.service)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(metadata.ScopeName)
	span := ss.Spans().AppendEmpty()
	c.fillSpan(span, end)
	if c.parseErr != nil {
		c.d.logger.Debug("stream frames not understood", zap.Error(c.parseErr))
	}
	c.d.telemetry.ReceiverSseCaptureStreamsCaptured.Add(context.Background(), 1)
	if reason := c.outcome(); cutByProxy(reason) {
		// Counted apart from the span, which a full queue or a sampler
		// downstream may drop: cuts are what an on-call engineer alerts on.
		c.d.telemetry.ReceiverSseCaptureStreamsCut.Add(context.Background(), 1,
			metric.WithAttributes(attribute.String("reason", reason)))
	} else {
		c.d.countUpstreamFailure(reason)
	}
	if c.chunks != nil {
		c.d.telemetry.ReceiverSseCaptureChunksCaptured.Add(context.Background(), c.chunks.Total())
	}
	c.d.emit(td)
}

// cutByProxy reports whether error.type says the proxy ended the call
// itself, before its upstream did.
// countUpstreamFailure counts a call or an attempt whose upstream could
// not be reached or did not answer in time, apart from its span as cuts
// are: an upstream that is down is the commonest page.
func (d *callDeps) countUpstreamFailure(errType string) {
	if errType == errTypeUpstreamUnreachable || errType == errTypeUpstreamTimeout {
		d.telemetry.ReceiverSseCaptureUpstreamFailures.Add(context.Background(), 1,
			metric.WithAttributes(attribute.String("reason", errType)))
	}
}

func cutByProxy(errType string) bool {
	switch errType {
	case guard.ErrTypeStallTimeout, guard.ErrTypeTTFTTimeout, errTypeSendTimeout, errTypeShutdown:
		return true
	}
	return false
}

func (c *call) fillSpan(span ptrace.Span, end int64) {
	op := c.shape.Operation()
	span.SetName(op)
	if c.req.Model != "" {
		span.SetName(op + " " + c.req.Model)
	}
	span.SetKind(ptrace.SpanKindClient)
	span.SetTraceID(pcommon.TraceID(c.sc.TraceID()))
	span.SetSpanID(pcommon.SpanID(c.sc.SpanID()))
	span.SetParentSpanID(c.parent)
	span.TraceState().FromRaw(c.sc.TraceState().String())
	span.SetStartTimestamp(pcommon.Timestamp(c.start))
	span.SetEndTimestamp(pcommon.Timestamp(end))

	attrs := span.Attributes()
	attrs.EnsureCapacity(16 + c.hedge.Len())
	attrs.PutStr(semconv.AttrOperationName, op)
	attrs.PutStr(semconv.AttrCapture, semconv.CaptureProxy)
	attrs.PutStr(semconv.AttrProviderName, c.provider())
	if c.req.Model != "" {
		attrs.PutStr(semconv.AttrRequestModel, c.req.Model)
	}
	attrs.PutBool(semconv.AttrRequestStream, c.req.Stream)
	if c.meta.ResponseModel != "" {
		attrs.PutStr(semconv.AttrResponseModel, c.meta.ResponseModel)
	}
	if c.meta.ResponseID != "" {
		attrs.PutStr(semconv.AttrResponseID, c.meta.ResponseID)
	}
	if len(c.meta.FinishReasons) > 0 {
		fr := attrs.PutEmptySlice(semconv.AttrResponseFinishReasons)
		for _, r := range c.meta.FinishReasons {
			fr.AppendEmpty().SetStr(r)
		}
	}
	if c.meta.HasInputTokens {
		attrs.PutInt(semconv.AttrUsageInputTokens, c.meta.InputTokens)
	}
	if c.meta.HasOutputTokens {
		attrs.PutInt(semconv.AttrUsageOutputTokens, c.meta.OutputTokens)
	}
	serverAddress, serverPort := c.serverAddressPort()
	attrs.PutStr(semconv.AttrServerAddress, serverAddress)
	attrs.PutInt(semconv.AttrServerPort, serverPort)
	if c.status != 0 {
		attrs.PutInt(semconv.AttrHTTPStatusCode, int64(c.status))
	}
	if c.oversized > 0 {
		attrs.PutInt(semconv.AttrOversizedFrames, c.oversized)
	}
	c.putServerTimings(attrs)
	if c.captureErr != "" {
		attrs.PutStr(semconv.AttrCaptureError, c.captureErr)
	}
	if c.chunks != nil {
		figures.PutElision(c.chunks, attrs)
	}
	if c.framesDropped > 0 {
		attrs.PutInt(semconv.AttrKeepaliveEventsDropped, c.framesDropped)
	}
	c.hedge.Range(func(k string, v pcommon.Value) bool {
		v.CopyTo(attrs.PutEmpty(k))
		return true
	})
	if errType := c.outcome(); errType != "" {
		attrs.PutStr(semconv.AttrErrorType, errType)
		span.Status().SetCode(ptrace.StatusCodeError)
		span.Status().SetMessage(statusMessage(errType, c.status))
	}

	events := span.Events()
	if c.chunks != nil {
		events.EnsureCapacity(len(c.chunks.Chunks()) + len(c.frames))
		figures.AppendChunkEvents(c.chunks, events)
	}
	for _, fr := range c.frames {
		ev := events.AppendEmpty()
		ev.SetName(semconv.EventKeepalive)
		ev.SetTimestamp(pcommon.Timestamp(fr.at))
		ev.Attributes().PutStr(semconv.AttrFrameKind, fr.kind)
	}
}

// putServerTimings records the durations the upstream reported for its own
// work, in milliseconds, each when reported.
func (c *call) putServerTimings(attrs pcommon.Map) {
	for _, t := range []struct {
		name string
		ns   int64
	}{
		{semconv.AttrServerTotalMs, c.meta.Server.Total},
		{semconv.AttrServerLoadMs, c.meta.Server.Load},
		{semconv.AttrServerPromptEvalMs, c.meta.Server.PromptEval},
		{semconv.AttrServerEvalMs, c.meta.Server.Eval},
	} {
		if t.ns > 0 {
			attrs.PutDouble(t.name, float64(t.ns)/1e6)
		}
	}
}

// statusMessage explains an error without quoting the provider, whose
// messages may echo the request.
func statusMessage(errType string, status int) string {
	switch errType {
	case errTypeCancelled:
		return "client disconnected before the response ended"
	case errTypeTruncated:
		return "upstream ended the stream before its terminal frame"
	case errTypeUpstreamUnreachable:
		return "upstream unreachable"
	case errTypeUpstreamTimeout:
		return "upstream did not answer in time"
	case errTypeShutdown:
		return "the collector shut down before the response ended"
	}
	if status >= 400 {
		return fmt.Sprintf("upstream answered %d", status)
	}
	return "upstream reported an error in its response"
}

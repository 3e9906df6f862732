// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamstall/streamstall/internal/hedgecore"
	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/guard"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

// finishReasonError is gen_ai.response.finish_reasons of a stream the guard
// ended itself.
const finishReasonError = "error"

// HeaderTimeout bounds the wait for an upstream's response headers by
// timeout, never the stream that follows, as the proxy does for its
// primary; the receiver wraps the guard's alternates in it.
func HeaderTimeout(next http.RoundTripper, timeout time.Duration) http.RoundTripper {
	return &headerTimeout{next: next, timeout: timeout}
}

// guardTransport hands the requests of guarded calls to their session,
// which sends them to the primary over next, and to the alternates.
type guardTransport struct{ next http.RoundTripper }

func (t *guardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if c, ok := req.Context().Value(callKey{}).(*call); ok && c.guard != nil {
		return c.guard.s.RoundTrip(req, t.next)
	}
	return t.next.RoundTrip(req)
}

// guardCall is a guarded call's side of the guard: its session, the span
// ids of its attempts, and the progress its watchdog reads. Like the call,
// it is the copy loop's.
type guardCall struct {
	s       *guard.Session
	ids     [hedgecore.MaxAttempts]trace.SpanID
	groupID string
	// upstream is the alternate the span's attempt went to; nil: the primary.
	upstream *guard.Upstream
	// progress is where the tee publishes the committed stream's content
	// chunks and terminal frame for the guard; nil when the guard cannot
	// end the stream.
	progress *guard.Progress
}

// guardable reports whether the guard can end a stream of the shape in the
// API's own error format: every shape llmstream knows one for (OpenAI's
// three APIs, Anthropic's Messages, Gemini, Ollama's chat and generate).
func guardable(s llmstream.Shape) bool { return llmstream.HasErrorFrame(s) }

// startGuard makes c a guarded call: its request goes through a session of
// g, which races attempts and watches the committed stream.
func (c *call) startGuard(g *guard.Guard, r *http.Request, body []byte) {
	gc := &guardCall{s: g.NewSession(c.d.stopping, c.provider(), c.req.Model, c.shape, r.URL, body, c.start)}
	// The session's attempts send bodies of their own: the request's is
	// never read, and lets go of the prompt now.
	guard.ReleaseBody(r.Body)
	// Held attempts draw on the frame budget, and are decoded as the tee
	// decodes the committed stream.
	gc.s.Budget, gc.s.MaxDecoded = c.d.frameBudget, c.d.maxDecoded
	// A loser's span records the frames its attempt kept before content as
	// a span records its keepalives: at most maxEvents, the rest counted.
	gc.s.MaxFrames = c.maxEvents()
	gc.ids[0] = c.sc.SpanID()
	gc.groupID = hex.EncodeToString(gc.ids[0][:])
	gc.s.OnAttempt = func(i int, h http.Header) {
		if i > 0 {
			gc.ids[i] = newSpanID()
		}
		// Each attempt's upstream request names the attempt's own span.
		propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), c.attemptContext(gc.ids[i])),
			propagation.HeaderCarrier(h))
	}
	c.guard = gc
}

func (c *call) attemptContext(id trace.SpanID) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: c.sc.TraceID(), SpanID: id, TraceFlags: c.sc.TraceFlags(), TraceState: c.sc.TraceState(),
	})
}

// watch starts the committed stream's watchdog: b classifies every read as
// it passes, on the copy loop, and publishes the content chunks it finds.
// A coded stream's classifier also codes the guard's closing frame.
func (g *guardCall) watch(b *streamTee) {
	var tail guard.CodedTail
	if b.frames != nil && b.frames.Coded() {
		tail = b.frames
	}
	b.eager = true
	g.progress = g.s.Watch(tail)
}

// content publishes a content chunk for the watchdog.
func (g *guardCall) content(at int64, kind string) {
	if g.progress != nil {
		g.progress.Content(at, kind != semconv.ChunkKindReasoning)
	}
}

// terminal tells the watchdog the stream's terminal frame has passed.
func (g *guardCall) terminal() {
	if g.progress != nil {
		g.progress.Terminal()
	}
}

// reading tells the watchdog the copy loop reads the upstream again, at
// at.
func (g *guardCall) reading(at int64) {
	if g.progress != nil {
		g.progress.Reading(at)
	}
}

// arrived tells the watchdog of a read not classified yet, which came back
// at returned with bytes that arrived at at.
func (g *guardCall) arrived(at, returned int64) {
	if g.progress != nil {
		g.progress.Arrived(at, returned)
	}
}

// classified tells the watchdog every read so far is classified, and
// whether the stream's frames can no longer be read (blind).
func (g *guardCall) classified(blind bool) {
	if g.progress == nil {
		return
	}
	g.progress.Classified()
	if blind {
		g.progress.Blind()
	}
}

// serverAddressPort is where the span's attempt went.
func (c *call) serverAddressPort() (string, int64) {
	if c.guard != nil && c.guard.upstream != nil {
		return c.guard.upstream.Address, c.guard.upstream.Port
	}
	return c.d.serverAddress, c.d.serverPort
}

// settleGuard ends the guarded call's session, makes c the span of the
// attempt the client got, and emits the spans of the other attempts. It
// runs at the start of finish, once the response is over.
func (c *call) settleGuard() {
	g := c.guard
	if c.outcome() == errTypeTruncated || c.status < 400 && c.errType != "" {
		// The span's verdict, before the guard's own ending joins it (a
		// stream the guard ended is settled on that ending instead): cut,
		// or ended by the API's error frame (errType holds nothing else
		// yet).
		g.s.StreamFailed()
	}
	losers := g.s.Finish()
	rep := g.s.Representative()
	if rep.Attempt > 0 {
		// The span starts when the race started the attempt, so that the
		// TTFT the stall processor derives is the one the race saw.
		c.start, c.sc = rep.Start, c.attemptContext(g.ids[rep.Attempt])
	}
	g.upstream = rep.Upstream
	g.putHedge(c.hedge, &rep, semconv.HedgeOutcomeWinner)
	if ended := g.s.Ended(); ended != "" {
		c.errType = ended
		c.meta.FinishReasons = append(c.meta.FinishReasons, finishReasonError)
	}
	if t := g.s.StallTimeoutUsed(); t > 0 {
		c.hedge.PutDouble(semconv.AttrStallTimeoutMs, float64(t)/1e6)
		if src := g.s.StallTimeoutSource(); src != guard.StallConfigured {
			c.hedge.PutStr(semconv.AttrStallTimeoutSource, src.String())
		}
	}
	if pol := g.s.Policy(); pol.Learns() && c.chunks != nil && len(c.chunks.Chunks()) > 0 {
		pol.ObserveGaps(c.d.clock.Now().UnixNano(), c.gaps())
	}
	for i := range losers {
		c.emitLoser(&losers[i])
	}
	ctx := context.Background()
	tel := c.d.telemetry
	if n := g.s.Attempts() - 1; n > 0 {
		tel.ReceiverSseCaptureHedgesStarted.Add(ctx, int64(n))
	}
	if g.s.Won() {
		tel.ReceiverSseCaptureHedgesWon.Add(ctx, 1)
	}
	// Which bucket refused tells one client's spent bucket (the budget
	// at work) from the shared one (hedging off for every client).
	if n := g.s.Refused() - g.s.RefusedShared(); n > 0 {
		tel.ReceiverSseCaptureHedgesRefused.Add(ctx, int64(n), metric.WithAttributes(attribute.String("bucket", "client")))
	}
	if n := g.s.RefusedShared(); n > 0 {
		tel.ReceiverSseCaptureHedgesRefused.Add(ctx, int64(n), metric.WithAttributes(attribute.String("bucket", "shared")))
	}
}

// gaps are the gaps between the call's content chunks for a learned stall
// timeout; the silence an unfinished stream ended in is a censored one. The
// gaps across elided chunks (figures.Keeper), each at most keep_gaps_above
// and not known one by one, are a run at their mean, as stall_metrics
// records them (figures.GapRun): left out, a long stream would teach only
// its long gaps, and the bound on its events would raise the timeout. A
// run's reasoning gaps (those its reasoning chunks end) are a run apart.
func (c *call) gaps() []guard.Gap {
	kept := c.chunks.Chunks()
	gaps := make([]guard.Gap, 0, len(kept))
	for i := 1; i < len(kept); i++ {
		reasoning := kept[i].Kind == semconv.ChunkKindReasoning
		span := kept[i].At - kept[i-1].At
		if kept[i].Elided == 0 {
			gaps = append(gaps, guard.Gap{Length: time.Duration(span), Reasoning: reasoning})
			continue
		}
		n := kept[i].Elided + 1
		mean := time.Duration(span / n)
		r := kept[i].ElidedReasoning
		if reasoning {
			r++
		}
		if r > 0 {
			gaps = append(gaps, guard.Gap{Length: mean, Reasoning: true, Count: r})
		}
		if n > r {
			gaps = append(gaps, guard.Gap{Length: mean, Count: n - r})
		}
	}
	if !c.terminal || c.errType != "" {
		last := kept[len(kept)-1]
		gaps = append(gaps, guard.Gap{
			Length: time.Duration(c.d.clock.Now().UnixNano() - last.At), Censored: true,
			Reasoning: last.Kind == semconv.ChunkKindReasoning,
		})
	}
	return gaps
}

// guardHedgeAttributes are the llm.hedge.* attributes that describe an
// attempt of the guard's: a client's baggage entries of these names are
// dropped from its spans, so that the client cannot make the attempt it
// got a loser, or give an attempt a trigger or a delay it did not have.
var guardHedgeAttributes = []string{
	semconv.AttrHedgeTrigger, semconv.AttrHedgeDelayMs, semconv.AttrHedgeDelaySource,
	semconv.AttrHedgeLoser, semconv.AttrHedgeOutcomeInferred,
}

// putHedge writes an attempt's llm.hedge.* attributes (docs/contract.md
// section 5) over whatever baggage said.
func (g *guardCall) putHedge(m pcommon.Map, r *guard.Report, outcome string) {
	for _, k := range guardHedgeAttributes {
		m.Remove(k)
	}
	m.PutStr(semconv.AttrHedgeGroupID, g.groupID)
	m.PutInt(semconv.AttrHedgeAttempt, int64(r.Attempt))
	m.PutStr(semconv.AttrHedgeOutcome, outcome)
	if r.Trigger != hedgecore.TriggerPrimary {
		m.PutStr(semconv.AttrHedgeTrigger, r.Trigger.String())
	}
	if r.DelaySource != hedgecore.DelayNone {
		m.PutDouble(semconv.AttrHedgeDelayMs, float64(r.Delay)/1e6)
		m.PutStr(semconv.AttrHedgeDelaySource, r.DelaySource.String())
	}
}

// emitLoser emits the span of an attempt the client did not get: a sibling
// of the call's span, in the same trace, from its start to the moment the
// race dropped it or it failed.
func (c *call) emitLoser(r *guard.Report) {
	l := &call{
		d: c.d, ctx: c.ctx, shape: c.shape, ep: c.ep, start: r.Start, req: c.req, parent: c.parent,
		sc: c.attemptContext(c.guard.ids[r.Attempt]), hedge: pcommon.NewMap(), status: r.Status,
		streaming: true, guard: &guardCall{upstream: r.Upstream},
	}
	c.hedge.CopyTo(l.hedge)
	l.merge(&r.Meta)
	c.guard.putHedge(l.hedge, r, semconv.HedgeOutcomeLoser)
	if c.d.keepalives {
		for _, f := range r.Frames {
			l.frames = append(l.frames, frameEvent{at: f.At, kind: f.Kind.String()})
		}
		l.framesDropped = r.FramesDropped
	}
	l.errType = loserErrType(r, l)
	c.d.countUpstreamFailure(l.errType)
	if l.errType == "" {
		// Dropped because another attempt delivered first: it did nothing
		// wrong, so it carries no error.type, as the hedge client's losers.
		l.terminal = true
	}
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(semconv.AttrServiceName, c.d.service)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(metadata.ScopeName)
	l.fillSpan(ss.Spans().AppendEmpty(), r.End)
	c.d.emit(td)
}

// loserErrType is the error.type of a failed attempt, "" for one the race
// dropped; an error status is left to outcome (the provider's type or the
// status code).
func loserErrType(r *guard.Report, l *call) string {
	var nerr net.Error
	switch {
	case r.Err == nil:
		return ""
	case errors.Is(r.Err, hedgecore.ErrTTFTTimeout):
		return guard.ErrTypeTTFTTimeout
	case errors.Is(r.Err, guard.ErrEmptyAnswer):
		return semconv.ErrorTypeEmptyAnswer
	case r.Status >= 400:
		return ""
	case r.Status >= 300:
		return strconv.Itoa(r.Status) // a redirect, no answer to the call
	case l.meta.ErrorType != "":
		return l.meta.ErrorType // an error frame before any content
	case errors.Is(r.Err, io.ErrUnexpectedEOF):
		return errTypeTruncated
	case errors.Is(r.Err, errUpstreamTimeout), errors.As(r.Err, &nerr) && nerr.Timeout():
		return errTypeUpstreamTimeout
	}
	return errTypeUpstreamUnreachable
}

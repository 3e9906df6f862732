// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedge

import (
	"context"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamstall/streamstall/internal/hedgecore"
	"github.com/streamstall/streamstall/internal/semconv"
)

const (
	scopeName     = "github.com/streamstall/streamstall/hedge"
	operationChat = "chat"
)

// callTelemetry emits the spans of one call: a span for the logical call and
// a child span (kind client) per attempt, the latter in the contract of docs/contract.md
// sections 3 and 5 so the stall processor needs no configuration. The call
// span carries no chunk events and no llm.hedge.* attributes: it must not be
// counted as one more streaming call.
type callTelemetry struct {
	span    trace.Span
	groupID string
	on      bool
	// stallTimeout is the watchdog's timeout (nanoseconds), written on the
	// attempts it cut.
	stallTimeout int64
	maxEvents    int
}

func (t *callTelemetry) startCall(ctx context.Context, h *Hedger, buffered bool, start time.Time) context.Context {
	primary := h.sources[0]
	ctx, t.span = h.tracer.Start(ctx, "hedge "+primary.Model(),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(start),
		trace.WithAttributes(
			attribute.String(semconv.AttrOperationName, operationChat),
			attribute.String(semconv.AttrRequestModel, primary.Model()),
			attribute.Bool(semconv.AttrRequestStream, !buffered),
		))
	t.on = t.span.IsRecording()
	t.stallTimeout, t.maxEvents = h.policy.StallTimeout(), h.cfg.maxEvents
	if t.on {
		var id [8]byte
		sc := t.span.SpanContext()
		if sc.HasSpanID() {
			id = sc.SpanID()
		} else {
			v := rand.Uint64()
			for i := range id {
				id[i] = byte(v >> (8 * i))
			}
		}
		t.groupID = hex.EncodeToString(id[:])
	}
	return ctx
}

func (t *callTelemetry) startAttempt(ctx context.Context, h *Hedger, src Source, i int, ra *hedgecore.Attempt) (context.Context, trace.Span) {
	if !t.on {
		return ctx, trace.SpanFromContext(ctx)
	}
	attrs := []attribute.KeyValue{
		attribute.String(semconv.AttrOperationName, operationChat),
		attribute.String(semconv.AttrProviderName, src.Provider()),
		attribute.String(semconv.AttrRequestModel, src.Model()),
		attribute.Bool(semconv.AttrRequestStream, true),
		attribute.String(semconv.AttrHedgeGroupID, t.groupID),
		attribute.Int(semconv.AttrHedgeAttempt, i),
	}
	if ra.Trigger != hedgecore.TriggerPrimary {
		attrs = append(attrs, attribute.String(semconv.AttrHedgeTrigger, ra.Trigger.String()))
	}
	if ra.DelaySource != hedgecore.DelayNone {
		attrs = append(attrs,
			attribute.Float64(semconv.AttrHedgeDelayMs, float64(ra.Delay)/1e6),
			attribute.String(semconv.AttrHedgeDelaySource, ra.DelaySource.String()))
	}
	return h.tracer.Start(ctx, operationChat+" "+src.Model(),
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(time.Unix(0, ra.Start)),
		trace.WithAttributes(attrs...))
}

// chunk counts a content chunk of attempt a, which its span gets as a
// chunk event when it ends: the SDK keeps a span's newest events past its
// limit, so the chunk events, written last and bounded below it, are never
// the ones it drops.
func (t *callTelemetry) chunk(a *liveAttempt, at int64, kind ChunkKind) {
	if !t.on {
		return
	}
	if a.events == nil {
		a.events = hedgecore.NewKeeper(t.maxEvents, hedgecore.DefaultKeepGapsAbove)
	}
	a.events.Add(at, kind.String())
}

// putChunks writes the chunk events kept of attempt a, with the counts of
// those elided (docs/contract.md section 3).
func putChunks(a *liveAttempt) []attribute.KeyValue {
	if a.events == nil {
		return nil
	}
	for _, c := range a.events.Chunks() {
		attrs := []attribute.KeyValue{attribute.String(semconv.AttrChunkKind, c.Kind)}
		if c.Elided > 0 {
			attrs = append(attrs, attribute.Int64(semconv.AttrChunkElided, c.Elided))
		}
		if c.ElidedReasoning > 0 {
			attrs = append(attrs, attribute.Int64(semconv.AttrChunkElidedReasoning, c.ElidedReasoning))
		}
		a.span.AddEvent(semconv.EventChunk, trace.WithTimestamp(time.Unix(0, c.At)), trace.WithAttributes(attrs...))
	}
	if n := a.events.Elided(); n > 0 {
		return []attribute.KeyValue{
			attribute.Int64(semconv.AttrChunkEventsElided, n),
			attribute.Float64(semconv.AttrChunkEventsKeepGapsAboveMs, float64(a.events.KeepGapsAbove())/1e6),
		}
	}
	return nil
}

func (t *callTelemetry) keepalive(span trace.Span, at int64) {
	if t.on {
		span.AddEvent(semconv.EventKeepalive, trace.WithTimestamp(time.Unix(0, at)))
	}
}

func (t *callTelemetry) endAttempt(a *liveAttempt, _ Source, winner bool, err error, now int64) {
	if !t.on {
		return
	}
	outcome := semconv.HedgeOutcomeLoser
	if winner {
		outcome = semconv.HedgeOutcomeWinner
	}
	attrs := append(putChunks(a), attribute.String(semconv.AttrHedgeOutcome, outcome))
	if a.model != "" {
		attrs = append(attrs, attribute.String(semconv.AttrResponseModel, a.model))
	}
	if a.usage != (Usage{}) {
		attrs = append(attrs,
			attribute.Int64(semconv.AttrUsageInputTokens, a.usage.InputTokens),
			attribute.Int64(semconv.AttrUsageOutputTokens, a.usage.OutputTokens))
	}
	if a.finish != "" {
		attrs = append(attrs, attribute.StringSlice(semconv.AttrResponseFinishReasons, []string{a.finish}))
	}
	if err != nil {
		attrs = append(attrs, attribute.String(semconv.AttrErrorType, errorType(err)))
		if isStall(err) && t.stallTimeout > 0 {
			// With error.type, the mark of a stall cut (docs/contract.md
			// section 4): the silence the attempt ended in is its last stall.
			attrs = append(attrs, attribute.Float64(semconv.AttrStallTimeoutMs, float64(t.stallTimeout)/1e6))
		}
		var se *StatusError
		if errors.As(err, &se) {
			attrs = append(attrs, attribute.Int(semconv.AttrHTTPStatusCode, se.StatusCode))
		}
		// error.type, not the message: an error body may quote the prompt.
		a.span.SetStatus(codes.Error, errorType(err))
	}
	a.span.SetAttributes(attrs...)
	a.span.End(trace.WithTimestamp(time.Unix(0, now)))
}

func (t *callTelemetry) endCall(err error, now int64) {
	if !t.on {
		return
	}
	if err != nil {
		t.span.SetAttributes(attribute.String(semconv.AttrErrorType, errorType(err)))
		t.span.SetStatus(codes.Error, errorType(err))
	}
	t.span.End(trace.WithTimestamp(time.Unix(0, now)))
}

// isStall reports whether the watchdog ended the attempt or call.
func isStall(err error) bool {
	var stall *StallError
	return errors.As(err, &stall) || errors.Is(err, hedgecore.ErrStalled)
}

// errorType is the error.type of an attempt or call: a stall cut's is the
// proxy guard's, so that the stall processor reads both alike.
func errorType(err error) string {
	var se *StatusError
	switch {
	case isStall(err):
		return semconv.ErrorTypeStallTimeout
	case errors.As(err, &se):
		return strconv.Itoa(se.StatusCode)
	case errors.Is(err, errEmptyAnswer):
		return semconv.ErrorTypeEmptyAnswer
	case errors.Is(err, context.Canceled), errors.Is(err, errCallClosed):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "transport"
}

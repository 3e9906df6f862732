// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallprocessor // import "github.com/streamstall/streamstall/processor/stallprocessor"

import (
	"context"
	"fmt"
	"sync"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspan"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.uber.org/zap"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/processor/stallprocessor/internal/metadata"
)

type stallProcessor struct {
	logger     *zap.Logger
	telemetry  *metadata.TelemetryBuilder
	conditions *conditions
	chunks     *figures.ChunkReader
	// handoff takes the evidence of sealed spans to a stall_metrics
	// connector of this process.
	handoff *figures.Handoff
	// markers is nil when marker_events has no first_chunk name.
	markers        *figures.MarkerReader
	threshold      int64
	maxStallEvents int
	dropChunks     bool
	inferOutcome   bool
	// scratch holds per-batch buffers: ConsumeTraces may run concurrently,
	// and reusing buffers keeps the per-event cost allocation-free.
	scratch sync.Pool
}

// scratch is the reusable working memory of one batch.
type scratch struct {
	chunks  figures.Chunks
	markers figures.Markers
	stalls  []figures.Stall
	// chunkMask marks which events of the current span are chunks, so that
	// drop_chunk_events removes exactly what was measured.
	chunkMask []bool
	attempts  []hedgeAttempt
	sealer    *figures.Sealer
}

// batchTally counts what one batch did, for the component telemetry.
type batchTally struct {
	enriched, stalls, losers int64
	refused                  figures.Refusals
}

func newStallProcessor(set processor.Settings, cfg *Config) (*stallProcessor, error) {
	conds, err := compileConditions(cfg, set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("creating the stall processor telemetry: %w", err)
	}
	chunks := figures.NewChunkReader(cfg.ChunkEvents.ChunkEventsConfig)
	return &stallProcessor{
		logger:         set.Logger,
		telemetry:      tb,
		conditions:     conds,
		chunks:         chunks,
		handoff:        figures.ProcessHandoff(),
		markers:        figures.NewMarkerReader(cfg.MarkerEvents, chunks),
		threshold:      cfg.StallThreshold.Nanoseconds(),
		maxStallEvents: cfg.MaxStallEvents,
		dropChunks:     cfg.DropChunkEvents,
		inferOutcome:   cfg.InferHedgeOutcome,
		scratch:        sync.Pool{New: func() any { return &scratch{} }},
	}, nil
}

func (p *stallProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	s := p.scratch.Get().(*scratch)
	defer p.scratch.Put(s)
	s.attempts = s.attempts[:0]

	var tally batchTally
	err := p.processBatch(ctx, td, s, &tally)
	if err == nil && p.inferOutcome {
		tally.losers += inferOutcomes(s.attempts)
	}
	p.telemetry.ProcessorStallSpansEnriched.Add(ctx, tally.enriched)
	p.telemetry.ProcessorStallStallsFound.Add(ctx, tally.stalls)
	p.telemetry.ProcessorStallLosersFlagged.Add(ctx, tally.losers)
	p.telemetry.ProcessorStallInconsistentFiguresRemoved.Add(ctx, tally.refused.Inconsistent)
	p.telemetry.ProcessorStallSpansImplausible.Add(ctx, tally.refused.Implausible)
	clear(s.attempts) // release the spans of this batch
	return td, err
}

func (p *stallProcessor) processBatch(ctx context.Context, td ptrace.Traces, s *scratch, tally *batchTally) error {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				if err := p.processSpan(ctx, s, tally, rs, ss, spans.At(k)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// processSpan examines one span: the spans conditions, the stream figures,
// the hedge-loser verdict, and the record for outcome inference.
func (p *stallProcessor) processSpan(ctx context.Context, s *scratch, tally *batchTally, rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span) error {
	var tCtx *ottlspan.TransformContext
	if p.conditions.spans != nil || p.conditions.losers != nil {
		tCtx = ottlspan.NewTransformContext(rs, ss, span)
		defer tCtx.Close()
	}
	if p.conditions.spans != nil {
		examined, err := p.conditions.spans.Eval(ctx, tCtx)
		if err != nil || !examined {
			return err
		}
	}

	first, hasChunk, err := p.enrich(ctx, s, rs, ss, span, tally)
	if err != nil {
		return err
	}

	attrs := span.Attributes()
	outcome, hasOutcome := "", false
	if v, ok := attrs.Get(semconv.AttrHedgeOutcome); ok {
		outcome, hasOutcome = v.Str(), true
	}
	loser := outcome == semconv.HedgeOutcomeLoser
	if !loser && p.conditions.losers != nil {
		if loser, err = p.conditions.losers.Eval(ctx, tCtx); err != nil {
			return err
		}
	}
	if loser {
		attrs.PutBool(semconv.AttrHedgeLoser, true)
		tally.losers++
	}

	if p.inferOutcome {
		if group, ok := attrs.Get(semconv.AttrHedgeGroupID); ok && group.Str() != "" {
			s.attempts = append(s.attempts, newHedgeAttempt(span, group.Str(), len(s.attempts), first, hasChunk, outcome, hasOutcome, loser))
		}
	}
	return nil
}

func (p *stallProcessor) shutdown(context.Context) error {
	p.telemetry.Shutdown()
	return nil
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallprocessor // import "github.com/streamstall/streamstall/processor/stallprocessor"

import (
	"cmp"
	"slices"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

// hedgeAttempt is one attempt span of a hedge group seen in a batch.
type hedgeAttempt struct {
	span       ptrace.Span
	group      string
	order      int   // position in the batch, the last tie-breaker
	number     int64 // llm.hedge.attempt; 0 is the primary
	firstChunk int64
	hasChunk   bool
	outcome    string
	hasOutcome bool
	// flagged is set when loser_conditions already made the span a loser:
	// such an attempt cannot win.
	flagged bool
}

func newHedgeAttempt(span ptrace.Span, group string, order int, firstChunk int64, hasChunk bool, outcome string, hasOutcome, flagged bool) hedgeAttempt {
	a := hedgeAttempt{
		span: span, group: group, order: order,
		firstChunk: firstChunk, hasChunk: hasChunk,
		outcome: outcome, hasOutcome: hasOutcome, flagged: flagged,
	}
	if v, ok := span.Attributes().Get(semconv.AttrHedgeAttempt); ok {
		a.number = v.Int()
	}
	return a
}

// inferOutcomes judges the hedge groups of one batch FIRST_DELIVERED (docs/contract.md
// section 5) and returns how many losers it flagged. Only attempts without an
// outcome are judged. A group needs two attempts in the batch: a lone attempt
// may have siblings in another batch. When the emitter already named a winner,
// every undecided attempt lost; otherwise the undecided attempt with the
// earliest first chunk wins (ties: lower attempt number, then batch order),
// and a group in which no undecided attempt delivered a chunk stays undecided.
func inferOutcomes(attempts []hedgeAttempt) int64 {
	slices.SortFunc(attempts, func(a, b hedgeAttempt) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.order, b.order))
	})
	var losers int64
	for start := 0; start < len(attempts); {
		end := start + 1
		for end < len(attempts) && attempts[end].group == attempts[start].group {
			end++
		}
		losers += judgeGroup(attempts[start:end])
		start = end
	}
	return losers
}

func judgeGroup(group []hedgeAttempt) int64 {
	if len(group) < 2 {
		return 0
	}
	winner := -1
	decided := false
	for i, a := range group {
		if a.hasOutcome {
			decided = decided || a.outcome == semconv.HedgeOutcomeWinner
			continue
		}
		if a.hasChunk && !a.flagged && (winner < 0 || earlier(a, group[winner])) {
			winner = i
		}
	}
	if decided {
		winner = -1
	} else if winner < 0 {
		return 0
	}
	var losers int64
	for i, a := range group {
		if a.hasOutcome {
			continue
		}
		attrs := a.span.Attributes()
		if i == winner {
			attrs.PutStr(semconv.AttrHedgeOutcome, semconv.HedgeOutcomeWinner)
		} else {
			attrs.PutStr(semconv.AttrHedgeOutcome, semconv.HedgeOutcomeLoser)
			if !a.flagged {
				attrs.PutBool(semconv.AttrHedgeLoser, true)
				losers++
			}
		}
		attrs.PutBool(semconv.AttrHedgeOutcomeInferred, true)
	}
	return losers
}

func earlier(a, b hedgeAttempt) bool {
	return cmp.Or(cmp.Compare(a.firstChunk, b.firstChunk), cmp.Compare(a.number, b.number), cmp.Compare(a.order, b.order)) < 0
}

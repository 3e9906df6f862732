// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package attempt

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/figures/figurestest"
	"github.com/streamstall/streamstall/internal/semconv"
)

// The hostile spans of internal/figures/figurestest: an attempt gives the
// table's TTFT and gaps, or is implausible and gives nothing.
func TestHostileSpans(t *testing.T) {
	r := NewReader(figures.DefaultChunkEventsConfig())
	for _, tc := range figurestest.Spans() {
		t.Run(tc.Name, func(t *testing.T) {
			span := ptrace.NewSpan()
			tc.CopyTo(span)
			span.Attributes().PutStr(semconv.AttrProviderName, "openai")
			span.Attributes().PutStr(semconv.AttrRequestModel, "gpt-4o")
			a := r.Read(span)
			require.Equal(t, "openai", a.Provider)
			want := tc.Want
			if want.Skip {
				assert.Equal(t, Implausible, a.Kind)
				assert.Empty(t, a.Gaps)
				assert.ErrorIs(t, r.Problem, figures.ErrImplausible)
				return
			}
			require.NoError(t, r.Problem)
			if want.HasTTFT && want.TTFT > 0 {
				assert.Equal(t, Exact, a.Kind)
				assert.Equal(t, want.TTFT, a.TTFT)
			} else {
				assert.Equal(t, Skip, a.Kind)
			}
			if len(want.Gaps) == 0 {
				assert.Empty(t, a.Gaps)
			} else {
				assert.Equal(t, want.Gaps, a.Gaps)
			}
		})
	}
}

// A loser that ran longer than max_duration is no censored sample.
func TestLongLoserIsImplausible(t *testing.T) {
	r := NewReader(figures.DefaultChunkEventsConfig())
	loser := span()
	loser.SetEndTimestamp(loser.StartTimestamp() + 2*3_600_000_000_000)
	loser.Attributes().PutStr(semconv.AttrHedgeOutcome, semconv.HedgeOutcomeLoser)
	assert.Equal(t, Implausible, r.Read(loser).Kind)
	assert.ErrorIs(t, r.Problem, figures.ErrImplausible)

	// The next read starts clean.
	assert.Equal(t, Exact, r.Read(span(300)).Kind)
	assert.NoError(t, r.Problem)

	cfg := figures.DefaultChunkEventsConfig()
	cfg.MaxDuration *= 3
	assert.Equal(t, Censored, NewReader(cfg).Read(loser).Kind, "a longer max_duration takes it")
}

// An unset span start is no start: the first chunk is no TTFT (it would be
// the age of the epoch).
func TestUnsetStartGivesNoTTFT(t *testing.T) {
	r := NewReader(figures.DefaultChunkEventsConfig())
	s := span(300, 350)
	s.SetStartTimestamp(0)
	s.SetEndTimestamp(0)
	a := r.Read(s)
	assert.Equal(t, Skip, a.Kind)
	assert.Equal(t, []int64{ms(50)}, a.Gaps)
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/figures/figurestest"
	"github.com/streamstall/streamstall/internal/semconv"
)

// The table's assumptions are the defaults.
func TestHostileTableAssumesTheDefaults(t *testing.T) {
	cfg := figures.DefaultChunkEventsConfig()
	assert.Equal(t, figurestest.MaxDuration, cfg.MaxDuration)
	assert.Equal(t, semconv.DefaultChunkEventNames(), cfg.Names)
}

func TestReadHostileSpans(t *testing.T) {
	r := figures.NewChunkReader(figures.DefaultChunkEventsConfig())
	var c figures.Chunks
	for _, tc := range figurestest.Spans() {
		t.Run(tc.Name, func(t *testing.T) {
			span := ptrace.NewSpan()
			tc.CopyTo(span)
			err := r.Read(span, &c)
			if tc.Want.Skip {
				require.Error(t, err)
				assert.ErrorIs(t, err, figures.ErrImplausible)
				return
			}
			require.NoError(t, err)
			f, reasoning := c.Derive(figurestest.Threshold.Nanoseconds(), nil)
			assert.Equal(t, tc.Want.ChunkCount, f.ChunkCount)
			assert.Equal(t, tc.Want.HasTTFT, f.HasTTFT)
			assert.Equal(t, tc.Want.TTFT, f.TTFT)
			if len(tc.Want.Gaps) == 0 {
				assert.Empty(t, c.Gaps(nil))
			} else {
				assert.Equal(t, tc.Want.Gaps, c.Gaps(nil))
			}
			assert.Equal(t, tc.Want.Generation(), f.Generation)
			assert.Equal(t, tc.Want.StallCount, f.StallCount)
			assert.Equal(t, tc.Want.StallTotal, f.StallTotal)
			assert.Equal(t, tc.Want.ReasoningChunks, reasoning.ReasoningChunks)
		})
	}
}

// The reader's state is in Chunks: a span read after an implausible one
// starts clean.
func TestReadResets(t *testing.T) {
	r := figures.NewChunkReader(figures.DefaultChunkEventsConfig())
	var c figures.Chunks
	spans := figurestest.Spans()
	for _, tc := range append(spans, spans...) {
		span := ptrace.NewSpan()
		tc.CopyTo(span)
		assert.Equal(t, tc.Want.Skip, r.Read(span, &c) != nil, tc.Name)
	}
}

func TestReadStallEventsAndCustomNames(t *testing.T) {
	cfg := figures.DefaultChunkEventsConfig()
	cfg.Names = []string{"my.chunk"}
	r := figures.NewChunkReader(cfg)
	span := ptrace.NewSpan()
	span.SetStartTimestamp(figurestest.Start)
	for _, name := range []string{"my.chunk", semconv.EventChunk, semconv.EventStall, "my.chunk"} {
		ev := span.Events().AppendEmpty()
		ev.SetName(name)
		ev.SetTimestamp(figurestest.Start + 5)
	}
	var c figures.Chunks
	require.NoError(t, r.Read(span, &c))
	assert.Len(t, c.Times, 2, "only the configured names")
	assert.True(t, c.StallEvents)
	assert.True(t, r.IsChunk("my.chunk"))
	assert.False(t, r.IsChunk(semconv.EventChunk))
}

// Past nameSetLinearMax names, a map holds them: the same answers.
func TestManyNames(t *testing.T) {
	cfg := figures.DefaultChunkEventsConfig()
	for i := range 20 {
		cfg.Names = append(cfg.Names, strings.Repeat("x", i+1))
	}
	r := figures.NewChunkReader(cfg)
	for _, n := range cfg.Names {
		assert.True(t, r.IsChunk(n), n)
	}
	assert.False(t, r.IsChunk(strings.Repeat("x", 21)))
	assert.False(t, r.IsChunk(""))
}

func TestReadNoAllocs(t *testing.T) {
	r := figures.NewChunkReader(figures.DefaultChunkEventsConfig())
	span := ptrace.NewSpan()
	figurestest.Spans()[1].CopyTo(span) // unsorted
	var c figures.Chunks
	require.NoError(t, r.Read(span, &c))
	stalls := make([]figures.Stall, 0, 4)
	allocs := testing.AllocsPerRun(100, func() {
		_ = r.Read(span, &c)
		f, _ := c.Derive(figurestest.Threshold.Nanoseconds(), stalls)
		stalls = f.Stalls
	})
	assert.Zero(t, allocs)
}

func TestChunkEventsConfigCheck(t *testing.T) {
	assert.Empty(t, func() []error { c := figures.DefaultChunkEventsConfig(); return c.Check() }())
	c := figures.ChunkEventsConfig{Names: []string{"", semconv.EventStall, semconv.EventKeepalive}, MaxDuration: -time.Second}
	err := errors.Join(c.Check()...)
	require.Error(t, err)
	for _, want := range []string{
		"chunk_events::names[0]: must not be empty",
		`chunk_events::names[1]: "llm.stream.stall" is never a content chunk`,
		`chunk_events::names[2]: "llm.stream.keepalive" is never a content chunk`,
		"chunk_events::max_duration: must be positive, got -1s",
	} {
		assert.Contains(t, err.Error(), want)
	}
	empty := figures.ChunkEventsConfig{MaxDuration: time.Second}
	assert.EqualError(t, errors.Join(empty.Check()...), "chunk_events::names: must name at least one chunk event")
}

// Carried figures: consistent ones are judged against max_duration too.
func TestCheckFigures(t *testing.T) {
	r := figures.NewChunkReader(figures.DefaultChunkEventsConfig())
	hour := figures.Millis(time.Hour.Nanoseconds())
	set := func(ttft, gen, ttfa float64) error {
		m := pcommon.NewMap()
		m.PutInt(semconv.AttrChunkCount, 2)
		if ttft >= 0 {
			m.PutDouble(semconv.AttrTTFTMs, ttft)
			m.PutDouble(semconv.AttrTimeToFirstAnswerMs, ttft)
		} else if ttfa >= 0 {
			m.PutDouble(semconv.AttrTimeToFirstAnswerMs, ttfa)
			m.PutDouble(semconv.AttrReasoningMs, ttfa)
			m.PutInt(semconv.AttrReasoningChunkCount, 1)
		}
		for name, v := range map[string]float64{semconv.AttrGenerationMs: gen, semconv.AttrStallThresholdMs: 2000, semconv.AttrStallMs: 0, semconv.AttrMaxStallMs: 0, semconv.AttrActiveGenerationMs: gen} {
			m.PutDouble(name, v)
		}
		m.PutInt(semconv.AttrStallCount, 0)
		rep := figures.ReadAttributes(m)
		return r.CheckFigures(&rep)
	}
	require.NoError(t, set(100, hour-100, -1), "exactly an hour")
	assert.ErrorIs(t, set(100, hour, -1), figures.ErrImplausible)
	assert.ErrorIs(t, set(-1, hour+1, -1), figures.ErrImplausible, "without a TTFT, the generation alone")
	require.NoError(t, set(-1, hour, -1))
	assert.ErrorIs(t, set(-1, hour+1, hour+1), figures.ErrImplausible, "a first answer past max_duration needs a generation past it")

	forged := pcommon.NewMap()
	forged.PutInt(semconv.AttrStallCount, 3)
	rep := figures.ReadAttributes(forged)
	err := r.CheckFigures(&rep)
	require.Error(t, err)
	assert.NotErrorIs(t, err, figures.ErrImplausible, "an inconsistent set is not counted as implausible")
}

func TestOutputTokensAndLoser(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want int64
		ok   bool
	}{
		{int64(40), 40, true},
		{int64(-1), 0, false},
		{101.0, 101, true},
		{40.5, 0, false},
		{-3.0, 0, false},
		{1e300, 0, false},
		{"11", 11, true},
		{"-2", 0, false},
		{"x", 0, false},
		{true, 0, false},
	} {
		m := pcommon.NewMap()
		require.NoError(t, m.PutEmpty(semconv.AttrUsageOutputTokens).FromRaw(tc.v))
		n, ok := figures.OutputTokens(m)
		assert.Equal(t, tc.ok, ok, "%v", tc.v)
		if ok {
			assert.Equal(t, tc.want, n, "%v", tc.v)
		}
	}
	_, ok := figures.OutputTokens(pcommon.NewMap())
	assert.False(t, ok)

	m := pcommon.NewMap()
	assert.False(t, figures.IsHedgeLoser(m))
	m.PutStr(semconv.AttrHedgeOutcome, semconv.HedgeOutcomeWinner)
	assert.False(t, figures.IsHedgeLoser(m))
	m.PutStr(semconv.AttrHedgeLoser, "true")
	assert.False(t, figures.IsHedgeLoser(m), "the flag is a bool")
	m.PutBool(semconv.AttrHedgeLoser, true)
	assert.True(t, figures.IsHedgeLoser(m))
	m = pcommon.NewMap()
	m.PutStr(semconv.AttrHedgeOutcome, semconv.HedgeOutcomeLoser)
	assert.True(t, figures.IsHedgeLoser(m))
}

func TestRefusals(t *testing.T) {
	var r figures.Refusals
	assert.Equal(t, "implausible stream times", r.Count(fmt.Errorf("x: %w", figures.ErrImplausible)))
	assert.Equal(t, "inconsistent stream figures", r.Count(errors.New("llm.stream.stall_ms: must be positive")))
	assert.Equal(t, figures.Refusals{Inconsistent: 1, Implausible: 1}, r)
}

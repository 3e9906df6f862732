// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package attempt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/semconv"
)

const t0 = int64(1_700_000_000) * int64(time.Second)

func ms(n int64) int64 { return n * int64(time.Millisecond) }

func span(chunksAt ...int64) ptrace.Span {
	s := ptrace.NewSpan()
	s.Attributes().PutStr(semconv.AttrProviderName, "openai")
	s.Attributes().PutStr(semconv.AttrRequestModel, "gpt-4o")
	s.SetStartTimestamp(pcommon.Timestamp(t0))
	s.SetEndTimestamp(pcommon.Timestamp(t0 + ms(5000)))
	for _, at := range chunksAt {
		ev := s.Events().AppendEmpty()
		ev.SetName(semconv.EventChunk)
		ev.SetTimestamp(pcommon.Timestamp(t0 + ms(at)))
	}
	return s
}

func TestRead(t *testing.T) {
	r := NewReader(figures.DefaultChunkEventsConfig())

	a := r.Read(span(300, 320, 400))
	assert.Equal(t, Exact, a.Kind)
	assert.Equal(t, "openai", a.Provider)
	assert.Equal(t, "gpt-4o", a.Model)
	assert.Equal(t, ms(300), a.TTFT)
	assert.Equal(t, []int64{ms(20), ms(80)}, a.Gaps)

	unsorted := span(400, 300)
	unsorted.Events().At(0).SetName(semconv.EventChunkLegacy)
	a = r.Read(unsorted)
	assert.Equal(t, ms(300), a.TTFT, "chunk events are sorted; the legacy name counts")

	loser := span()
	loser.SetEndTimestamp(pcommon.Timestamp(t0 + ms(700)))
	loser.Attributes().PutStr(semconv.AttrHedgeOutcome, semconv.HedgeOutcomeLoser)
	a = r.Read(loser)
	assert.Equal(t, Censored, a.Kind, "a loser without content is censored at its run time")
	assert.Equal(t, ms(700), a.TTFT)

	unread := span()
	unread.Attributes().PutStr(semconv.AttrHedgeOutcome, semconv.HedgeOutcomeLoser)
	unread.Attributes().PutStr(semconv.AttrCaptureError, "unsupported_content_encoding")
	assert.Equal(t, Skip, r.Read(unread).Kind, "a loser the proxy could not read is not censored")
	unread = span(300, 320)
	unread.Attributes().PutStr(semconv.AttrCaptureError, "decoded_limit")
	assert.Equal(t, Exact, r.Read(unread).Kind, "the chunks before capture stopped are exact")

	flagged := span()
	flagged.Attributes().PutBool(semconv.AttrHedgeLoser, true)
	assert.Equal(t, Censored, r.Read(flagged).Kind, "flagged by the stall processor")

	noContent := span()
	a = r.Read(noContent)
	assert.Equal(t, Skip, a.Kind, "a span without content that did not lose tells nothing")
	assert.Equal(t, "openai", a.Provider, "but it is an attempt")

	fromFigure := span()
	fromFigure.Attributes().PutDouble(semconv.AttrTTFTMs, 250)
	a = r.Read(fromFigure)
	assert.Equal(t, Exact, a.Kind)
	assert.Equal(t, ms(250), a.TTFT)

	failed := span(300, 350)
	failed.Status().SetCode(ptrace.StatusCodeError)
	a = r.Read(failed)
	assert.Equal(t, Skip, a.Kind, "a failed attempt gives no TTFT")
	assert.Equal(t, []int64{ms(50)}, a.Gaps, "but its gaps count")

	errType := span(300)
	errType.Attributes().PutStr(semconv.AttrErrorType, "stall")
	assert.Equal(t, Skip, r.Read(errType).Kind)

	continuation := span(100, 110)
	continuation.Attributes().PutStr(semconv.AttrHedgeTrigger, semconv.HedgeTriggerStall)
	a = r.Read(continuation)
	assert.Equal(t, Skip, a.Kind, "a stall-triggered attempt may be a continuation")
	assert.Len(t, a.Gaps, 1)

	legacy := span(100)
	legacy.Attributes().Remove(semconv.AttrProviderName)
	legacy.Attributes().PutStr(semconv.AttrSystem, "anthropic")
	assert.Equal(t, "anthropic", r.Read(legacy).Provider, "gen_ai.system is the older name")

	skewed := span()
	ev := skewed.Events().AppendEmpty()
	ev.SetName(semconv.EventChunk)
	ev.SetTimestamp(pcommon.Timestamp(t0 - ms(5)))
	assert.Equal(t, Skip, r.Read(skewed).Kind, "a chunk before the start: clock skew, no TTFT")
}

func TestReadSkipsNonAttempts(t *testing.T) {
	r := NewReader(figures.DefaultChunkEventsConfig())
	call := span(100)
	call.Attributes().Remove(semconv.AttrProviderName) // the hedge call span
	assert.Equal(t, Attempt{}, r.Read(call))

	noModel := span(100)
	noModel.Attributes().Remove(semconv.AttrRequestModel)
	assert.Equal(t, Attempt{}, r.Read(noModel))

	buffered := span(100)
	buffered.Attributes().PutBool(semconv.AttrRequestStream, false)
	assert.Equal(t, Attempt{}, r.Read(buffered))

	wrongType := span(100)
	wrongType.Attributes().PutInt(semconv.AttrProviderName, 3)
	assert.Equal(t, Attempt{}, r.Read(wrongType), "a provider that is not a string is no provider")

	hostile := span()
	hostile.Attributes().PutDouble(semconv.AttrTTFTMs, 1e300)
	assert.Equal(t, Implausible, r.Read(hostile).Kind, "an absurd figure is not a measurement")
	assert.ErrorIs(t, r.Problem, figures.ErrImplausible)
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"math"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/streamstall/streamstall/internal/semconv"
)

// OutputTokens reads gen_ai.usage.output_tokens, the input of active_tps and
// of a loser's wasted tokens; ok is false when it is absent or not a
// TokenCount.
func OutputTokens(attrs pcommon.Map) (int64, bool) {
	v, ok := attrs.Get(semconv.AttrUsageOutputTokens)
	if !ok {
		return 0, false
	}
	return TokenCount(v)
}

// TokenCount reads a token count. Instrumentations write one as an int, a
// double or a decimal string; ok is false when it is negative, or not a
// whole number of tokens that fits an int64.
func TokenCount(v pcommon.Value) (int64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int(), v.Int() >= 0
	case pcommon.ValueTypeDouble:
		d := v.Double()
		if !(d >= 0 && d < math.MaxInt64) || d != math.Trunc(d) {
			return 0, false
		}
		return int64(d), true
	case pcommon.ValueTypeStr:
		n, err := strconv.ParseInt(v.Str(), 10, 64)
		return n, err == nil && n >= 0
	default:
		return 0, false
	}
}

// IsHedgeLoser reports whether a span is a hedge loser (docs/contract.md
// section 5): flagged llm.hedge.loser = true by the stall processor, or
// llm.hedge.outcome = loser as the hedging client wrote it. A loser's
// figures never enter winner aggregates.
func IsHedgeLoser(attrs pcommon.Map) bool {
	if v, ok := attrs.Get(semconv.AttrHedgeLoser); ok && v.Type() == pcommon.ValueTypeBool && v.Bool() {
		return true
	}
	v, ok := attrs.Get(semconv.AttrHedgeOutcome)
	return ok && v.Type() == pcommon.ValueTypeStr && v.Str() == semconv.HedgeOutcomeLoser
}

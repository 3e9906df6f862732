// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/streamstall/streamstall/internal/semconv"
)

// genAIFallback is a gen_ai.* attribute of the contract, the attributes
// that already stand for it (a span with any of them needs nothing), and
// the attributes of other instrumentations it is read from, in order.
type genAIFallback struct {
	name    string
	present []string
	from    []string
	tokens  bool
}

// genAIFallbacks are the fallbacks of docs/contract.md section 3.
// OpenInference's llm.model_name is the model of the request on a stream
// (the response's model is written only on calls that do not stream).
var genAIFallbacks = []genAIFallback{
	{
		name:    semconv.AttrProviderName,
		present: []string{semconv.AttrProviderName, semconv.AttrSystem},
		from:    []string{semconv.AttrVercelModelProvider, semconv.AttrOpenInferenceProvider, semconv.AttrOpenInferenceSystem},
	},
	{
		name:    semconv.AttrRequestModel,
		present: []string{semconv.AttrRequestModel},
		from:    []string{semconv.AttrVercelModelID, semconv.AttrOpenInferenceModelName},
	},
	{
		name:    semconv.AttrResponseModel,
		present: []string{semconv.AttrResponseModel},
		from:    []string{semconv.AttrVercelResponseModel},
	},
	{
		name:    semconv.AttrUsageInputTokens,
		present: []string{semconv.AttrUsageInputTokens},
		from:    []string{semconv.AttrUsagePromptTokensLegacy, semconv.AttrVercelInputTokens, semconv.AttrVercelPromptTokens, semconv.AttrOpenInferencePromptTokens},
		tokens:  true,
	},
	{
		name:    semconv.AttrUsageOutputTokens,
		present: []string{semconv.AttrUsageOutputTokens},
		from:    []string{semconv.AttrUsageCompletionTokensLegacy, semconv.AttrVercelOutputTokens, semconv.AttrVercelCompletionTokens, semconv.AttrOpenInferenceCompletionTokens},
		tokens:  true,
	},
}

// FillGenAI writes each gen_ai.* attribute of the contract's provider, model
// and token counts that attrs lacks, from the first usable attribute of
// another instrumentation that stands for it (docs/contract.md section 3):
// the Vercel AI SDK's ai.*, OpenInference's llm.*, the older GenAI token
// names. A string is usable when it is a non-empty string, a token count
// when TokenCount reads it; it is written as a string or an int. Nothing is
// overwritten but an empty string, so a second call changes nothing. It returns how many
// attributes it wrote.
func FillGenAI(attrs pcommon.Map) int {
	written := 0
	for _, fb := range genAIFallbacks {
		if hasAny(attrs, fb.present, fb.tokens) {
			continue
		}
		for _, name := range fb.from {
			v, ok := attrs.Get(name)
			if !ok {
				continue
			}
			if fb.tokens {
				if n, ok := TokenCount(v); ok {
					attrs.PutInt(fb.name, n)
					written++
					break
				}
			} else if v.Type() == pcommon.ValueTypeStr && v.Str() != "" {
				attrs.PutStr(fb.name, v.Str())
				written++
				break
			}
		}
	}
	return written
}

// hasAny reports whether attrs holds one of names. An empty string counts
// as absent for a string (the reading of the connector's dimensions), not
// for a token count, which is never overwritten.
func hasAny(attrs pcommon.Map, names []string, tokens bool) bool {
	for _, name := range names {
		if v, ok := attrs.Get(name); ok && (tokens || v.Type() != pcommon.ValueTypeStr || v.Str() != "") {
			return true
		}
	}
	return false
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/streamstall/streamstall/internal/semconv"
)

func TestFillGenAI(t *testing.T) {
	tests := []struct {
		name  string
		given map[string]any
		// want are the attributes after FillGenAI: the given ones and the
		// written ones.
		want map[string]any
	}{
		{
			name: "vercel ai sdk 5",
			given: map[string]any{
				semconv.AttrVercelModelID: "gpt-4o-mini", semconv.AttrVercelModelProvider: "openai.chat",
				semconv.AttrVercelResponseModel: "gpt-4o-mini-2024-07-18",
				semconv.AttrVercelInputTokens:   int64(12), semconv.AttrVercelOutputTokens: int64(87),
			},
			want: map[string]any{
				semconv.AttrVercelModelID: "gpt-4o-mini", semconv.AttrVercelModelProvider: "openai.chat",
				semconv.AttrVercelResponseModel: "gpt-4o-mini-2024-07-18",
				semconv.AttrVercelInputTokens:   int64(12), semconv.AttrVercelOutputTokens: int64(87),
				semconv.AttrProviderName: "openai.chat", semconv.AttrRequestModel: "gpt-4o-mini",
				semconv.AttrResponseModel:    "gpt-4o-mini-2024-07-18",
				semconv.AttrUsageInputTokens: int64(12), semconv.AttrUsageOutputTokens: int64(87),
			},
		},
		{
			name: "vercel ai sdk with its gen_ai attributes: nothing to write",
			given: map[string]any{
				semconv.AttrVercelModelID: "gpt-4o-mini", semconv.AttrVercelModelProvider: "openai.chat",
				semconv.AttrSystem: "openai.chat", semconv.AttrRequestModel: "gpt-4o-mini", semconv.AttrResponseModel: "gpt-4o-mini-2024-07-18",
				semconv.AttrUsageInputTokens: int64(12), semconv.AttrUsageOutputTokens: int64(87),
				semconv.AttrVercelCompletionTokens: int64(90),
			},
		},
		{
			name: "openinference",
			given: map[string]any{
				semconv.AttrOpenInferenceModelName: "gpt-4o-mini", semconv.AttrOpenInferenceProvider: "openai", semconv.AttrOpenInferenceSystem: "openai",
				semconv.AttrOpenInferencePromptTokens: int64(12), semconv.AttrOpenInferenceCompletionTokens: "87",
			},
			want: map[string]any{
				semconv.AttrOpenInferenceModelName: "gpt-4o-mini", semconv.AttrOpenInferenceProvider: "openai", semconv.AttrOpenInferenceSystem: "openai",
				semconv.AttrOpenInferencePromptTokens: int64(12), semconv.AttrOpenInferenceCompletionTokens: "87",
				semconv.AttrProviderName: "openai", semconv.AttrRequestModel: "gpt-4o-mini",
				semconv.AttrUsageInputTokens: int64(12), semconv.AttrUsageOutputTokens: int64(87),
			},
		},
		{
			name:  "openinference system without provider",
			given: map[string]any{semconv.AttrOpenInferenceSystem: "anthropic"},
			want:  map[string]any{semconv.AttrOpenInferenceSystem: "anthropic", semconv.AttrProviderName: "anthropic"},
		},
		{
			name:  "older gen_ai token names",
			given: map[string]any{semconv.AttrUsagePromptTokensLegacy: 3.0, semconv.AttrUsageCompletionTokensLegacy: int64(5)},
			want: map[string]any{
				semconv.AttrUsagePromptTokensLegacy: 3.0, semconv.AttrUsageCompletionTokensLegacy: int64(5),
				semconv.AttrUsageInputTokens: int64(3), semconv.AttrUsageOutputTokens: int64(5),
			},
		},
		{
			name: "unusable values are skipped for the next fallback",
			given: map[string]any{
				semconv.AttrVercelModelProvider: "", semconv.AttrOpenInferenceProvider: int64(7), semconv.AttrOpenInferenceSystem: "openai",
				semconv.AttrVercelOutputTokens: -4.0, semconv.AttrVercelCompletionTokens: "many", semconv.AttrOpenInferenceCompletionTokens: 2.5,
			},
			want: map[string]any{
				semconv.AttrVercelModelProvider: "", semconv.AttrOpenInferenceProvider: int64(7), semconv.AttrOpenInferenceSystem: "openai",
				semconv.AttrVercelOutputTokens: -4.0, semconv.AttrVercelCompletionTokens: "many", semconv.AttrOpenInferenceCompletionTokens: 2.5,
				semconv.AttrProviderName: "openai",
			},
		},
		{
			name: "an empty gen_ai string is absent, an unusable token count is kept",
			given: map[string]any{
				semconv.AttrRequestModel: "", semconv.AttrVercelModelID: "gpt-4o",
				semconv.AttrUsageOutputTokens: "", semconv.AttrVercelOutputTokens: int64(9),
			},
			want: map[string]any{
				semconv.AttrRequestModel: "gpt-4o", semconv.AttrVercelModelID: "gpt-4o",
				semconv.AttrUsageOutputTokens: "", semconv.AttrVercelOutputTokens: int64(9),
			},
		},
		{name: "nothing to read", given: map[string]any{"http.method": "POST"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attrs := pcommon.NewMap()
			assert.NoError(t, attrs.FromRaw(tt.given))
			want := tt.want
			if want == nil {
				want = tt.given
			}
			written := FillGenAI(attrs)
			assert.Equal(t, want, attrs.AsRaw())
			assert.Equal(t, len(want)-len(tt.given)+countEmptied(tt.given, want), written)
			assert.Zero(t, FillGenAI(attrs), "a second call writes nothing")
		})
	}
}

// countEmptied counts the empty strings of given that want fills.
func countEmptied(given, want map[string]any) int {
	n := 0
	for k, v := range given {
		if v == "" && want[k] != "" {
			n++
		}
	}
	return n
}

// BenchmarkFillGenAI is the cost FillGenAI adds to every span that gets
// figures, on the attributes of an OpenLLMetry span (nothing to write).
func BenchmarkFillGenAI(b *testing.B) {
	attrs := pcommon.NewMap()
	attrs.PutStr(semconv.AttrOperationName, "chat")
	attrs.PutStr(semconv.AttrProviderName, "openai")
	attrs.PutStr(semconv.AttrRequestModel, "gpt-4o")
	attrs.PutStr(semconv.AttrResponseModel, "gpt-4o-2024-08-06")
	attrs.PutInt(semconv.AttrUsageOutputTokens, 260)
	b.ReportAllocs()
	for b.Loop() {
		FillGenAI(attrs)
	}
}

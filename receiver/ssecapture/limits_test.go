package ssecapture

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
)

// assertBounded checks that a recorded string is a prefix of what was sent,
// cut within limit bytes on a character boundary.
func assertBounded(t *testing.T, sent, got string, limit int, what string) {
	t.Helper()
	assert.LessOrEqual(t, len(got), limit, "%s is bounded", what)
	assert.Greater(t, len(got), limit-utf8.UTFMax, "%s keeps all that fits", what)
	assert.True(t, strings.HasPrefix(sent, got), "%s is a prefix of what was sent", what)
	assert.True(t, utf8.ValidString(got), "%s is cut on a character boundary", what)
}

// TestProxyBoundsRecordedValues: every string the proxy takes from a request
// or a response (model names, ids, finish reasons, error types, hedge
// baggage) is cut to max_attribute_value_length bytes on a UTF-8 boundary,
// and the span name with it.
func TestProxyBoundsRecordedValues(t *testing.T) {
	const limit = 64
	// 3-byte characters after one ASCII byte: the limit falls inside one.
	long := func(prefix string) string { return prefix + strings.Repeat("€", 4<<10) }
	model, respModel, id, reason, errType := long("m"), long("r"), long("i"), long("f"), long("e")

	t.Run("stream", func(t *testing.T) {
		body := fmt.Sprintf("data: {\"id\":%q,\"model\":%q,\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n", id, respModel) +
			fmt.Sprintf("data: {\"choices\":[{\"delta\":{},\"finish_reason\":%q}]}\n\n", reason) +
			fmt.Sprintf("data: {\"error\":{\"type\":%q,\"message\":\"x\"}}\n\n", errType)
		upstream := newTestServer(t, sseUpstream(body))
		f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
			p.Upstream.Endpoint = upstream
			p.MaxAttributeValueLength = limit
		}))
		var baggage []string
		for i := range 40 {
			baggage = append(baggage, fmt.Sprintf("llm.hedge.k%d=v", i))
		}
		resp, _ := post(t, testClient(t), f.proxyURL+shapes[0].path, fmt.Sprintf(`{"model":%q,"stream":true}`, model), http.Header{
			"Baggage": {"llm.hedge.group_id=" + strings.Repeat("g", 1000), strings.Join(baggage[:20], ","), strings.Join(baggage[20:], ",")},
		})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		span := f.spans(t, 1)[0]
		assertBounded(t, model, attr(t, span, semconv.AttrRequestModel).Str(), limit, "gen_ai.request.model")
		assertBounded(t, "chat "+model, span.Name(), len("chat ")+limit, "the span name")
		assertBounded(t, respModel, attr(t, span, semconv.AttrResponseModel).Str(), limit, "gen_ai.response.model")
		assertBounded(t, id, attr(t, span, semconv.AttrResponseID).Str(), limit, "gen_ai.response.id")
		fr := attr(t, span, semconv.AttrResponseFinishReasons).Slice()
		require.Equal(t, 1, fr.Len())
		assertBounded(t, reason, fr.At(0).Str(), limit, "a finish reason")
		assertBounded(t, errType, attr(t, span, semconv.AttrErrorType).Str(), limit, "error.type")
		assert.Equal(t, strings.Repeat("g", limit), attr(t, span, semconv.AttrHedgeGroupID).Str())
		hedge := 0
		span.Attributes().Range(func(k string, _ pcommon.Value) bool {
			if strings.HasPrefix(k, "llm.hedge.") {
				hedge++
			}
			return true
		})
		assert.Equal(t, maxHedgeAttributes, hedge, "hedge baggage entries are bounded")
		assertAllBounded(t, span, limit)
	})

	t.Run("json", func(t *testing.T) {
		body := fmt.Sprintf(`{"id":%q,"model":%q,"choices":[{"message":{"content":"a"},"finish_reason":%q}]}`, id, respModel, reason)
		upstream := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
		}))
		f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
			p.Upstream.Endpoint = upstream
			p.MaxAttributeValueLength = limit
		}))
		resp, got := post(t, testClient(t), f.proxyURL+shapes[0].path, fmt.Sprintf(`{"model":%q}`, model), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, body, string(got), "the client gets the response whole")
		span := f.spans(t, 1)[0]
		assertBounded(t, respModel, attr(t, span, semconv.AttrResponseModel).Str(), limit, "gen_ai.response.model")
		assertBounded(t, id, attr(t, span, semconv.AttrResponseID).Str(), limit, "gen_ai.response.id")
		assertAllBounded(t, span, limit)
	})

	t.Run("error status", func(t *testing.T) {
		upstream := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = fmt.Fprintf(w, `{"error":{"type":%q,"message":"slow down"}}`, errType)
		}))
		f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
			p.Upstream.Endpoint = upstream
			p.MaxAttributeValueLength = limit
		}))
		resp, _ := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, nil)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		span := f.spans(t, 1)[0]
		assertBounded(t, errType, attr(t, span, semconv.AttrErrorType).Str(), limit, "error.type")
		assertAllBounded(t, span, limit)
	})
}

// assertAllBounded: no string of the span (name aside) is longer than limit.
func assertAllBounded(t *testing.T, span ptrace.Span, limit int) {
	t.Helper()
	var walk func(k string, v pcommon.Value) bool
	walk = func(k string, v pcommon.Value) bool {
		assert.LessOrEqual(t, len(k), limit, "key %.40s", k)
		switch v.Type() {
		case pcommon.ValueTypeStr:
			assert.LessOrEqual(t, len(v.Str()), limit, "%s", k)
		case pcommon.ValueTypeSlice:
			for i := range v.Slice().Len() {
				walk(k, v.Slice().At(i))
			}
		}
		return true
	}
	span.Attributes().Range(walk)
	for i := range span.Events().Len() {
		span.Events().At(i).Attributes().Range(walk)
	}
}

// TestProxyBoundsFinishReasons: an upstream repeating a finish reason in
// every frame cannot grow the span's list past maxFinishReasons.
func TestProxyBoundsFinishReasons(t *testing.T) {
	frame := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\n"
	upstream := newTestServer(t, sseUpstream(strings.Repeat(frame, 3*maxFinishReasons)+"data: [DONE]\n\n"))
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Upstream.Endpoint = upstream }))
	resp, _ := post(t, testClient(t), f.proxyURL+shapes[0].path, shapes[0].body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	span := f.spans(t, 1)[0]
	assert.Equal(t, maxFinishReasons, attr(t, span, semconv.AttrResponseFinishReasons).Slice().Len())
	assert.Len(t, chunkTimes(span), 3*maxFinishReasons, "every chunk is still counted")
}

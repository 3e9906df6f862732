// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/harness"
)

func stalledSpan(service string, trace byte, stalls int64, maxStallMs float64) harness.ReceivedSpan {
	sp := ptrace.NewSpan()
	sp.SetName("chat m")
	sp.SetTraceID(pcommon.TraceID([16]byte{15: trace}))
	if stalls >= 0 {
		sp.Attributes().PutInt(semconv.AttrStallCount, stalls)
	}
	if maxStallMs > 0 {
		sp.Attributes().PutDouble(semconv.AttrMaxStallMs, maxStallMs)
	}
	return harness.ReceivedSpan{Span: sp, Service: service}
}

func TestStalledSearches(t *testing.T) {
	spans := []harness.ReceivedSpan{
		stalledSpan("b", 1, 2, 3000),
		stalledSpan("a", 2, 1, 2500),
		stalledSpan("a", 3, 0, 0),  // no stall
		stalledSpan("a", 4, -1, 0), // not a streaming span
		stalledSpan("a", 5, 2, 9000),
		stalledSpan("a", 5, 2, 4000), // a second attempt in the same trace
		stalledSpan("a", 6, 1, 2100),
	}
	got := stalledSearches(spans)
	id := func(b byte) string { return pcommon.TraceID([16]byte{15: b}).String() }
	assert.Equal(t, []stalledSearch{
		{service: "a", stallCount: 1, traces: []string{id(2), id(6)}},
		{service: "a", stallCount: 2, traces: []string{id(5)}},
		{service: "b", stallCount: 2, traces: []string{id(1)}},
	}, got)
	assert.Equal(t, map[string]string{"llm.stream.stall_count": "2"}, got[1].tags())

	sp, ms, ok := longest(spans)
	assert.True(t, ok)
	assert.Equal(t, 9000.0, ms)
	assert.Equal(t, id(5), sp.TraceID().String())
	_, _, ok = longest(spans[2:4])
	assert.False(t, ok)
}

func TestCurlSearch(t *testing.T) {
	assert.Equal(t, `curl -s -G "$JAEGER_URL/api/traces" --data-urlencode service=streamstall-demo \
  --data-urlencode 'tags={"llm.hedge.loser":"true","llm.stream.stall_count":"2"}' --data-urlencode limit=100 | jq -c "$STALLED"`,
		curlSearch("streamstall-demo", map[string]string{"llm.stream.stall_count": "2", "llm.hedge.loser": "true"}, "STALLED"))
	assert.Equal(t, []string{"once", "twice", "3 times"}, []string{times(1), times(2), times(3)})
	assert.Equal(t, []string{"1 trace", "4 traces"}, []string{traces(1), traces(4)})
}

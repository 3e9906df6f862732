// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/harness"
	"github.com/streamstall/streamstall/internal/textout"
)

// stalledSearch is one Jaeger tag search for the stalled calls of a
// service: Jaeger matches tag values as strings and has no range queries,
// so "stalled" is one search per stall count.
type stalledSearch struct {
	service    string
	stallCount int64
	traces     []string // trace IDs (hex) of the spans the search must find
}

// stalledSearches groups the stalled spans (llm.stream.stall_count > 0) by
// service and stall count, in that order.
func stalledSearches(spans []harness.ReceivedSpan) []stalledSearch {
	var out []stalledSearch
	for _, sp := range spans {
		v, ok := sp.Attributes().Get(semconv.AttrStallCount)
		if !ok || v.Int() <= 0 {
			continue
		}
		i := slices.IndexFunc(out, func(s stalledSearch) bool { return s.service == sp.Service && s.stallCount == v.Int() })
		if i < 0 {
			out = append(out, stalledSearch{service: sp.Service, stallCount: v.Int()})
			i = len(out) - 1
		}
		if id := sp.TraceID().String(); !slices.Contains(out[i].traces, id) {
			out[i].traces = append(out[i].traces, id)
		}
	}
	slices.SortFunc(out, func(a, b stalledSearch) int {
		if c := strings.Compare(a.service, b.service); c != 0 {
			return c
		}
		return int(a.stallCount - b.stallCount)
	})
	return out
}

func (s stalledSearch) tags() map[string]string {
	return map[string]string{semconv.AttrStallCount: fmt.Sprint(s.stallCount)}
}

// The jq filters of the printed commands, as shell variables: STALLED
// prints one line per stalled span of the answer (its trace, operation,
// llm.stream.* tags and stall logs), HEDGED one line per trace (each span's
// operation, duration and llm.hedge.* tags).
const jqFilters = `STALLED='.data[].spans[] | {trace: .traceID, op: .operationName,
  tags: [.tags[] | select(.key | startswith("llm.stream.")) | {(.key): .value}] | add,
  stalls: [.logs[] | [.fields[] | {(.key): .value}] | add | select(.event == "llm.stream.stall")]}
  | select(.tags."llm.stream.stall_count" > 0)'
HEDGED='.data[] | [.spans[] | {op: .operationName, ms: (.duration / 1000),
  hedge: [.tags[] | select(.key | startswith("llm.hedge.")) | {(.key): .value}] | add}]'`

// curlSearch is the command line of a tag search of Jaeger's query API (GET
// /api/traces, the call its UI makes) against $JAEGER_URL, piped into jq
// with the filter in the shell variable filterVar.
func curlSearch(service string, tags map[string]string, filterVar string) string {
	b, _ := json.Marshal(tags) // a map[string]string always marshals; keys sorted
	return fmt.Sprintf("curl -s -G \"$JAEGER_URL/api/traces\" --data-urlencode service=%s \\\n"+
		"  --data-urlencode 'tags=%s' --data-urlencode limit=100 | jq -c \"$%s\"", service, b, filterVar)
}

// times says how often: once, twice, 3 times.
func times(n int64) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

// traces is "1 trace" or "n traces".
func traces(n int) string {
	if n == 1 {
		return "1 trace"
	}
	return fmt.Sprintf("%d traces", n)
}

// longest returns the stalled span with the longest single stall.
func longest(spans []harness.ReceivedSpan) (harness.ReceivedSpan, float64, bool) {
	var best harness.ReceivedSpan
	maxMs, found := 0.0, false
	for _, sp := range spans {
		if v, ok := sp.Attributes().Get(semconv.AttrMaxStallMs); ok && v.Double() > maxMs {
			best, maxMs, found = sp, v.Double(), true
		}
	}
	return best, maxMs, found
}

// printJaegerQueries prints the curl commands that find this run's stalled
// calls in Jaeger, after checking against the running Jaeger that each
// finds the traces it should.
func printJaegerQueries(ctx context.Context, w io.Writer, j *harness.Jaeger, spans []harness.ReceivedSpan) error {
	searches := stalledSearches(spans)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	found := make([]int, len(searches))
	for i, s := range searches {
		// Jaeger stores what its OTLP receiver batched: wait until every
		// stalled trace is searchable.
		for {
			traces, err := j.FindTraces(ctx, s.service, s.tags())
			if err != nil {
				return err
			}
			found[i] = 0
			for _, tr := range traces {
				if slices.Contains(s.traces, tr.TraceID) {
					found[i]++
				}
			}
			if found[i] == len(s.traces) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("jaeger found %d of the %d traces with %s=%d: %w", found[i], len(s.traces), semconv.AttrStallCount, s.stallCount, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}

	out := &textout.Printer{W: w}
	out.Printf("\nJaeger (in-memory) has the enriched spans. Its query API finds the stalled calls of this run\n" +
		"(the UI is not served by a Jaeger built with go build; docs/jaeger.md says how to get it):\n\n")
	out.Printf("JAEGER_URL=%s\n%s\n", j.QueryURL, jqFilters)
	for _, s := range searches {
		out.Printf("\n# %s: %s with a call that stalled %s\n%s\n", s.service, traces(len(s.traces)),
			times(s.stallCount), curlSearch(s.service, s.tags(), "STALLED"))
	}
	if sp, ms, ok := longest(spans); ok {
		id := sp.TraceID().String()
		if _, err := j.Trace(ctx, id); err != nil {
			return err
		}
		out.Printf("\n# the longest single stall of the run (%.0f ms, %s): its trace\n"+
			"curl -s \"$JAEGER_URL/api/traces/%s\" | jq -c \"$STALLED\"\n", ms, sp.Name(), id)
	}
	losers := map[string]string{semconv.AttrHedgeLoser: "true"}
	if found, err := j.FindTraces(ctx, proxyService+"-gateway", losers); err != nil {
		return err
	} else if len(found) > 0 {
		out.Printf("\n# the hedging client's %s with a loser, loser and winner side by side\n%s\n",
			traces(len(found)), curlSearch(proxyService+"-gateway", losers, "HEDGED"))
	}
	return out.Err
}

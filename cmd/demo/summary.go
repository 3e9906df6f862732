// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/streamstall/streamstall/internal/exphist"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/harness"
	"github.com/streamstall/streamstall/internal/textout"
)

// collect waits until the collector has delivered the expected spans and a
// metrics flush that includes them, then returns both.
func (s *stack) collect(ctx context.Context, expected int) ([]harness.ReceivedSpan, pmetric.Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for len(s.sink.Spans()) < expected {
		fmt.Fprintf(os.Stderr, "\r  spans received from the collector: %d/%d", len(s.sink.Spans()), expected)
		select {
		case <-ctx.Done():
			return nil, pmetric.Metrics{}, fmt.Errorf("the collector delivered %d of %d spans: %w (logs in %s; sink errors: %v)",
				len(s.sink.Spans()), expected, ctx.Err(), s.dir, s.sink.Errors())
		case <-s.sink.Changed():
		case <-time.After(200 * time.Millisecond):
		}
	}
	fmt.Fprintf(os.Stderr, "\r  spans received from the collector: %d/%d\n", len(s.sink.Spans()), expected)
	// stall_metrics flushes every second: wait for a flush that started after
	// the last span arrived.
	since := pcommon.NewTimestampFromTime(time.Now())
	for {
		if md, ok := latestMetrics(s.sink.Metrics(), since); ok {
			return s.sink.Spans(), md, nil
		}
		select {
		case <-ctx.Done():
			return nil, pmetric.Metrics{}, fmt.Errorf("no metrics flush from stall_metrics: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// latestMetrics returns the newest payload whose points are stamped after since.
func latestMetrics(all []pmetric.Metrics, since pcommon.Timestamp) (pmetric.Metrics, bool) {
	for i := len(all) - 1; i >= 0; i-- {
		md := all[i]
		ok := false
		forEachMetric(md, func(_ pcommon.Map, m pmetric.Metric) {
			if m.Type() == pmetric.MetricTypeSum && m.Sum().DataPoints().Len() > 0 && m.Sum().DataPoints().At(0).Timestamp() > since {
				ok = true
			}
		})
		if ok {
			return md, true
		}
	}
	return pmetric.Metrics{}, false
}

func forEachMetric(md pmetric.Metrics, f func(res pcommon.Map, m pmetric.Metric)) {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				f(rm.Resource().Attributes(), ms.At(k))
			}
		}
	}
}

func printSummary(w io.Writer, spans []harness.ReceivedSpan, md pmetric.Metrics) error {
	out := &textout.Printer{W: w}
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].StartTimestamp() < spans[j].StartTimestamp() })
	out.Printf("\nPer call, as the stall processor enriched each span (ms):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := &textout.Printer{W: tw}
	row.Printf("#\tservice\tspan\tchunks\tTTFT\tTTFA\twall gen\tstall\tstalls\tactive gen\thedge\ttimeline\t\n")
	n := 0
	for _, sp := range spans {
		a := sp.Attributes()
		if _, ok := a.Get(semconv.AttrChunkCount); !ok {
			if _, hedged := a.Get(semconv.AttrHedgeGroupID); !hedged {
				continue // the hedging client's parent span: no chunks of its own
			}
		}
		n++
		gen := msAttr(a, semconv.AttrGenerationMs)
		if v, ok := a.Get(semconv.AttrBurst); ok && v.Bool() {
			gen += " (burst)"
		}
		row.Printf("%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", n, sp.Service, sp.Name(), intAttr(a, semconv.AttrChunkCount),
			msAttr(a, semconv.AttrTTFTMs), msAttr(a, semconv.AttrTimeToFirstAnswerMs), gen, msAttr(a, semconv.AttrStallMs),
			intAttr(a, semconv.AttrStallCount), msAttr(a, semconv.AttrActiveGenerationMs), hedgeOutcome(a), spanTimeline(sp.Span))
	}
	out.Err = errors.Join(out.Err, row.Err, tw.Flush())
	out.Printf("%s\n", timelineLegend)

	out.Printf("\nWinner metrics from stall_metrics (seconds, quantiles read back from the exported exponential buckets):\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row = &textout.Printer{W: tw}
	row.Printf("metric\tservice\tmodel\tcount\tp50\tp95\tp99\tmax\t\n")
	var rows, sums []string
	forEachMetric(md, func(_ pcommon.Map, m pmetric.Metric) {
		switch m.Type() {
		case pmetric.MetricTypeExponentialHistogram:
			dps := m.ExponentialHistogram().DataPoints()
			for i := 0; i < dps.Len(); i++ {
				dp := dps.At(i)
				rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t", m.Name(), str(dp.Attributes(), semconv.AttrServiceName), str(dp.Attributes(), semconv.AttrRequestModel), dp.Count(),
					exphist.Quantile(dp, 0.5), exphist.Quantile(dp, 0.95), exphist.Quantile(dp, 0.99), dp.Max()))
			}
		case pmetric.MetricTypeSum:
			dps := m.Sum().DataPoints()
			for i := 0; i < dps.Len(); i++ {
				dp := dps.At(i)
				sums = append(sums, fmt.Sprintf("  %s{%s} = %d", m.Name(), labels(dp.Attributes()), dp.IntValue()))
			}
		}
	})
	sort.Strings(rows)
	for _, r := range rows {
		row.Printf("%s\n", r)
	}
	out.Err = errors.Join(out.Err, row.Err, tw.Flush())
	sort.Strings(sums)
	out.Printf("\nCounters:\n")
	for _, s := range sums {
		out.Printf("%s\n", s)
	}
	return out.Err
}

func intAttr(a pcommon.Map, k string) string {
	if v, ok := a.Get(k); ok {
		return fmt.Sprint(v.Int())
	}
	return "-"
}

func msAttr(a pcommon.Map, k string) string {
	if v, ok := a.Get(k); ok {
		return fmt.Sprintf("%.0f", math.Round(v.Double()))
	}
	return "-"
}

func hedgeOutcome(a pcommon.Map) string {
	v, ok := a.Get(semconv.AttrHedgeOutcome)
	if !ok {
		return "-"
	}
	attempt, _ := a.Get(semconv.AttrHedgeAttempt)
	out := fmt.Sprintf("%s (attempt %d", v.Str(), attempt.Int())
	if trig, ok := a.Get(semconv.AttrHedgeTrigger); ok {
		out += ", " + trig.Str()
	}
	return out + ")"
}

func str(a pcommon.Map, k string) string {
	if v, ok := a.Get(k); ok {
		return v.AsString()
	}
	return "-"
}

func labels(a pcommon.Map) string {
	var kv []string
	a.Range(func(k string, v pcommon.Value) bool {
		if k != semconv.AttrProviderName && k != semconv.AttrOperationName {
			kv = append(kv, k+"="+v.AsString())
		}
		return true
	})
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

// saveLogs writes each process's output next to its config, for the reader.
func (s *stack) saveLogs() {
	for _, p := range s.procs {
		_ = os.WriteFile(filepath.Join(s.dir, p.Name+".log"), []byte(p.Output()), 0o600)
	}
}

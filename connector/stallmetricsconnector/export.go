// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallmetricsconnector // import "github.com/streamstall/streamstall/connector/stallmetricsconnector"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/streamstall/streamstall/connector/stallmetricsconnector/internal/aggregate"
	"github.com/streamstall/streamstall/connector/stallmetricsconnector/internal/metadata"
	"github.com/streamstall/streamstall/internal/exphist"
	"github.com/streamstall/streamstall/internal/semconv"
)

const (
	unitSeconds = "s"
	unitCall    = "{call}"
	unitAttempt = "{attempt}"
	unitToken   = "{token}"
)

// namedHistogram is one exported histogram metric.
type namedHistogram struct {
	name, description string
	series            *aggregate.Series[*exphist.Histogram]
}

// genAIHistograms are the two GenAI histograms under the names metric_names
// selects: with "both", each series is exported under the two names.
func (c *stallMetrics) genAIHistograms() []namedHistogram {
	const (
		ttftDescription     = "Time from the start of a streaming call to its first content chunk."
		perChunkDescription = "Time between two consecutive content chunks of a streaming call."
	)
	stable := []namedHistogram{
		{semconv.MetricTimeToFirstChunk, ttftDescription, c.metrics.ttft},
		{semconv.MetricTimePerOutputChunk, perChunkDescription, c.metrics.perChunk},
	}
	latest := []namedHistogram{
		{semconv.MetricTimeToFirstChunkLatest, ttftDescription, c.metrics.ttft},
		{semconv.MetricTimePerOutputChunkLatest, perChunkDescription, c.metrics.perChunk},
	}
	switch c.config.MetricNames {
	case MetricNamesLatest:
		return latest
	case MetricNamesBoth:
		return append(stable, latest...)
	default:
		return stable
	}
}

// buildMetrics writes every point holding a value, metrics in a fixed order,
// into one resource (the service is a data point dimension, not a resource)
// and one scope, and marks the points exported. Callers hold mu.
func (c *stallMetrics) buildMetrics(now pcommon.Timestamp) pmetric.Metrics {
	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(metadata.ScopeName)
	sm.Scope().SetVersion(c.version)
	temporality := c.temporality()
	ms := sm.Metrics()

	histograms := append(c.genAIHistograms(),
		namedHistogram{semconv.MetricTimeToFirstAnswer, "Time from the start of a streaming call to its first answer chunk: the first content chunk that is not reasoning.", c.metrics.ttfa},
		namedHistogram{semconv.MetricGenerationDuration, "Wall-clock time from the first to the last content chunk, stalls included.", c.metrics.generation},
		namedHistogram{semconv.MetricActiveGenDuration, "Generation time net of stalls: wall-clock generation time minus stall time.", c.metrics.active},
		namedHistogram{semconv.MetricStallDuration, "Duration of one stall: a run of consecutive gaps longer than the stall threshold.", c.metrics.stall},
		namedHistogram{semconv.MetricHedgeWastedTime, "Duration of a hedge loser's span: time spent on an attempt whose output was thrown away.", c.metrics.wastedTime},
	)
	for _, h := range histograms {
		var eh pmetric.ExponentialHistogram
		added := false
		h.series.All(func(p *aggregate.Point[*exphist.Histogram]) {
			if p.Value.Count() == 0 {
				return // a delta point without a value this interval
			}
			if !added {
				added = true
				m := ms.AppendEmpty()
				m.SetName(h.name)
				m.SetDescription(h.description)
				m.SetUnit(unitSeconds)
				eh = m.SetEmptyExponentialHistogram()
				eh.SetAggregationTemporality(temporality)
			}
			dp := eh.DataPoints().AppendEmpty()
			p.Attributes.CopyTo(dp.Attributes())
			dp.SetStartTimestamp(c.pointStart(p.LastExport))
			dp.SetTimestamp(now)
			p.Value.CopyTo(dp)
			p.LastExport = now
		})
	}

	sums := []struct {
		name, description, unit string
		series                  *aggregate.Series[*int64]
	}{
		{semconv.MetricCalls, "Streaming calls, by whether they stalled.", unitCall, c.metrics.calls},
		{semconv.MetricHedgeAttempts, "Hedged attempts, by trigger and outcome; losers included.", unitAttempt, c.metrics.attempts},
		{semconv.MetricHedgeWastedTokens, "Output tokens of hedge losers, from their usage when reported, else their content chunk count (llm.hedge.wasted.source).", unitToken, c.metrics.wastedTokens},
	}
	for _, s := range sums {
		var sum pmetric.Sum
		added := false
		s.series.All(func(p *aggregate.Point[*int64]) {
			if *p.Value == 0 {
				return // a delta point without a value this interval
			}
			if !added {
				added = true
				m := ms.AppendEmpty()
				m.SetName(s.name)
				m.SetDescription(s.description)
				m.SetUnit(s.unit)
				sum = m.SetEmptySum()
				sum.SetIsMonotonic(true)
				sum.SetAggregationTemporality(temporality)
			}
			dp := sum.DataPoints().AppendEmpty()
			p.Attributes.CopyTo(dp.Attributes())
			dp.SetStartTimestamp(c.pointStart(p.LastExport))
			dp.SetTimestamp(now)
			dp.SetIntValue(*p.Value)
			p.LastExport = now
		})
	}
	return md
}

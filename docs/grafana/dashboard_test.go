// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package grafana_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/streamstall/streamstall/connector/stallmetricsconnector"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/dashboard"
	"github.com/streamstall/streamstall/processor/stallprocessor"
)

const dashboardPath = "streamstall.json"

// TestDashboardUsesConnectorMetrics checks every metric name in the
// dashboard's queries against the Prometheus names of what the connector
// emits for spans that exercise all its metrics, under each metric_names
// mode, and that no connector metric is left off the dashboard.
func TestDashboardUsesConnectorMetrics(t *testing.T) {
	used, err := dashboard.MetricNames(dashboardPath)
	require.NoError(t, err)
	require.NotEmpty(t, used)

	var all []string
	for mode, want := range map[string]int{
		stallmetricsconnector.MetricNamesStable: 10,
		stallmetricsconnector.MetricNamesLatest: 10,
		stallmetricsconnector.MetricNamesBoth:   12,
	} {
		emitted := prometheusNames(t, emitAll(t, mode))
		require.Len(t, emitted, want, "every metric of docs/contract.md section 6, metric_names %s", mode)
		all = append(all, emitted...)
	}
	for _, name := range used {
		assert.Contains(t, all, name, "the dashboard queries %s, which the connector does not emit", name)
	}
	for _, name := range all {
		assert.Contains(t, used, name, "the dashboard does not show %s", name)
	}
}

// TestDashboardWorksWithEveryMetricNames checks that every query finds its
// data whatever metric_names the connector runs with: each metric name in it
// is emitted, or it is a GenAI histogram whose name under the other mode is
// in the same query and emitted (rate(stable) or rate(latest)).
func TestDashboardWorksWithEveryMetricNames(t *testing.T) {
	exprs, err := dashboard.Expressions(dashboardPath)
	require.NoError(t, err)
	alternatives := 0
	for _, mode := range []string{stallmetricsconnector.MetricNamesStable, stallmetricsconnector.MetricNamesLatest, stallmetricsconnector.MetricNamesBoth} {
		emitted := prometheusNames(t, emitAll(t, mode))
		for _, expr := range exprs {
			names, err := dashboard.ExprMetricNames(expr)
			require.NoError(t, err)
			for _, n := range names {
				if slices.Contains(emitted, n) {
					continue
				}
				alt, ok := dashboard.Alternative(n)
				assert.True(t, ok && slices.Contains(names, alt) && slices.Contains(emitted, alt),
					"with metric_names %s, %s is not emitted and the query has no alternative: %s", mode, n, expr)
				alternatives++
			}
		}
	}
	assert.Positive(t, alternatives, "the GenAI histograms are queried under both names")
}

// TestDashboardDataSource checks what lets the dashboard work both imported
// and provisioned from a file: its data source is a template variable of
// type datasource (Grafana fills it in either way) that every panel, every
// target and every query variable uses, and no import-time placeholder
// (${DS_...}, which file provisioning leaves as it is) is left anywhere.
func TestDashboardDataSource(t *testing.T) {
	b, err := os.ReadFile(dashboardPath)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "${DS_", "a ${DS_...} placeholder of an import input: file provisioning does not replace it")
	type dataSource struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
	type panel struct {
		ID         int         `json:"id"`
		Type       string      `json:"type"`
		Datasource *dataSource `json:"datasource"`
		Targets    []struct {
			Expr       string      `json:"expr"`
			RefID      string      `json:"refId"`
			Datasource *dataSource `json:"datasource"`
		} `json:"targets"`
		Panels []panel `json:"panels"`
	}
	var d struct {
		Inputs     []json.RawMessage `json:"__inputs"`
		UID        string            `json:"uid"`
		Title      string            `json:"title"`
		Panels     []panel           `json:"panels"`
		Templating struct {
			List []struct {
				Name       string          `json:"name"`
				Type       string          `json:"type"`
				Query      json.RawMessage `json:"query"`
				Datasource *dataSource     `json:"datasource"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(b, &d))
	assert.Empty(t, d.Inputs, "__inputs: the datasource variable replaces the import input")
	assert.NotEmpty(t, d.UID)
	assert.NotEmpty(t, d.Title)

	want := dataSource{Type: "prometheus", UID: "${datasource}"}
	require.NotEmpty(t, d.Templating.List)
	dsVar := d.Templating.List[0]
	assert.Equal(t, "datasource", dsVar.Name)
	assert.Equal(t, "datasource", dsVar.Type)
	assert.JSONEq(t, `"prometheus"`, string(dsVar.Query), "a datasource variable lists the data sources of this plugin")
	var vars []string
	for _, v := range d.Templating.List[1:] {
		vars = append(vars, v.Name)
		if assert.NotNil(t, v.Datasource, v.Name) {
			assert.Equal(t, want, *v.Datasource, "variable %s", v.Name)
		}
	}
	assert.Equal(t, []string{"service", "model", "provider"}, vars)

	ids := map[int]bool{}
	panels := 0
	var check func([]panel)
	check = func(ps []panel) {
		for _, p := range ps {
			assert.False(t, ids[p.ID], "duplicate panel id %d", p.ID)
			ids[p.ID] = true
			check(p.Panels)
			if p.Type == "row" {
				continue
			}
			panels++
			if assert.NotNil(t, p.Datasource, "panel %d", p.ID) {
				assert.Equal(t, want, *p.Datasource, "panel %d", p.ID)
			}
			require.NotEmpty(t, p.Targets, "panel %d", p.ID)
			for _, target := range p.Targets {
				assert.NotEmpty(t, target.RefID)
				if assert.NotNil(t, target.Datasource, "panel %d, target %s", p.ID, target.RefID) {
					assert.Equal(t, want, *target.Datasource, "panel %d, target %s", p.ID, target.RefID)
				}
				_, err := dashboard.ExprMetricNames(target.Expr)
				assert.NoError(t, err)
			}
		}
	}
	check(d.Panels)
	assert.Positive(t, panels)
}

// emitAll runs streaming spans (a stalled winner of a reasoning model, a
// hedge loser) through the stall processor and the connector, with
// metric_names set to metricNames, and returns the connector's export.
func emitAll(t *testing.T, metricNames string) pmetric.Metrics {
	t.Helper()
	sink := new(consumertest.MetricsSink)
	cf := stallmetricsconnector.NewFactory()
	ccfg := cf.CreateDefaultConfig().(*stallmetricsconnector.Config)
	ccfg.MetricNames = metricNames
	conn, err := cf.CreateTracesToMetrics(context.Background(), connectortest.NewNopSettings(cf.Type()), ccfg, sink)
	require.NoError(t, err)
	pf := stallprocessor.NewFactory()
	proc, err := pf.CreateTraces(context.Background(), processortest.NewNopSettings(pf.Type()), pf.CreateDefaultConfig(), conn)
	require.NoError(t, err)
	host := componenttest.NewNopHost()
	require.NoError(t, conn.Start(context.Background(), host))
	require.NoError(t, proc.Start(context.Background(), host))

	td := ptrace.NewTraces()
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for i, outcome := range []string{semconv.HedgeOutcomeWinner, semconv.HedgeOutcomeLoser} {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr(semconv.AttrServiceName, "chat-api")
		span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		span.SetName("chat gpt-4o")
		span.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		span.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(4500 * time.Millisecond)))
		attrs := span.Attributes()
		attrs.PutStr(semconv.AttrProviderName, "openai")
		attrs.PutStr(semconv.AttrRequestModel, "gpt-4o")
		attrs.PutStr(semconv.AttrOperationName, "chat")
		attrs.PutInt(semconv.AttrHedgeAttempt, int64(i))
		attrs.PutStr(semconv.AttrHedgeOutcome, outcome)
		if i > 0 {
			attrs.PutStr(semconv.AttrHedgeTrigger, semconv.HedgeTriggerStall)
		}
		for c, ms := range []int{300, 350, 4350, 4400} {
			ev := span.Events().AppendEmpty()
			ev.SetName(semconv.EventChunk)
			ev.SetTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Duration(ms) * time.Millisecond)))
			kind := semconv.ChunkKindText
			if c == 0 {
				kind = semconv.ChunkKindReasoning
			}
			ev.Attributes().PutStr(semconv.AttrChunkKind, kind)
		}
	}
	require.NoError(t, proc.ConsumeTraces(context.Background(), td))
	require.NoError(t, proc.Shutdown(context.Background()))
	require.NoError(t, conn.Shutdown(context.Background()))
	require.Len(t, sink.AllMetrics(), 1)
	return sink.AllMetrics()[0]
}

func prometheusNames(t *testing.T, md pmetric.Metrics) []string {
	t.Helper()
	var names []string
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				counter := m.Type() == pmetric.MetricTypeSum && m.Sum().IsMonotonic()
				names = append(names, dashboard.PrometheusName(m.Name(), m.Unit(), counter))
			}
		}
	}
	slices.Sort(names)
	return names
}

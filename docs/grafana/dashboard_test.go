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

// TestDashboardIsImportable checks what Grafana's import needs: the data
// source as an input, every panel and variable bound to it, and the three
// template variables.
func TestDashboardIsImportable(t *testing.T) {
	b, err := os.ReadFile(dashboardPath)
	require.NoError(t, err)
	var d struct {
		Inputs []struct {
			Name, Type, PluginID string
		} `json:"__inputs"`
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Datasource struct {
					UID string `json:"uid"`
				} `json:"datasource"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(b, &d))
	require.Len(t, d.Inputs, 1)
	assert.Equal(t, "DS_PROMETHEUS", d.Inputs[0].Name)
	assert.Equal(t, "prometheus", d.Inputs[0].PluginID)
	assert.NotEmpty(t, d.UID)
	assert.NotEmpty(t, d.Title)
	ids := map[int]bool{}
	for _, p := range d.Panels {
		assert.False(t, ids[p.ID], "duplicate panel id %d", p.ID)
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		require.NotNil(t, p.Datasource, "panel %d", p.ID)
		assert.Equal(t, "${DS_PROMETHEUS}", p.Datasource.UID, "panel %d", p.ID)
		require.NotEmpty(t, p.Targets, "panel %d", p.ID)
		for _, target := range p.Targets {
			assert.NotEmpty(t, target.RefID)
			_, err := dashboard.ExprMetricNames(target.Expr)
			assert.NoError(t, err)
		}
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
		assert.Equal(t, "${DS_PROMETHEUS}", v.Datasource.UID, v.Name)
	}
	assert.Equal(t, []string{"service", "model", "provider"}, vars)
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

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallprocessor

import (
	"context"
	"flag"
	"path/filepath"
	"slices"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/processor/stallprocessor/internal/metadata"
)

var update = flag.Bool("update", false, "rewrite the expected golden files from the processor's output")

func newTestSettings(tb testing.TB) processor.Settings {
	tb.Helper()
	return processortest.NewNopSettings(metadata.Type)
}

// runProcessor sends td through a stall processor built by the factory, as
// a collector would, and returns what reached the next consumer.
func runProcessor(tb testing.TB, cfg *Config, td ptrace.Traces) ptrace.Traces {
	tb.Helper()
	require.NoError(tb, cfg.Validate())
	sink := new(consumertest.TracesSink)
	proc, err := NewFactory().CreateTraces(context.Background(), newTestSettings(tb), cfg, sink)
	require.NoError(tb, err)
	require.NoError(tb, proc.Start(context.Background(), nil))
	defer func() { require.NoError(tb, proc.Shutdown(context.Background())) }()
	require.NoError(tb, proc.ConsumeTraces(context.Background(), td))
	require.Len(tb, sink.AllTraces(), 1)
	return sink.AllTraces()[0]
}

// goldenCases map testdata/<name>/input.yaml to expected.yaml under a config.
var goldenCases = []struct {
	name      string
	configure func(*Config)
}{
	{name: "openllmetry_event_names"},
	{name: "openllmetry_frames"},
	{name: "stall_cut"},
	{name: "spec_example_stalls"},
	{name: "spec_example_stall_run"},
	{name: "unsorted_duplicates"},
	{name: "events_before_start"},
	{name: "single_chunk"},
	{name: "no_chunk_events"},
	{name: "keepalive"},
	{name: "burst"},
	{name: "active_tps"},
	{name: "existing_time_to_first_chunk"},
	{name: "second_tier"},
	{name: "reasoning"},
	{name: "forged_figures"},
	{name: "max_stall_events", configure: func(c *Config) { c.MaxStallEvents = 2 }},
	{name: "drop_chunk_events", configure: func(c *Config) { c.DropChunkEvents = true }},
	{name: "loser_by_outcome"},
	{name: "loser_by_condition", configure: func(c *Config) {
		c.LoserConditions = []string{
			`attributes["llm.hedge.attempt"] > 0 and status.code == STATUS_CODE_ERROR`,
			`attributes["never.set"] == "x"`,
		}
	}},
	{name: "infer_hedge_outcome", configure: func(c *Config) { c.InferHedgeOutcome = true }},
	{name: "spans_condition", configure: func(c *Config) {
		c.Spans = []string{`attributes["gen_ai.operation.name"] == "chat"`}
	}},
	{name: "chunk_event_conditions", configure: func(c *Config) {
		c.ChunkEvents.Conditions = []string{`attributes["llm.stream.chunk.kind"] != "reasoning"`}
	}},
}

func goldenConfig(configure func(*Config)) *Config {
	cfg := createDefaultConfig().(*Config)
	if configure != nil {
		configure(cfg)
	}
	return cfg
}

func TestGolden(t *testing.T) {
	for _, tc := range slices.Concat(goldenCases, markerGoldenCases) {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", tc.name)
			input, err := golden.ReadTraces(filepath.Join(dir, "input.yaml"))
			require.NoError(t, err)
			spanCount := input.SpanCount()

			actual := runProcessor(t, goldenConfig(tc.configure), input)
			assert.Equal(t, spanCount, actual.SpanCount(), "a span was dropped")

			expectedFile := filepath.Join(dir, "expected.yaml")
			if *update {
				written := ptrace.NewTraces()
				actual.CopyTo(written)
				maskSeals(written)
				require.NoError(t, golden.WriteTraces(t, expectedFile, written))
			}
			expected, err := golden.ReadTraces(expectedFile)
			require.NoError(t, err)
			require.NoError(t, ptracetest.CompareTraces(expected, actual, ptracetest.IgnoreSpanAttributeValue(semconv.AttrFiguresSeal)))
		})
	}
}

// Every golden output is a fixed point: a second pass (a second collector
// tier with the same config) changes nothing, down to the attribute and event
// order.
func TestGoldenIdempotent(t *testing.T) {
	for _, tc := range slices.Concat(goldenCases, markerGoldenCases) {
		t.Run(tc.name, func(t *testing.T) {
			once, err := golden.ReadTraces(filepath.Join("testdata", tc.name, "expected.yaml"))
			require.NoError(t, err)
			want := ptrace.NewTraces()
			once.CopyTo(want)

			twice := runProcessor(t, goldenConfig(tc.configure), once)
			// The seals are this process's (the file's are blank): compared
			// where they are, not what they are.
			maskSeals(want)
			maskSeals(twice)
			require.NoError(t, ptracetest.CompareTraces(want, twice))
			assertSameBytes(t, want, twice)
		})
	}
}

// Spans without chunk events must leave byte-for-byte unchanged.
func TestNoChunkEventsUnchanged(t *testing.T) {
	for _, name := range []string{"no_chunk_events", "keepalive"} {
		input, err := golden.ReadTraces(filepath.Join("testdata", name, "input.yaml"))
		require.NoError(t, err)
		want := ptrace.NewTraces()
		input.CopyTo(want)
		got := runProcessor(t, createDefaultConfig().(*Config), input)
		if name == "keepalive" {
			// Only the first span of this file has no chunk event.
			assertSameBytes(t, spanOnly(want, 0), spanOnly(got, 0))
			continue
		}
		assertSameBytes(t, want, got)
	}
}

// maskSeals blanks every span's seal in place: seals are per process.
func maskSeals(td ptrace.Traces) {
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				if v, ok := span.Attributes().Get(semconv.AttrFiguresSeal); ok {
					v.SetEmptyBytes()
				}
			}
		}
	}
}

func assertSameBytes(t *testing.T, want, got ptrace.Traces) {
	t.Helper()
	var m ptrace.ProtoMarshaler
	wantBytes, err := m.MarshalTraces(want)
	require.NoError(t, err)
	gotBytes, err := m.MarshalTraces(got)
	require.NoError(t, err)
	assert.Equal(t, wantBytes, gotBytes, "span bytes differ")
}

// spanOnly returns a copy of td that keeps only the i-th span of its first scope.
func spanOnly(td ptrace.Traces, i int) ptrace.Traces {
	out := ptrace.NewTraces()
	td.CopyTo(out)
	scopes := out.ResourceSpans().At(0).ScopeSpans()
	first := true
	scopes.RemoveIf(func(ptrace.ScopeSpans) bool {
		keep := first
		first = false
		return !keep
	})
	spans := scopes.At(0).Spans()
	n := 0
	spans.RemoveIf(func(ptrace.Span) bool {
		n++
		return n-1 != i
	})
	return out
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/streamstall/streamstall/internal/semconv"
)

func attr(name, value string) Attribute {
	return Attribute{Name: name, Value: pcommon.NewValueStr(value), Present: true}
}

func TestSeriesOverflow(t *testing.T) {
	s := NewSeries(2, func() *int { return new(int) })
	add := func(model string) {
		*s.Point([]Attribute{attr("gen_ai.request.model", model)}).Value++
	}
	for _, model := range []string{"a", "b", "a", "c", "d", "b", "c"} {
		add(model)
	}
	require.Equal(t, 3, s.Len())
	var got []map[string]any
	var values []int
	s.All(func(p *Point[*int]) {
		got = append(got, p.Attributes.AsRaw())
		values = append(values, *p.Value)
	})
	assert.Equal(t, []map[string]any{
		{"gen_ai.request.model": "a"},
		{"gen_ai.request.model": "b"},
		{semconv.AttrMetricOverflow: true},
	}, got)
	assert.Equal(t, []int{2, 2, 3}, values)
	assert.Equal(t, int64(3), s.TakeOverflowed(), "c, d and c again")
	assert.Zero(t, s.TakeOverflowed(), "taken")
	add("a")
	assert.Zero(t, s.TakeOverflowed(), "a has its own point")

	s.Reset()
	assert.Zero(t, s.Len())
	add("z")
	assert.Equal(t, 1, s.Len())
}

func TestAppendKeyIsInjective(t *testing.T) {
	absent := Attribute{Name: "x"}
	cases := [][]Attribute{
		{attr("a", "xy"), attr("b", "")},
		{attr("a", "x"), attr("b", "y")},
		{attr("a", ""), attr("b", "xy")},
		{absent, attr("b", "xy")},
		{attr("a", ""), absent},
		{absent, absent},
		{{Name: "a", Value: pcommon.NewValueInt(1), Present: true}, absent},
		{attr("a", "1"), absent},
		{{Name: "a", Value: pcommon.NewValueBool(true), Present: true}, absent},
		{attr("a", "true"), absent},
	}
	seen := map[string]int{}
	for i, c := range cases {
		k := string(AppendKey(nil, c))
		if j, dup := seen[k]; dup {
			t.Fatalf("cases %d and %d share key %q", j, i, k)
		}
		seen[k] = i
	}
}

func TestFillSkipsAbsent(t *testing.T) {
	m := pcommon.NewMap()
	Fill(m, []Attribute{attr("a", "1"), {Name: "b"}, {Name: "c", Value: pcommon.NewValueInt(3), Present: true}})
	assert.Equal(t, map[string]any{"a": "1", "c": int64(3)}, m.AsRaw())
}

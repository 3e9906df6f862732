// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/advice"
)

// manySeriesAdvice is an advice body of series distinct (provider, model)
// entries, each recommending a delay and a gap, and a second entry for the
// first model (another collector's), as an advisor with many series sends.
func manySeriesAdvice(series int) string {
	var b strings.Builder
	b.WriteString(`{"window_s":600,"advice":[`)
	for i := range series {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"provider":"p","model":"m%d","samples":50,"hedge_delay_ms":%d,"gap_ms":{"p999":%d}}`, i, 100+i%7, 10+i%5)
	}
	b.WriteString(`,{"provider":"P","model":"m0","samples":150,"hedge_delay_ms":500,"gap_ms":{"p999":30}}]}`)
	return b.String()
}

// TestFleetTableOfManySeries: every series of a large advice is in the
// table, the entries of one series (case-folded provider) combined by
// their samples. The table is built in one pass over the entries (see
// BenchmarkFleetRefresh): combining each series over every entry cost
// seconds for the 16,000 series that fill advice.MaxBody, at every
// refresh and in the receiver's start.
func TestFleetTableOfManySeries(t *testing.T) {
	const series = 10_000
	body := manySeriesAdvice(series)
	require.Less(t, len(body), advice.MaxBody)
	f, _, clock := newFleetFixture(t, body)
	now := clock.Now().UnixNano()
	for _, i := range []int{1, 2, 4999, series - 1} {
		e, ok := f.lookup(now, "p", fmt.Sprintf("m%d", i))
		require.True(t, ok, i)
		assert.Equal(t, advice.Weighted{Nanos: int64(100+i%7) * int64(time.Millisecond), Samples: 50}, e.delay, i)
		assert.Equal(t, advice.Weighted{Nanos: int64(10+i%5) * int64(time.Millisecond), Samples: 50}, e.gap, i)
	}
	e, ok := f.lookup(now, "p", "m0")
	require.True(t, ok)
	assert.Equal(t, advice.Weighted{Nanos: 400 * int64(time.Millisecond), Samples: 200}, e.delay, "(50 x 100 + 150 x 500) / 200")
}

// BenchmarkFleetRefresh is one refresh (fetch, decode, table) of advice of
// 1,000 and 10,000 series: the cost per series stays flat when the build is
// linear in the entries.
func BenchmarkFleetRefresh(b *testing.B) {
	for _, series := range []int{1_000, 10_000} {
		b.Run(fmt.Sprint(series), func(b *testing.B) {
			f, stub, _ := newFleetFixture(b, manySeriesAdvice(series))
			_ = stub
			for b.Loop() {
				f.refresh(b.Context())
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*series), "ns/series")
		})
	}
}

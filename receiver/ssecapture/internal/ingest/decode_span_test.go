// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ingest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChunkTimesOutsideTheSpan: a record whose chunk times lie far before
// its start (the year 1970, or an hour before it) or after the end it gives
// gets 400 naming the chunk field: the stall processor would take the span
// for implausible (docs/contract.md section 3, more than 1 s outside a known
// start or end) and nothing would measure it, while the client was told it
// was taken.
func TestChunkTimesOutsideTheSpan(t *testing.T) {
	start := at(-time.Minute)
	for name, body := range map[string]string{
		"chunk in 1970": fmt.Sprintf(`{"name":"a","start_time_unix_nano":%d,"chunk_times_unix_nano":[1,%d]}`, start, start+1e6),
		"chunk an hour before the start": fmt.Sprintf(`{"name":"a","start_time_unix_nano":%d,"chunk_times_unix_nano":[%d,%d]}`,
			start, start-int64(time.Hour), start+1e6),
		"chunk 30 s after the given end": fmt.Sprintf(`{"name":"a","start_time_unix_nano":%d,"end_time_unix_nano":%d,"chunk_times_unix_nano":[%d]}`,
			start, start+int64(time.Second), start+int64(30*time.Second)),
		"offset past the given end": fmt.Sprintf(`{"name":"a","start_time_unix_nano":%d,"end_time_unix_nano":%d,"chunk_offsets_ms":[10,40000]}`,
			start, start+int64(time.Second)),
	} {
		t.Run(name, func(t *testing.T) {
			td, _, err := testDecoder(3, 5).decodeBytes([]byte(body))
			require.NotNil(t, err, "accepted: %d span(s) whose chunk events lie outside [start-1s, end+1s]", td.SpanCount())
			assert.Equal(t, http.StatusBadRequest, err.Status)
		})
	}
}

// TestServiceNameIsAString: service.name moves to the resource, where
// stall_metrics makes a dimension of it; an array (two strings of
// max_attribute_value_length each, allowed for any other attribute) would
// become a string of their JSON, past the bound, and an empty one names no
// service: both get 400.
func TestServiceNameIsAString(t *testing.T) {
	long := strings.Repeat("s", defaultMaxValueLength)
	for _, value := range []string{fmt.Sprintf("[%q,%q]", long, long), `""`, `42`} {
		body := fmt.Sprintf(`{"name":"a","start_time_unix_nano":%d,"attributes":{"service.name":%s}}`, at(-time.Minute), value)
		_, _, err := testDecoder(3, 5).decodeBytes([]byte(body))
		require.NotNil(t, err, value[:min(len(value), 20)])
		assert.Equal(t, http.StatusBadRequest, err.Status)
		assert.Equal(t, "attributes.service.name", err.Field)
	}
}

// TestFractionalNanosRoundedToTheNanosecond: unix nanoseconds written with a
// fraction or an exponent are rounded to the nanosecond they name, where a
// float64 near 1.79e18 holds only multiples of 256 ns.
func TestFractionalNanosRoundedToTheNanosecond(t *testing.T) {
	start := at(-time.Minute)
	for text, want := range map[string]int64{
		fmt.Sprintf("%d.4", start+123):     start + 123,
		fmt.Sprintf("%d.5", start+123):     start + 124,
		fmt.Sprintf("%d.0e0", start+123):   start + 123,
		fmt.Sprintf("%d477e-3", start+123): start + 123,
		fmt.Sprintf("%d0e-1", start+123):   start + 123,
	} {
		body := fmt.Sprintf(`{"name":"a","start_time_unix_nano":%s}`, text)
		td, _, err := testDecoder(3, 5).decodeBytes([]byte(body))
		require.Nil(t, err, text)
		got := int64(td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).StartTimestamp())
		assert.Equal(t, want, got, "%s: off by %d ns", text, got-want)
	}
}

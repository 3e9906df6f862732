// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		header http.Header
		want   time.Duration
		asks   bool
	}{
		{"none", http.Header{}, 0, false},
		{"seconds", http.Header{"Retry-After": {"30"}}, 30 * time.Second, true},
		{"zero", http.Header{"Retry-After": {"0"}}, 0, true},
		{"fraction", http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond, true},
		{"milliseconds first", http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"1"}}, 250 * time.Millisecond, true},
		{"bad milliseconds fall back", http.Header{"Retry-After-Ms": {"soon"}, "Retry-After": {"2"}}, 2 * time.Second, true},
		{"date", http.Header{"Retry-After": {"Wed, 02 Dec 2026 10:00:05 GMT"}}, 5 * time.Second, true},
		{"date past", http.Header{"Retry-After": {"Wed, 02 Dec 2026 09:59:00 GMT"}}, 0, true},
		{"negative", http.Header{"Retry-After": {"-5"}}, 0, false},
		{"exponent", http.Header{"Retry-After": {"1e3"}}, 0, false},
		{"hexadecimal", http.Header{"Retry-After": {"0x10p0"}}, 0, false},
		{"infinity", http.Header{"Retry-After": {"Inf"}}, 0, false},
		{"not a number", http.Header{"Retry-After-Ms": {"NaN"}}, 0, false},
		{"trailing dot", http.Header{"Retry-After": {"3."}}, 0, false},
		{"huge", http.Header{"Retry-After": {"99999999999999999999"}}, MaxRetryAfter, true},
		{"far date", http.Header{"Retry-After": {"Fri, 31 Dec 9999 23:59:59 GMT"}}, MaxRetryAfter, true},
		{"spaces", http.Header{"Retry-After": {" 7 "}}, 7 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, asks := RetryAfter(tc.header, now)
			assert.Equal(t, tc.asks, asks)
			assert.Equal(t, tc.want, got)
		})
	}
}

// FuzzRetryAfter: whatever a source sends, the wait is in [0, MaxRetryAfter]
// and no wait is asked for without one of the headers.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"30", "1.5", "Wed, 02 Dec 2026 10:00:05 GMT", "-1", "1e309", "NaN", ""} {
		f.Add(s, s)
	}
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, ms, s string) {
		h := http.Header{}
		if ms != "" {
			h.Set("Retry-After-Ms", ms)
		}
		if s != "" {
			h.Set("Retry-After", s)
		}
		d, asks := RetryAfter(h, now)
		if d < 0 || d > MaxRetryAfter {
			t.Fatalf("wait %v out of range", d)
		}
		if !asks && d != 0 {
			t.Fatalf("a wait of %v without asking", d)
		}
		if ms == "" && s == "" && asks {
			t.Fatal("asked with no header")
		}
	})
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter bounds what RetryAfter returns. A source's wait only keeps
// it out of the call at hand, so anything longer than a call lasts means
// the same; the bound keeps the arithmetic on unix nanoseconds in range
// whatever a source sends.
const MaxRetryAfter = 24 * time.Hour

// RetryAfter is how long an error answer asks its client to wait before
// calling the same source again, and whether it asks at all: OpenAI's and
// Azure's retry-after-ms (milliseconds, fractional), else Retry-After
// (RFC 9110: seconds, or an HTTP date, read against now). A value that is
// not one of those, negative, or not finite is no request to wait; a date
// already past, or zero, asks for no wait (0, true). The result is at most
// MaxRetryAfter.
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if ms, ok := decimal(h.Get("Retry-After-Ms")); ok {
		return clampWait(ms * float64(time.Millisecond)), true
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, ok := decimal(v); ok {
		return clampWait(s * float64(time.Second)), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return clampWait(float64(t.Sub(now))), true
}

// decimal reads digits with an optional fraction, nothing else: no sign,
// exponent, hexadecimal, infinity or NaN, which strconv.ParseFloat would
// take.
func decimal(v string) (float64, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 32 {
		return 0, false
	}
	dot := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= '0' && c <= '9':
		case c == '.' && !dot && i > 0 && i < len(v)-1:
			dot = true
		default:
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	return f, err == nil
}

func clampWait(ns float64) time.Duration {
	switch {
	case !(ns > 0): // NaN too
		return 0
	case ns >= float64(MaxRetryAfter):
		return MaxRetryAfter
	}
	return time.Duration(ns)
}

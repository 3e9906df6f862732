// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"net/http"
	"net/http/httptrace"
)

// noInformational keeps the upstream's 1xx responses (100 Continue, 103
// Early Hints) from the client. httputil.ReverseProxy relays them from a
// client trace on the upstream request's context, written to the client
// from the Transport's goroutine: under the guard, every attempt would
// relay its own, a dropped attempt's included, and one arriving after the
// race committed would write to the client beside the copy loop. An LLM
// call has no use for them: the proxy has read the request body whole (and
// answered the client's Expect itself), and early hints are for pages.
type noInformational struct{ next http.RoundTripper }

func (n *noInformational) RoundTrip(req *http.Request) (*http.Response, error) {
	return n.next.RoundTrip(req.WithContext(withoutClientTrace{req.Context()}))
}

// withoutClientTrace hides the client trace of its context, and nothing
// else: cancellation and every other value pass through.
type withoutClientTrace struct{ context.Context }

func (c withoutClientTrace) Value(key any) any {
	v := c.Context.Value(key)
	if _, ok := v.(*httptrace.ClientTrace); ok {
		return nil
	}
	return v
}

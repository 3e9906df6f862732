// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// FuzzWithoutAuthParams: whatever the query, no parameter the listener's
// authenticator read (auth.request_params, as url.Values reads them) is
// left in what goes upstream, nor its copy in the headers, and every other
// pair of the query goes on byte for byte, in its order.
func FuzzWithoutAuthParams(f *testing.F) {
	for _, q := range []string{
		"", "key=v", "X-Token=Bearer+abc&keep=1", "keep=a%2Fb&X-Token=t&also=1", "X%2DToken=t", "X-Token",
		"X-Token=a&X-Token=b", "%zz=1&X-Token=t", "a=1;X-Token=t", "&&X-Token=&", "x-token=t",
	} {
		f.Add(q)
	}
	params := []string{"X-Token", "collector_token"}
	f.Fuzz(func(t *testing.T, q string) {
		r := &http.Request{Method: http.MethodPost, URL: &url.URL{Path: "/v1/chat/completions", RawQuery: q}, Header: http.Header{"Authorization": {"Bearer sk"}}}
		query := r.URL.Query()
		for _, name := range params {
			if v, ok := query[name]; ok {
				r.Header[name] = v // as confighttp's authInterceptor copies it
			}
		}
		out := withoutAuthParams(r, params)
		got, _ := url.ParseQuery(out.URL.RawQuery)
		for _, name := range params {
			if _, ok := got[name]; ok {
				t.Fatalf("query %q: %q goes upstream in %q", q, name, out.URL.RawQuery)
			}
			if _, ok := out.Header[name]; ok {
				t.Fatalf("query %q: the header copy of %q goes upstream", q, name)
			}
		}
		if out.Header.Get("Authorization") != "Bearer sk" {
			t.Fatalf("query %q: another header was lost", q)
		}
		var kept []string
		for _, pair := range strings.Split(q, "&") {
			key, _, _ := strings.Cut(pair, "=")
			if k, err := url.QueryUnescape(key); err == nil && slices.Contains(params, k) {
				if _, read := query[k]; read {
					continue
				}
			}
			kept = append(kept, pair)
		}
		if want := strings.Join(kept, "&"); out.URL.RawQuery != want {
			t.Fatalf("query %q: forwarded %q, want the other pairs as sent: %q", q, out.URL.RawQuery, want)
		}
	})
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzStaysUnderPrefix checks the path check against net/url's own
// resolution of dot segments (RFC 3986), a second implementation: a path
// the proxy accepts stays under the prefix however many times (up to the
// check's rounds) it is decoded.
func FuzzStaysUnderPrefix(f *testing.F) {
	for _, s := range []string{
		"/v1/chat/completions", "/../admin", "/v1/%2e%2e/%2e%2e/admin", "/v1/..%2f..%2fadmin",
		"/v1/%252e%252e/x", "/v1/..\\..\\x", "/v1/files/a%20b", "/v1/./a/../b", "//x/../..", "/v1/%zz",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.ParseRequestURI(raw)
		if err != nil || u.Opaque != "" || u.Host != "" {
			return
		}
		if !staysUnderPrefix("/openai", u) {
			return
		}
		base, _ := url.Parse("http://upstream/")
		v := u.EscapedPath()
		for range maxPathDecodings + 1 {
			// A decoded '#', '?' or '%' is a character of the path here, not
			// a delimiter or an escape.
			seg := strings.NewReplacer(`\`, "/", "%", "%25", "#", "%23", "?", "%3F").Replace(v)
			ref, err := url.Parse("/openai/" + strings.TrimPrefix(seg, "/"))
			if err == nil {
				got := base.ResolveReference(ref).Path
				if got != "/openai" && !strings.HasPrefix(got, "/openai/") {
					t.Fatalf("accepted %q, which resolves to %q", raw, got)
				}
			}
			next, err := url.PathUnescape(v)
			if err != nil || next == v {
				return
			}
			v = next
		}
	})
}

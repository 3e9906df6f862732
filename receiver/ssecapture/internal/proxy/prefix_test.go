// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"encoding/hex"
	"net/url"
	"regexp"
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
		"/v1/x%25zz/%252e%252e/%252e%252e/admin", "/v1/%252e%252e/%252e%252e/admin%25",
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
			// Decoded as a lenient upstream does (Python's unquote): each
			// valid escape, whatever invalid ones are beside it.
			next := validEscape.ReplaceAllStringFunc(v, func(e string) string {
				b, _ := hex.DecodeString(e[1:])
				return string(b)
			})
			if next == v {
				return
			}
			v = next
		}
	})
}

var validEscape = regexp.MustCompile(`%[0-9A-Fa-f]{2}`)

// TestAnEscapeThatDoesNotDecodeEndsNoCheck: "%25zz" decodes to "%zz", which
// a strict decoder refuses; the "%252e%252e" beside it still decodes, to
// "..", in an upstream that decodes leniently, and must be read.
func TestAnEscapeThatDoesNotDecodeEndsNoCheck(t *testing.T) {
	for _, raw := range []string{
		"/v1/x%25zz/%252e%252e/%252e%252e/%252e%252e/admin/v1/chat/completions",
		"/v1/%252e%252e/%252e%252e/admin%25",
	} {
		u, err := url.ParseRequestURI(raw)
		if err != nil {
			t.Fatal(err)
		}
		if staysUnderPrefix("/openai", u) {
			t.Errorf("%s was taken as under the prefix", raw)
		}
	}
	u, _ := url.ParseRequestURI("/v1/files/100%25done")
	if !staysUnderPrefix("/openai", u) {
		t.Error("a decoded percent sign that escapes nothing is a path like any other")
	}
}

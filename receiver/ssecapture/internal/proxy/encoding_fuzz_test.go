// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"strings"
	"testing"

	"github.com/streamstall/streamstall/receiver/ssecapture/internal/frames"
)

// FuzzForwardedAcceptEncoding: what the proxy forwards is never empty, is
// the client's header itself, identity, or a selection of the client's own
// elements in which every coding accepted is one the proxy decodes.
func FuzzForwardedAcceptEncoding(f *testing.F) {
	for _, s := range []string{
		"", "gzip", "gzip, deflate, br, zstd", "br;q=1.0, gzip;q=0.8, *;q=0.1", "br, identity;q=0",
		"*;q=0", "identity;q=0, *", "gzip;q=abc", ",,;", "GZIP;Q=0.5",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		got := forwardedAcceptEncoding([]string{header})
		if got == "" {
			t.Fatalf("%q: forwarded nothing", header)
		}
		if got == header || got == "identity" {
			return
		}
		own := map[string]bool{}
		for e := range strings.SplitSeq(header, ",") {
			own[strings.TrimSpace(e)] = true
		}
		for e := range strings.SplitSeq(got, ", ") {
			if !own[e] {
				t.Fatalf("%q: forwarded %q, not the client's", header, e)
			}
			if coding, q := parseAcceptElement(e); q > 0 && coding != "identity" && !frames.Decodable(coding) {
				t.Fatalf("%q: forwarded %q, which the proxy cannot decode", header, e)
			}
		}
	})
}

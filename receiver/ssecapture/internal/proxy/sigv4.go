// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"net/http"
	"strings"

	"github.com/streamstall/streamstall/receiver/ssecapture/internal/guard"
)

// sigV4Headers are what an AWS SigV4 signature puts on a request besides
// its Authorization header.
var sigV4Headers = []string{"X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"}

// dropClientSignature removes a client's AWS SigV4 signature: the client
// signed for the proxy's host, so the upstream (AWS Bedrock) could only
// refuse it. The upstream client's sigv4auth authenticator signs the request
// again, for the upstream's host, with the collector's credentials. A
// Bedrock API key (Authorization: Bearer) is no signature and goes on.
func dropClientSignature(h http.Header) {
	if !strings.HasPrefix(h.Get("Authorization"), "AWS4-") {
		return
	}
	h.Del("Authorization")
	for _, k := range sigV4Headers {
		h.Del(k)
	}
}

// withoutQuerySignature returns r without an AWS SigV4 presigned URL's
// parameters, the query form of the signature dropClientSignature removes
// from the headers: the client signed for the proxy's host, so the
// upstream could only refuse it (or, beside the signature sigv4auth puts
// on the request, refuse the request for carrying two), and no alternate
// is to get it.
func withoutQuerySignature(r *http.Request) *http.Request {
	if !strings.Contains(strings.ToLower(r.URL.RawQuery), "amz") {
		return r // the common case, no pair to read
	}
	q, dropped := guard.DropQueryPairs(r.URL.RawQuery, guard.IsPresignParam)
	if !dropped {
		return r
	}
	out := r.Clone(r.Context())
	out.URL.RawQuery = q
	out.RequestURI = out.URL.RequestURI()
	return out
}

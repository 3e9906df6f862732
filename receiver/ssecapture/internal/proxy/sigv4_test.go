// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestDropClientSignature: a SigV4 signature goes with every header it put
// on; a bearer key, or any other scheme, goes on with the amz headers.
func TestDropClientSignature(t *testing.T) {
	signed := http.Header{
		"Authorization":        {"AWS4-HMAC-SHA256 Credential=AKID/20261201/us-east-1/bedrock/aws4_request, SignedHeaders=host;x-amz-date, Signature=00"},
		"X-Amz-Date":           {"20261201T120000Z"},
		"X-Amz-Security-Token": {"token"},
		"X-Amz-Content-Sha256": {"e3b0"},
		"Content-Type":         {"application/json"},
	}
	dropClientSignature(signed)
	assert.Equal(t, http.Header{"Content-Type": {"application/json"}}, signed)

	bearer := http.Header{"Authorization": {"Bearer ABSK-key"}, "X-Amz-Date": {"20261201T120000Z"}}
	dropClientSignature(bearer)
	assert.Equal(t, http.Header{"Authorization": {"Bearer ABSK-key"}, "X-Amz-Date": {"20261201T120000Z"}}, bearer)
}

// TestQuerySignatureIsDropped: a presigned URL's X-Amz-* parameters (the
// query form of a SigV4 signature, made for the proxy's host) go nowhere;
// every other pair of the query goes on as sent, and a query without them
// is left as it is.
func TestQuerySignatureIsDropped(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/model/m/converse-stream?a=%2F1&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKID%2Fx&x-amz-date=1&X-Amz-Expires=900&X-Amz-SignedHeaders=host&X-Amz-Signature=ab&X%2DAmz%2DSecurity-Token=t&b=2", nil)
	out := withoutQuerySignature(r)
	assert.Equal(t, "a=%2F1&b=2", out.URL.RawQuery)
	assert.Equal(t, "/model/m/converse-stream?a=%2F1&b=2", out.RequestURI)
	plain := httptest.NewRequest(http.MethodPost, "/v1/chat/completions?amz=1&x=2", nil)
	assert.Same(t, plain, withoutQuerySignature(plain))
}

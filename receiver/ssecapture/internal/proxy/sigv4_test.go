// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"net/http"
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

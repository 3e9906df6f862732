// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadBodyLeavesNothingToReplayNorTrailers: the request that goes on
// has its body in memory with a Content-Length, a GetBody that refuses
// once the body is being sent (net/http's Transport replays a request it
// can rewind, a POST too when it carries Idempotency-Key, on every reused
// connection that dies under it; a signer hashes it before) and no trailers
// (headers the authenticator never saw).
func TestReadBodyLeavesNothingToReplayNorTrailers(t *testing.T) {
	raw := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-Collector-Token\r\n" +
		"Idempotency-Key: k\r\n\r\n5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\nX-Collector-Token: secret\r\n\r\n"
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	require.NoError(t, err)
	require.Contains(t, r.Trailer, "X-Collector-Token", "the server announces the trailer")
	body, err := readBody(r, 1<<20)
	require.NoError(t, err)
	assert.JSONEq(t, `{"a":1}`, string(body))
	require.NotNil(t, r.GetBody)
	signed, err := r.GetBody()
	require.NoError(t, err, "a signer reads the payload before the request goes")
	hashed, err := io.ReadAll(signed)
	require.NoError(t, err)
	assert.Equal(t, body, hashed)
	assert.Nil(t, r.Trailer)
	assert.Nil(t, r.TransferEncoding)
	assert.Empty(t, r.Header.Values("Trailer"))
	assert.Empty(t, r.Header.Values("Transfer-Encoding"))
	assert.EqualValues(t, len(body), r.ContentLength)
	got, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	assert.Equal(t, body, got)
	_, err = r.GetBody()
	assert.Error(t, err, "once sent, net/http cannot rewind it to send it again")
}

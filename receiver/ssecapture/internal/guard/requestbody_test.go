// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRequestBodyRefusesAReplay: a signer may read the payload through
// GetBody as often as it likes before the request goes; once the transport
// has begun to read the body, GetBody refuses, so net/http cannot send the
// request again.
func TestRequestBodyRefusesAReplay(t *testing.T) {
	payload := []byte(`{"model":"m","stream":true}`)
	body, getBody := RequestBody(payload)
	for range 2 {
		rc, err := getBody()
		require.NoError(t, err)
		got, err := io.ReadAll(rc)
		require.NoError(t, err)
		assert.Equal(t, payload, got)
	}
	sent, err := io.ReadAll(body)
	require.NoError(t, err)
	assert.Equal(t, payload, sent)
	require.NoError(t, body.Close())
	_, err = getBody()
	assert.ErrorIs(t, err, errBodySent)
}

// TestRequestBodyLetsGoOnceSent: a body read to its end, or released
// unread, holds no reference to its bytes, and its GetBody refuses; one
// net/http closed unread (a reused connection that failed before the
// request was written) still hands out copies.
func TestRequestBodyLetsGoOnceSent(t *testing.T) {
	payload := []byte(`{"model":"m","stream":true}`)
	body, getBody := RequestBody(payload)
	require.NoError(t, body.Close())
	_, err := getBody()
	require.NoError(t, err, "closed unread, it may still go on another connection")
	_, err = io.ReadAll(body)
	require.NoError(t, err)
	assert.Nil(t, body.(*sendingBody).body, "read to its end")
	_, err = getBody()
	require.ErrorIs(t, err, errBodySent)

	body, getBody = RequestBody(payload)
	ReleaseBody(body)
	assert.Nil(t, body.(*sendingBody).body, "released")
	_, err = getBody()
	require.ErrorIs(t, err, errBodySent)
	n, err := body.Read(make([]byte, 8))
	assert.Zero(t, n)
	assert.ErrorIs(t, err, io.EOF)
}

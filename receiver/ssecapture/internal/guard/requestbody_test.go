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

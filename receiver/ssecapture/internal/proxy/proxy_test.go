// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestServerAddressPort(t *testing.T) {
	for _, tt := range []struct {
		upstream string
		addr     string
		port     int64
	}{
		{"https://gateway.example/openai", "gateway.example", 443},
		{"http://gateway.example", "gateway.example", 80},
		{"http://127.0.0.1:8080", "127.0.0.1", 8080},
		{"https://[::1]:8443/v1", "::1", 8443},
	} {
		u, err := url.Parse(tt.upstream)
		assert.NoError(t, err)
		addr, port := serverAddressPort(u)
		assert.Equal(t, tt.addr, addr, tt.upstream)
		assert.Equal(t, tt.port, port, tt.upstream)
	}
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{
			"-addr", "127.0.0.1:0", "-print-addr", "-profile", "stall",
			"-time-factor", "0.001", "-chunks", "5", "-seed", "3",
		}, pw)
	}()
	addr, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	addr = strings.TrimSpace(addr)
	require.True(t, strings.HasPrefix(addr, "127.0.0.1:"), addr)

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := client.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"gpt-4o","stream":true}`))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, 5, strings.Count(string(body), `"delta":{"content"`))
	assert.True(t, strings.HasSuffix(string(body), "data: [DONE]\n\n"))

	logResp, err := client.Get("http://" + addr + "/_fakellm/requests")
	require.NoError(t, err)
	logBody, err := io.ReadAll(logResp.Body)
	require.NoError(t, err)
	require.NoError(t, logResp.Body.Close())
	assert.Contains(t, string(logBody), `"profile":"stall"`)
	assert.Contains(t, string(logBody), `"seed":3`)

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-profile", "warp"},
		{"-time-factor", "-2"},
		{"-chunks", "0"},
		{"-addr", "127.0.0.1:notaport"}, // the later -addr wins
		{"-nosuchflag"},
	} {
		// A free port, so that a wrongly accepted flag set cannot collide; the cancelled context
		// ends such a run at once.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), io.Discard)
		assert.Error(t, err, "%v", args)
	}
}

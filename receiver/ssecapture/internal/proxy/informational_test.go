// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"net/http/httptrace"
	"net/textproto"
	"testing"

	"github.com/stretchr/testify/assert"
)

type testKey struct{}

// TestWithoutClientTraceHidesOnlyTheTrace: the upstream request's context
// keeps every value and its cancellation, and loses the client trace
// through which ReverseProxy relays 1xx responses.
func TestWithoutClientTraceHidesOnlyTheTrace(t *testing.T) {
	trace := &httptrace.ClientTrace{Got1xxResponse: func(int, textproto.MIMEHeader) error { return nil }}
	parent, cancel := context.WithCancel(httptrace.WithClientTrace(context.WithValue(context.Background(), testKey{}, "kept"), trace))
	ctx := withoutClientTrace{parent}
	assert.Nil(t, httptrace.ContextClientTrace(ctx))
	assert.NotNil(t, httptrace.ContextClientTrace(parent))
	assert.Equal(t, "kept", ctx.Value(testKey{}))
	child, stop := context.WithCancel(ctx)
	defer stop()
	cancel()
	<-child.Done()
	assert.ErrorIs(t, child.Err(), context.Canceled)
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClientGoneDuringASilenceIsNoStall: a client that hangs up while its
// committed stream is silent, before the stall timeout, ended the call
// itself: the guard writes no frame, its watchdog does not fire later, and
// the call is not one the guard ended (no stall_timeout on the span).
func TestClientGoneDuringASilenceIsNoStall(t *testing.T) {
	h := newHarness(t, Rule{StallTimeout: time.Second, MaxAttempts: 1})
	s, out, cancel := h.call(t)
	p := h.primary.next(t)
	p.stream(roleFrame, textFrame)
	r := wait(t, out)
	require.NoError(t, r.err)
	cc := &contentClock{p: s.Watch(nil)}
	require.NotNil(t, cc.p)
	assert.Equal(t, roleFrame+textFrame, readN(t, r.resp.Body, len(roleFrame+textFrame)))
	h.blockUntil(t, 1)
	h.clock.Advance(500 * time.Millisecond) // half the timeout of silence

	cancel()
	assert.ErrorIs(t, p.cancelled(t), context.Canceled, "the upstream request ends with the client's")
	rest, err := io.ReadAll(r.resp.Body)
	require.Error(t, err, "the client's end, not the guard's frame")
	assert.Empty(t, rest)
	require.NoError(t, r.resp.Body.Close())
	h.clock.Advance(time.Second) // past the deadline: nothing fires
	s.Finish()
	assert.Empty(t, s.Ended())
}

// TestStallThenClientGoneIsAStall: the watchdog fired, and the client
// hangs up before the copy loop has written the frame: the call is still
// one the guard ended for a stall.
func TestStallThenClientGoneIsAStall(t *testing.T) {
	h := newHarness(t, Rule{StallTimeout: time.Second, MaxAttempts: 1})
	s, out, cancel := h.call(t)
	p := h.primary.next(t)
	p.stream(roleFrame, textFrame)
	r := wait(t, out)
	require.NoError(t, r.err)
	require.NotNil(t, s.Watch(nil))
	assert.Equal(t, roleFrame+textFrame, readN(t, r.resp.Body, len(roleFrame+textFrame)))
	h.blockUntil(t, 1)
	h.clock.Advance(time.Second)
	assert.ErrorIs(t, p.cancelled(t), errStalled)
	cancel()
	_, _ = io.ReadAll(r.resp.Body)
	require.NoError(t, r.resp.Body.Close())
	s.Finish()
	assert.Equal(t, ErrTypeStallTimeout, s.Ended())
	assert.Equal(t, time.Second, s.StallTimeoutUsed())
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortIsNoClientPort checks that a port FreePort gives is one the
// kernel will not take for an outgoing connection, and never given twice.
func TestFreePortIsNoClientPort(t *testing.T) {
	lo, hi, ok := belowEphemeral()
	if !ok {
		t.Skip("this system names no ephemeral port range")
	}
	seen := map[int]bool{}
	for range 200 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < lo || p >= hi {
			t.Fatalf("port %d is not in [%d, %d), below the ephemeral range", p, lo, hi)
		}
		if seen[p] {
			t.Fatalf("port %d was given twice", p)
		}
		seen[p] = true
	}
	// A port taken by a listener is skipped.
	freePorts.Lock()
	taken := freePorts.next
	freePorts.Unlock()
	busy, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(taken)))
	if err != nil {
		t.Skipf("port %d is in use by another program", taken)
	}
	defer func() { _ = busy.Close() }()
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if p == taken {
		t.Fatalf("port %d is held by a listener, and was given", p)
	}
}

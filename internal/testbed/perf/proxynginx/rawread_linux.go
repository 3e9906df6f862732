// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"net"
	"os"
	"syscall"
	"time"
)

// rawReadEnv makes this program the go_rawread relay ("upstream addr").
const rawReadEnv = "PROXYNGINX_RAWREAD"

// serveRawRead is the go_rawread process: go_tcp's relay, each direction
// one goroutine on Go's network poller, whose reads skip the read that
// finds nothing. A net.Conn's Read arms the poller anew on every call (the
// descriptor's ready state is reset before the read), so it must read
// until a read comes back empty before it may park; here each direction is
// one syscall.RawConn.Read for the whole connection, whose function reads,
// writes what it read, and after a short read returns false: the goroutine
// parks on the poller without the empty read, and an edge that came while
// it wrote wakes it at once, since nothing resets the ready state between
// two waits of one RawRead. It is what nginx's edge-triggered loop does,
// kept on Go's poller and scheduler: the floor of a Go proxy that keeps
// one goroutine per stream and drops only the empty read. Its one cost is
// a peer's end that comes with its last bytes (relayRaw): nginx sees it in
// the event's EPOLLRDHUP, a Go program does not see the event.
func serveRawRead(upstream, addr string) error {
	return serveRelay(upstream, addr, func(dst, src net.Conn) { relayRaw(dst.(*net.TCPConn), src.(*net.TCPConn)) })
}

// relayRaw copies src to dst as described at serveRawRead; the writes are
// dst's own (Go's poller: a write that fits the socket buffer is one
// system call).
func relayRaw(dst, src *net.TCPConn) {
	defer func() {
		_ = dst.Close()
		_ = src.Close()
	}()
	rc, err := src.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 32<<10)
	var done bool
	read := func(fd uintptr) bool {
		for {
			n, err := syscall.Read(int(fd), buf)
			switch {
			case errors.Is(err, syscall.EINTR):
				continue
			case errors.Is(err, syscall.EAGAIN):
				return false // nothing there: wait for the next edge
			case err != nil || n == 0:
				done = true // the connection's end or its error
				return true
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				done = true
				return true
			}
			if n < len(buf) {
				return false // a short read: what was there is read
			}
		}
	}
	for !done {
		// A peer's FIN that came with its last bytes shares their edge: the
		// short read takes the bytes, and no edge is left for the end. So
		// each RawRead ends after finEvery, and the next starts with a read,
		// which finds the end: one read a second more, not one a chunk.
		_ = src.SetReadDeadline(time.Now().Add(finEvery))
		if err := rc.Read(read); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return
		}
	}
}

// finEvery bounds how long go_rawread may miss a peer's end (relayRaw).
const finEvery = time.Second

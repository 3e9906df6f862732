// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

// TestRelaysPassEveryByteAndTheEnd: the byte relays, two of which stop
// reading at a short read (go_rawread, go_epoll), lose no byte and no
// edge: writes of every size, bursts larger than their buffer among them,
// arrive whole and in order, and the upstream's close, which may share the
// edge of its last bytes, ends the client's read.
func TestRelaysPassEveryByteAndTheEnd(t *testing.T) {
	for name, serve := range map[string]func(upstream, addr string) error{
		"go_tcp": serveTCP, "go_rawread": serveRawRead, "go_epoll": serveEpoll,
	} {
		t.Run(name, func(t *testing.T) { relaysEveryByte(t, serve) })
	}
}

func relaysEveryByte(t *testing.T, serve func(upstream, addr string) error) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = up.Close() }()
	rng := rand.New(rand.NewPCG(1, 2))
	var sent bytes.Buffer
	var writes [][]byte
	for range 300 {
		n := 1 + rng.IntN(100)
		if rng.IntN(10) == 0 {
			n = 40<<10 + rng.IntN(100<<10) // past the relay's 32 KiB buffer
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		writes = append(writes, b)
		sent.Write(b)
	}
	answer := func(c net.Conn) {
		defer func() { _ = c.Close() }()
		req := make([]byte, 5)
		if _, err := io.ReadFull(c, req); err != nil { // the client's bytes came through too (waitListening's probe sends none)
			return
		}
		for i, b := range writes {
			if _, err := c.Write(b); err != nil {
				return
			}
			if i%7 == 0 {
				time.Sleep(time.Millisecond) // let the relay park between some writes
			}
		}
	}
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			go answer(c)
		}
	}()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = serve("http://"+up.Addr().String(), addr) }()
	if err := waitListening(addr); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("%v after %d of %d bytes", err, len(got), sent.Len())
	}
	if !bytes.Equal(got, sent.Bytes()) {
		t.Fatalf("relayed %d bytes, want the %d sent, in order", len(got), sent.Len())
	}
}

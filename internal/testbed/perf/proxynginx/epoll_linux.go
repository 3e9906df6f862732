// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"errors"
	"net"
	"runtime"
	"sync"
	"syscall"
)

// serveEpoll is the go_epoll process: a byte relay, like go_tcp, whose
// sockets are taken out of Go's network poller and served by one event loop
// of its own on a locked thread, in nginx's shape: an edge-triggered epoll,
// a read until one comes back short (what was there has been read: the next
// byte to arrive raises a new edge), and one write of it. It does not speak
// HTTP. It tells what Go costs without its poller and scheduler between a
// socket and the code that relays it.
func serveEpoll(upstream, addr string) error {
	host, ln, err := listenFor(upstream, addr)
	if err != nil {
		return err
	}
	loop, err := newEpollLoop()
	if err != nil {
		return err
	}
	go loop.run()
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			u, err := net.Dial("tcp", host)
			if err != nil {
				_ = c.Close()
				return
			}
			cfd, err1 := detach(c)
			ufd, err2 := detach(u)
			if err := errors.Join(err1, err2); err != nil {
				closeFds(cfd, ufd)
				return
			}
			if err := loop.add(cfd, ufd); err != nil {
				closeFds(cfd, ufd)
			}
		}()
	}
}

// detach takes a connection's socket out of Go's poller: a duplicate of its
// descriptor, non-blocking as the original is, and the original closed.
func detach(c net.Conn) (int, error) {
	defer func() { _ = c.Close() }()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var dupErr error
	if err := rc.Control(func(s uintptr) { fd, dupErr = syscall.Dup(int(s)) }); err != nil {
		return -1, err
	}
	if dupErr != nil {
		return -1, dupErr
	}
	syscall.CloseOnExec(fd)
	return fd, syscall.SetNonblock(fd, true)
}

func closeFds(fds ...int) {
	for _, fd := range fds {
		if fd >= 0 {
			_ = syscall.Close(fd)
		}
	}
}

type epollLoop struct {
	epfd int
	mu   sync.Mutex
	peer map[int]int
}

func newEpollLoop() (*epollLoop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &epollLoop{epfd: epfd, peer: map[int]int{}}, nil
}

func (l *epollLoop) add(a, b int) error {
	l.mu.Lock()
	l.peer[a], l.peer[b] = b, a
	l.mu.Unlock()
	for _, fd := range [2]int{a, b} {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | epollET, Fd: int32(fd)}
		if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
			l.drop(a)
			return err
		}
	}
	return nil
}

// drop closes a pair.
func (l *epollLoop) drop(fd int) {
	l.mu.Lock()
	p, ok := l.peer[fd]
	delete(l.peer, fd)
	delete(l.peer, p)
	l.mu.Unlock()
	if ok {
		closeFds(fd, p)
	}
}

func (l *epollLoop) run() {
	runtime.LockOSThread()
	events := make([]syscall.EpollEvent, 256)
	buf := make([]byte, 32<<10)
	for {
		n, err := syscall.EpollWait(l.epfd, events, -1)
		if err != nil {
			if err == syscall.EINTR {
				continue
			}
			return
		}
		for _, ev := range events[:n] {
			l.relay(int(ev.Fd), buf, ev.Events&(syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0)
		}
	}
}

// relay reads fd until a read comes back short and writes each read to its
// peer; an end or an error closes both. ending is an event that told of the
// peer's end (EPOLLRDHUP, as nginx's pending_eof): its last bytes and its
// end may share the edge, so a short read does not stop the reads, the read
// that finds the end does.
func (l *epollLoop) relay(fd int, buf []byte, ending bool) {
	l.mu.Lock()
	peer, ok := l.peer[fd]
	l.mu.Unlock()
	if !ok {
		return
	}
	for {
		n, err := syscall.Read(fd, buf)
		if err == syscall.EAGAIN {
			return
		}
		if err != nil || n == 0 {
			l.drop(fd)
			return
		}
		if writeAll(peer, buf[:n]) != nil {
			l.drop(fd)
			return
		}
		if n < len(buf) && !ending {
			return
		}
	}
}

// writeAll writes b to a non-blocking socket, waiting on a full send buffer
// (the clients of the comparison always read, so it is rare).
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		if err == syscall.EAGAIN {
			runtime.Gosched()
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// epollET is EPOLLET, which the syscall package declares as a negative int.
const epollET = 1 << 31

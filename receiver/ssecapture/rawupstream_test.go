// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rawStep is what a raw upstream writes, after a pause.
type rawStep struct {
	after time.Duration
	data  string
}

// rawUpstream is an upstream that answers every request with steps, byte
// for byte as written (net/http's server would refuse to send most of
// them), then holds the connection a moment and closes it. It records the
// head (request line and headers) of every request it read.
type rawUpstream struct {
	URL   string
	mu    sync.Mutex
	heads []string
}

func newRawUpstream(t *testing.T, steps ...rawStep) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	u := &rawUpstream{URL: "http://" + ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer func() { _ = c.Close() }()
				u.serve(c, steps)
			})
		}
	})
	return u
}

func (u *rawUpstream) serve(c net.Conn, steps []rawStep) {
	_ = c.SetDeadline(time.Now().Add(testTimeout))
	br := bufio.NewReader(c)
	var head strings.Builder
	length := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		head.WriteString(line)
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
			length, _ = strconv.Atoi(strings.TrimSpace(v))
		}
		if line == "\r\n" {
			break
		}
	}
	u.mu.Lock()
	u.heads = append(u.heads, head.String())
	u.mu.Unlock()
	if _, err := io.CopyN(io.Discard, br, int64(length)); err != nil {
		return
	}
	for _, s := range steps {
		time.Sleep(s.after)
		if _, err := io.WriteString(c, s.data); err != nil {
			return
		}
	}
	time.Sleep(50 * time.Millisecond)
}

func (u *rawUpstream) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.heads...)
}

// rawExchange writes request to addr as it is and returns every byte the
// server sent until it closed the connection (or the test's timeout).
func rawExchange(t *testing.T, addr, request string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, testTimeout)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	require.NoError(t, conn.SetDeadline(time.Now().Add(testTimeout)))
	_, err = io.WriteString(conn, request)
	require.NoError(t, err)
	got, _ := io.ReadAll(conn)
	return string(got)
}

// rawChat is a chat completions request that closes its connection after
// the answer, with extra header lines (each ending in CRLF).
func rawChat(headers string) string {
	body := shapes[0].body
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n%s\r\n%s",
		shapes[0].path, len(body), headers, body)
}

// readResponses returns the status line of every response in raw, 1xx
// responses included, and the final response's body, unchunked.
func readResponses(raw string) (status []string, body string) {
	br := bufio.NewReader(strings.NewReader(raw))
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return status, body
		}
		status = append(status, resp.Status)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 200 {
			return status, string(b)
		}
	}
}

const (
	chatEvent    = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
	doneEvent    = "data: [DONE]\n\n"
	sseHeadClose = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
)

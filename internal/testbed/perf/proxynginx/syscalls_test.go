// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The tables are strace -c -f's own, of an nginx worker pair and of the Go
// proxy under the same streams.
func TestParseStraceSummaryReadsCallsAndErrors(t *testing.T) {
	for _, tc := range []struct {
		file   string
		name   string
		calls  int
		errors int
		rows   int
	}{
		{file: "testdata/strace-nginx.txt", name: "recvfrom", calls: 44505, rows: 12},
		{file: "testdata/strace-go.txt", name: "read", calls: 91484, errors: 45790},
	} {
		c, err := readStraceSummary(tc.file)
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if c.calls[tc.name] != tc.calls || c.errors[tc.name] != tc.errors {
			t.Errorf("%s: %s calls %d errors %d, want %d and %d", tc.file, tc.name, c.calls[tc.name], c.errors[tc.name], tc.calls, tc.errors)
		}
		if _, ok := c.calls["total"]; ok {
			t.Errorf("%s: the total row was read as a system call", tc.file)
		}
		if tc.rows > 0 && len(c.calls) != tc.rows {
			t.Errorf("%s: %d system calls, want %d", tc.file, len(c.calls), tc.rows)
		}
	}
}

func TestParseStraceSummaryRefusesAnEmptyTable(t *testing.T) {
	if _, err := parseStraceSummary(strings.NewReader("strace: Process 1 attached\n")); err == nil {
		t.Fatal("no table, no error")
	}
}

func TestReportSyscallsPerChunk(t *testing.T) {
	b, err := os.ReadFile("testdata/strace-nginx.txt")
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseStraceSummary(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c.path, c.chunks = "nginx", 43918
	var out bytes.Buffer
	reportSyscalls(&out, []syscallCount{c})
	// 119,061 calls in all over 43,918 chunks, the most frequent first.
	if want := "nginx               2.71: recvfrom 1.01 writev 1.00 epoll_wait 0.59 epoll_ctl 0.02"; !strings.Contains(out.String(), want) {
		t.Errorf("report:\n%s\nwant a line with %q", out.String(), want)
	}
}

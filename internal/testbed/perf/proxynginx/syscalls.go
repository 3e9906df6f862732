// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// syscallCount is one path's system calls in the -syscalls round, by name.
type syscallCount struct {
	path   string
	chunks int
	calls  map[string]int // successful and failed calls
	errors map[string]int // the failed ones (a read that finds nothing: EAGAIN)
}

// countSyscalls runs one more round with strace -c attached to every proxy
// process (nginx's workers, every thread of the Go proxies) and returns the
// system calls each made per content chunk. strace slows each call, so the
// round's CPU and latency figures are not used; the counts are what the
// process asked of the kernel for the same streams, which strace does not
// change.
func countSyscalls(ctx context.Context, dir, upstream string, paths []*path, scripts []http.Header) ([]syscallCount, error) {
	bin, err := exec.LookPath("strace")
	if err != nil {
		return nil, errors.New("-syscalls needs strace (Debian's strace package)")
	}
	var out []syscallCount
	for _, p := range paths {
		if p.proc == nil {
			continue
		}
		pids := []int{p.proc.Pid}
		if kids := childPids(p.proc.Pid); len(kids) > 0 {
			pids = kids // nginx: the master only accepts nothing; its workers proxy
		}
		file := filepath.Join(dir, p.name+".strace")
		args := []string{"-c", "-f", "-q", "-o", file}
		for _, pid := range pids {
			args = append(args, "-p", strconv.Itoa(pid))
		}
		cmd := exec.CommandContext(ctx, bin, args...)
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		time.Sleep(500 * time.Millisecond) // strace attaches to every thread
		lat, errs, runErr := runStreams(ctx, upstream, p.url, scripts)
		_ = cmd.Process.Signal(syscall.SIGINT) // strace -c writes its table as it detaches
		_ = cmd.Wait()
		if runErr != nil {
			// The counts are per chunk that arrived: a lost stream leaves
			// them sound, unless none arrived.
			if len(lat) == 0 {
				return nil, fmt.Errorf("%s under strace: %w", p.name, runErr)
			}
			log.Printf("%s under strace: %d failed streams, first: %v", p.name, errs, runErr)
		}
		c, err := readStraceSummary(file)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		c.path, c.chunks = p.name, len(lat)
		out = append(out, c)
	}
	return out, nil
}

// childPids lists the live processes whose parent is pid.
func childPids(pid int) []int {
	var kids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		k, err := strconv.Atoi(e.Name())
		if err != nil || k == pid {
			continue
		}
		if _, ppid := statCPU(k); ppid == pid {
			kids = append(kids, k)
		}
	}
	return kids
}

// readStraceSummary reads strace -c's table: "% time seconds usecs/call
// calls [errors] syscall" rows between two dashed lines, then a total row.
func readStraceSummary(file string) (syscallCount, error) {
	f, err := os.Open(file)
	if err != nil {
		return syscallCount{}, err
	}
	defer func() { _ = f.Close() }()
	return parseStraceSummary(f)
}

func parseStraceSummary(r io.Reader) (syscallCount, error) {
	c := syscallCount{calls: map[string]int{}, errors: map[string]int{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || strings.HasPrefix(fields[0], "-") || fields[len(fields)-1] == "total" {
			continue
		}
		calls, err := strconv.Atoi(fields[3])
		if err != nil {
			continue // the header row
		}
		name := fields[len(fields)-1]
		c.calls[name] = calls
		if len(fields) == 6 {
			if n, err := strconv.Atoi(fields[4]); err == nil {
				c.errors[name] = n
			}
		}
	}
	if err := sc.Err(); err != nil {
		return c, err
	}
	if len(c.calls) == 0 {
		return c, errors.New("strace wrote no system call table")
	}
	return c, nil
}

// reportSyscalls prints each path's system calls per content chunk, the
// most frequent first.
func reportSyscalls(w io.Writer, counts []syscallCount) {
	_, _ = fmt.Fprintln(w, "system calls per content chunk (one round under strace -c -f):")
	for _, c := range counts {
		total := 0
		names := make([]string, 0, len(c.calls))
		for name, n := range c.calls {
			total += n
			names = append(names, name)
		}
		slices.SortFunc(names, func(a, b string) int {
			if d := c.calls[b] - c.calls[a]; d != 0 {
				return d
			}
			return strings.Compare(a, b)
		})
		per := func(n int) float64 { return float64(n) / float64(max(1, c.chunks)) }
		_, _ = fmt.Fprintf(w, "  %-18s %5.2f:", c.path, per(total))
		for _, name := range names {
			if per(c.calls[name]) < 0.02 {
				break
			}
			_, _ = fmt.Fprintf(w, " %s %.2f", name, per(c.calls[name]))
			if e := c.errors[name]; e > 0 {
				_, _ = fmt.Fprintf(w, " (%.2f failed)", per(e))
			}
		}
		_, _ = fmt.Fprintln(w)
	}
}

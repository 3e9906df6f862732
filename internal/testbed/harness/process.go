// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package harness runs streamstall's moving parts as real processes on
// loopback (the ocb-built collector, Jaeger, Prometheus, fakellm) and
// receives what the collector exports. The end-to-end tests and the demo
// share it, so both exercise the stack exactly as a user runs it.
package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// FreePort returns a loopback TCP port that was free at the time of the
// call, and that no earlier call in this process returned.
//
// Where the system names its ephemeral range (Linux), the port comes from
// below it: a port the kernel hands out for ":0" is also the one it hands
// out as the local end of an outgoing connection, so between the check
// here and the program's own bind, any of the test's many client
// connections could take it ("address already in use"). A port below the
// range is taken only by a program that binds it by number.
func FreePort() (int, error) {
	if lo, hi, ok := belowEphemeral(); ok {
		freePorts.Lock()
		defer freePorts.Unlock()
		if freePorts.next == 0 {
			freePorts.next = lo + rand.IntN(hi-lo) //nolint:gosec // spreads concurrent test processes, not a secret
			freePorts.given = map[int]bool{}
		}
		for range hi - lo {
			p := freePorts.next
			if freePorts.next++; freePorts.next >= hi {
				freePorts.next = lo
			}
			if freePorts.given[p] {
				continue
			}
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				continue
			}
			_ = l.Close()
			freePorts.given[p] = true
			return p, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var freePorts struct {
	sync.Mutex
	next  int
	given map[int]bool
}

// belowEphemeral gives the ports from 10000 up to the start of the
// kernel's ephemeral range, when the range is known and leaves at least
// a thousand of them.
func belowEphemeral() (lo, hi int, ok bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, false
	}
	start, err := strconv.Atoi(f[0])
	if err != nil || start < 11000 {
		return 0, 0, false
	}
	return 10000, start, true
}

// Fill replaces ${KEY} in tmpl by the value that follows KEY in kv.
func Fill(tmpl string, kv ...any) string {
	r := make([]string, 0, len(kv))
	for i := 0; i+1 < len(kv); i += 2 {
		r = append(r, "${"+fmt.Sprint(kv[i])+"}", fmt.Sprint(kv[i+1]))
	}
	return strings.NewReplacer(r...).Replace(tmpl)
}

// WriteFile writes content to name in dir and returns the path.
func WriteFile(dir, name, content string) (string, error) {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	return p, nil
}

// LockedBuffer collects output written by one goroutine while another
// reads it: a process's, or a logger's.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Process is a program started in its own process group, so that Stop ends
// it and anything it started.
type Process struct {
	Name string
	cmd  *exec.Cmd
	out  *LockedBuffer
	done chan struct{}
}

// Start runs path with args. Its output is kept for Output; the process dies
// with its parent (Pdeathsig) even if Stop is never reached.
func Start(name, path string, args ...string) (*Process, error) {
	p := &Process{Name: name, out: &LockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// PeakRSS is the process's resident-set high-water mark (VmHWM in
// /proc/PID/status), in bytes: what the kernel saw it use at its peak.
func (p *Process) PeakRSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p.Name, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				return 0, fmt.Errorf("%s: VmHWM %q: %w", p.Name, rest, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("%s: no VmHWM in /proc/%d/status", p.Name, p.Pid())
}

// Output is everything the process wrote so far.
func (p *Process) Output() string { return p.out.String() }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Kill sends SIGKILL to the process group at once and waits for it to end:
// a crash, with no chance to drain or flush.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// ErrExited is returned by WaitHTTP when the process died while waited for.
var ErrExited = errors.New("process exited")

// WaitHTTP polls url until it answers want, the process exits or ctx ends.
func (p *Process) WaitHTTP(ctx context.Context, url string, want int) error {
	var last error
	for {
		if p.Exited() {
			return fmt.Errorf("%s: %w before %s answered:\n%s", p.Name, ErrExited, url, p.Output())
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == want {
				return nil
			}
			last = fmt.Errorf("status %d", resp.StatusCode)
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer %s with %d: %w (last: %w)", p.Name, url, want, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

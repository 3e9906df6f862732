// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bytes"
	"io"

	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/sse"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/frames"
)

// streamTee passes a streamed body (SSE, NDJSON or a JSON array, in any
// content coding the proxy decodes) through untouched and classifies its
// frames (frames.Classifier, the guard's way too) later, in batches: a
// read's bytes are copied aside with the time they arrived, and parsed once
// some reads have gathered (or the body closes), when ReverseProxy comes
// back for more after writing and flushing what it has. Parsing thus adds
// no latency to the bytes it parses, and runs over many frames at once:
// between two chunks the kernel and the other streams push the parser's
// code and data out of the CPU caches, and parsing each frame on its own
// cost several times what parsing them in a row does (the
// BenchmarkChunkLatency CPU profile had Feed and Classify at about 6 µs a
// frame, against about 1 in their microbenchmarks). Frames are stamped with
// the time the read that completed them arrived.
//
// A guarded stream is parsed at every read instead (eager), still after
// its bytes were written and flushed: its watchdog reads the last content
// time the tee publishes, and never parses itself, so that every byte the
// client has is classified before the copy loop waits for the next read
// (and a read still on its way to a slow client counts as possible
// content). The tee, like the call, is the copy loop's alone.
type streamTee struct {
	rc     io.ReadCloser
	c      *call
	frames *frames.Classifier // nil when the body's coding is not decoded
	batch  []byte             // the bytes of the reads not parsed yet, back to back
	reads  []readMark         // where each of those reads ends in batch, and when it arrived
	eager  bool
	// arrivals is rc when it knows when its bytes arrived from upstream
	// (the guard's committed body, replaying what it held before commit).
	arrivals interface{ ArrivedAt() (int64, bool) }
}

type readMark struct {
	end int
	at  int64
}

// A batch is parsed once it holds this many reads or bytes: enough frames
// to keep the caches warm, few enough to keep a stream's buffer small and
// the pause between two reads short (tens of µs).
const (
	parseBatchReads = 32
	parseBatchBytes = 8 << 10
)

// newStreamTee wraps the body rc of a call's stream in framing, in coding
// (decodable says whether the proxy decodes it: if not, no frame is read
// and the span says why).
func newStreamTee(c *call, rc io.ReadCloser, framing sse.Framing, coding string, decodable bool) *streamTee {
	b := &streamTee{rc: rc, c: c}
	b.arrivals, _ = rc.(interface{ ArrivedAt() (int64, bool) })
	if !decodable {
		c.captureFailed(captureUnsupportedEncoding, coding, nil)
		return b
	}
	o := frames.Options{Shape: c.shape, Framing: framing, Coding: coding, MaxDecoded: c.d.maxDecoded}
	if c.d.frameBudget != nil {
		// Every framing's unfinished frames draw on the receiver's frame budget.
		o.Budget = c.d.frameBudget
	}
	b.frames = frames.New(o, b.onFrame)
	return b
}

func (b *streamTee) Read(p []byte) (int, error) {
	if len(b.reads) > 0 && (b.eager || len(b.reads) >= parseBatchReads || len(b.batch) >= parseBatchBytes) {
		b.parseBatch()
	}
	if b.eager {
		b.c.guard.reading(b.c.d.clock.Now().UnixNano())
	}
	n, err := b.rc.Read(p)
	if n > 0 {
		returned := b.c.d.clock.Now().UnixNano()
		at := returned
		if b.arrivals != nil {
			if t, ok := b.arrivals.ArrivedAt(); ok {
				at = t // held before commit: stamped when it arrived
			}
		}
		b.batch = append(b.batch, p[:n]...)
		b.reads = append(b.reads, readMark{end: len(b.batch), at: at})
		if b.eager {
			b.c.guard.arrived(at, returned)
		}
	}
	switch {
	case err == io.EOF:
		b.c.eof = true
	case err != nil:
		b.c.readErr = err
	}
	return n, err
}

func (b *streamTee) Close() error {
	b.parseBatch()
	b.closeFrames()
	return b.rc.Close()
}

// parseBatch parses the reads gathered so far. An event over the parser's
// size limit is skipped (and counted): the bytes still flow to the client,
// and the frames after it are parsed as usual.
func (b *streamTee) parseBatch() {
	if b.frames != nil {
		start := 0
		for _, r := range b.reads {
			b.frames.Write(b.batch[start:r.end], r.at)
			start = r.end
		}
		b.c.oversized = b.frames.Oversized()
	}
	if b.eager {
		b.c.guard.classified(b.frames == nil || b.frames.Blind())
	}
	b.batch, b.reads = b.batch[:0], b.reads[:0]
}

func (b *streamTee) onFrame(f *llmstream.Frame, at int64, err error) {
	if err != nil {
		b.c.parseErr = err
	}
	b.c.onFrame(f, at)
}

// jsonTee keeps (a bounded prefix of) a non-streaming response body to read
// its metadata once it is complete.
type jsonTee struct {
	rc     io.ReadCloser
	c      *call
	coding string // the body's content coding, decoded at close
	buf    bytes.Buffer
	over   bool
}

func (b *jsonTee) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 && !b.over {
		if b.buf.Len()+n > maxResponseCapture {
			b.over = true
			b.buf = bytes.Buffer{}
		} else {
			b.buf.Write(p[:n])
		}
	}
	switch {
	case err == io.EOF:
		b.c.eof = true
		b.c.terminal = true
	case err != nil:
		b.c.readErr = err
	}
	return n, err
}

func (b *jsonTee) Close() error {
	if b.c.eof && !b.over && b.buf.Len() > 0 && b.c.captureErr == "" {
		if body, ok := b.decoded(); ok {
			if m, err := llmstream.ParseResponse(b.c.shape, body); err == nil {
				b.c.merge(&m)
				b.c.bodyError(&m)
			}
		}
	}
	b.buf = bytes.Buffer{}
	return b.rc.Close()
}

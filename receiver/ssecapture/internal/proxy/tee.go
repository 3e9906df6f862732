// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bytes"
	"io"
	"sync"

	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/sse"
)

// streamTee passes a streamed body (SSE, NDJSON or a JSON array: parser
// cuts it) through untouched and classifies its frames
// later, in batches: a read's bytes are copied aside with the time they
// arrived, and parsed once some reads have gathered (or the body closes),
// when ReverseProxy comes back for more after writing and flushing what it
// has. Parsing thus adds no latency to the bytes it parses, and runs over
// many frames at once: between two chunks the kernel and the other streams
// push the parser's code and data out of the CPU caches, and parsing each
// frame on its own cost several times what parsing them in a row does
// (the BenchmarkChunkLatency CPU profile had Feed and Classify at about 6 µs
// a frame, against about 1 in their microbenchmarks). Frames are stamped
// with the time the read that completed them arrived.
type streamTee struct {
	rc     io.ReadCloser
	c      *call
	parser sse.Splitter
	batch  []byte     // the bytes of the reads not parsed yet, back to back
	reads  []readMark // where each of those reads ends in batch, and when it arrived
	at     int64      // arrival of the read being parsed
	// decoder decodes a content-coded body for the parser; nil when the
	// body is not coded.
	decoder *sideDecoder
	// mu, set on a guarded call, guards the batch and the parse: the
	// guard's watchdog parses what is pending from its own goroutine.
	mu *sync.Mutex
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

func (b *streamTee) Read(p []byte) (int, error) {
	b.lock()
	if len(b.reads) >= parseBatchReads || len(b.batch) >= parseBatchBytes {
		b.parseBatch()
	}
	b.unlock()
	n, err := b.rc.Read(p)
	if n > 0 {
		b.lock()
		b.batch = append(b.batch, p[:n]...)
		b.reads = append(b.reads, readMark{end: len(b.batch), at: b.c.d.clock.Now().UnixNano()})
		b.unlock()
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
	b.lock()
	b.parseBatch()
	// The decoder hands on what it still holds first, so that a clean end
	// completes a last NDJSON line sent without its line feed.
	b.closeDecoder()
	if b.c.eof {
		b.parser.Flush()
	}
	// An unfinished frame is discarded: its buffer goes back to the
	// receiver's frame budget.
	if p, ok := b.parser.(*sse.Parser); ok {
		p.Reset()
	}
	if p, ok := b.parser.(*sse.EventStreamParser); ok {
		p.Reset()
	}
	b.unlock()
	return b.rc.Close()
}

func (b *streamTee) lock() {
	if b.mu != nil {
		b.mu.Lock()
	}
}

func (b *streamTee) unlock() {
	if b.mu != nil {
		b.mu.Unlock()
	}
}

// parseBatch parses the reads gathered so far. An event over the parser's
// size limit is skipped (and counted): the bytes still flow to the client,
// and the frames after it are parsed as usual.
func (b *streamTee) parseBatch() {
	start := 0
	for _, r := range b.reads {
		b.at = r.at
		b.feed(b.batch[start:r.end])
		start = r.end
	}
	b.batch, b.reads = b.batch[:0], b.reads[:0]
	b.c.oversized = b.parser.Oversized()
}

func (b *streamTee) onEvent(ev *sse.Event) {
	f, err := llmstream.Classify(b.c.shape, ev)
	if err != nil {
		b.c.parseErr = err
	}
	b.c.onFrame(&f, b.at)
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
			}
		}
	}
	b.buf = bytes.Buffer{}
	return b.rc.Close()
}

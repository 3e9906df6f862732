// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package frames

import (
	"compress/gzip"
	"errors"
	"hash/crc32"
	"io"
)

// sideDecoder decodes a content-coded body beside the copy to the client,
// which gets the coded bytes as they came. The decompressors of the
// standard library pull their input and keep an error for good once it runs
// out, so the decoder runs on a goroutine of its own that pulls from what
// Write hands it; Write returns only once the decoder has used all of it and
// asks for more, so everything those bytes decode to has gone to emit by
// then, and a frame is stamped with the read that completed it, as on an
// uncoded stream. Only one of the two goroutines runs at a time: emit (the
// SSE parser) needs no lock.
//
// The decoded bytes are bounded by limit: past it, capture stops, and so
// does the decoder's CPU. Its memory is fixed: flate's window and tables
// (about 40 KiB), a buffer and a goroutine.
type sideDecoder struct {
	coding string
	limit  int64
	emit   func([]byte)

	in      chan []byte   // Write to decoder: the next bytes to decode
	drained chan struct{} // decoder to Write: the last bytes are used up
	done    chan struct{} // closed when the decoder stopped
	started bool

	// Owned by the decoder goroutine until done is closed.
	pending []byte
	busy    bool  // pending came from a Write that still waits
	closed  bool  // the body ended: errors from here on are a truncation
	decoded int64 // bytes handed to emit
	err     error // why decoding stopped early, nil when it did not
	// format is the body's container; sum and size are the checksum and
	// length of what its current member decoded to, to code a closing
	// frame after it (codedEnd).
	format format
	sum    uint32
	size   uint32

	// tail is the last coded bytes written, on the writer's side.
	tail [4]byte
}

// ErrDecodedLimit: the decoded body passed the limit.
var ErrDecodedLimit = errors.New("decoded body over the limit")

// decodeBufferSize is how many decoded bytes go to emit at a time.
const decodeBufferSize = 8 << 10

func newSideDecoder(coding string, limit int64, emit func([]byte)) *sideDecoder {
	return &sideDecoder{
		coding:  coding,
		limit:   limit,
		emit:    emit,
		in:      make(chan []byte),
		drained: make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// Write decodes p, calling emit with what it decodes to, and returns when
// the decoder needs more input or has stopped. After the decoder stopped it
// does nothing: the rest of the body is not decoded.
func (d *sideDecoder) Write(p []byte) {
	if len(p) == 0 || d.stopped() {
		return
	}
	if len(p) >= len(d.tail) {
		copy(d.tail[:], p[len(p)-len(d.tail):])
	} else {
		d.tail = [4]byte(append(d.tail[len(p):], p...))
	}
	if !d.started {
		d.started = true
		go d.run()
	}
	select {
	case d.in <- p:
	case <-d.done:
		return
	}
	select {
	case <-d.drained:
	case <-d.done:
	}
}

// Close ends the input and waits for the decoder goroutine to end. It
// returns why decoding stopped early (errDecodedLimit, or the decoder's
// error for a corrupt body); a body that ends before its coding does is
// not an error here: the frames tell whether the stream was whole.
func (d *sideDecoder) Close() error {
	if !d.started {
		return nil
	}
	close(d.in)
	<-d.done
	return d.err
}

func (d *sideDecoder) stopped() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

func (d *sideDecoder) run() {
	defer close(d.done)
	r, f, err := openDecoder(d.coding, d)
	if err != nil {
		d.fail(err)
		return
	}
	d.format = f
	if d.format == formatZlib {
		d.sum = 1 // Adler-32's start
	}
	gz, _ := r.(*gzip.Reader)
	if gz != nil {
		// Member by member, for the checksum of the current one.
		gz.Multistream(false)
	}
	defer func() { _ = r.Close() }()
	buf := make([]byte, decodeBufferSize)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if room := d.limit - d.decoded; int64(n) > room {
				d.emit(buf[:room])
				d.decoded = d.limit
				d.err = ErrDecodedLimit
				return
			}
			d.decoded += int64(n)
			d.account(buf[:n])
			d.emit(buf[:n])
		}
		if err == io.EOF && gz != nil {
			switch rerr := gz.Reset(d); {
			case rerr == nil:
				d.sum, d.size = 0, 0 // gzip members may follow one another until the body ends
				continue
			case !errors.Is(rerr, io.EOF):
				// Bytes after a member that are no gzip member: the body
				// does not decode past here (a gzip client fails on them).
				d.fail(rerr)
				return
			}
		}
		if err == io.EOF {
			return // the coding ended
		}
		if err != nil {
			d.fail(err)
			return
		}
	}
}

// account adds decoded bytes to the current member's checksum and length.
func (d *sideDecoder) account(p []byte) {
	switch d.format {
	case formatGzip:
		d.sum = crc32.Update(d.sum, crc32.IEEETable, p)
		d.size += uint32(len(p)) // ISIZE is the length modulo 2^32
	case formatZlib:
		d.sum = adler32Update(d.sum, p)
	}
}

func (d *sideDecoder) fail(err error) {
	if !d.closed {
		d.err = err
	}
}

// fill waits for input when none is pending, first telling the Write that
// brought the last bytes that they are used up. It reports false once the
// body ended.
func (d *sideDecoder) fill() bool {
	for len(d.pending) == 0 {
		if d.closed {
			return false
		}
		if d.busy {
			d.busy = false
			d.drained <- struct{}{}
		}
		p, ok := <-d.in
		if !ok {
			d.closed = true
			return false
		}
		d.pending, d.busy = p, true
	}
	return true
}

// Read and ReadByte are the decoder's input. Being an io.ByteReader keeps
// flate from wrapping it in a buffer that would read ahead of what it
// needs, and so from waiting for bytes a frame does not need.
func (d *sideDecoder) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if !d.fill() {
		return 0, io.EOF
	}
	n := copy(p, d.pending)
	d.pending = d.pending[n:]
	return n, nil
}

func (d *sideDecoder) ReadByte() (byte, error) {
	if !d.fill() {
		return 0, io.EOF
	}
	b := d.pending[0]
	d.pending = d.pending[1:]
	return b, nil
}

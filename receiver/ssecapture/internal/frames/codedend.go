// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package frames

import (
	"encoding/binary"
	"hash/crc32"
)

// syncFlushMark is how a flushed deflate stream ends: the empty stored
// block of a sync (or full) flush, on a byte boundary. An upstream that
// streams in a coding flushes after every chunk, or its client could not
// decode them as they come.
var syncFlushMark = [4]byte{0x00, 0x00, 0xff, 0xff}

// maxStoredBlock is the most one stored deflate block holds.
const maxStoredBlock = 0xffff

// codedEnd codes frame so that it ends the coded body the client has read
// so far: the frame in final stored deflate blocks, then the container's
// trailer (gzip's CRC-32 and length, zlib's Adler-32) over everything the
// member decoded to, the frame included. It is false when the body did not
// stop at a flush point (the closing frame cannot continue the coding), or
// decoding stopped (the checksum is not known). It runs on the writer's
// side, between Writes: the decoder goroutine waits for input then.
func (d *sideDecoder) codedEnd(frame []byte) ([]byte, bool) {
	if !d.started || d.stopped() || d.tail != syncFlushMark {
		return nil, false
	}
	out := make([]byte, 0, len(frame)+5*(len(frame)/maxStoredBlock+1)+8)
	rest := frame
	for {
		n := min(len(rest), maxStoredBlock)
		final := byte(0)
		if n == len(rest) {
			final = 1
		}
		// BFINAL, BTYPE 00 (stored), padding to the byte; LEN and NLEN.
		out = append(out, final)
		out = binary.LittleEndian.AppendUint16(out, uint16(n))
		out = binary.LittleEndian.AppendUint16(out, ^uint16(n))
		out = append(out, rest[:n]...)
		rest = rest[n:]
		if final == 1 {
			break
		}
	}
	switch d.format {
	case formatGzip:
		out = binary.LittleEndian.AppendUint32(out, crc32.Update(d.sum, crc32.IEEETable, frame))
		out = binary.LittleEndian.AppendUint32(out, d.size+uint32(len(frame)))
	case formatZlib:
		out = binary.BigEndian.AppendUint32(out, adler32Update(d.sum, frame))
	}
	return out, true
}

// adler32Update is hash/adler32's checksum, continued from adler (1 for
// none yet); the standard library has no Update for it.
func adler32Update(adler uint32, p []byte) uint32 {
	const mod = 65521
	// nmax bytes keep s2 within 32 bits before the modulo (zlib's NMAX).
	const nmax = 5552
	s1, s2 := adler&0xffff, adler>>16
	for len(p) > 0 {
		n := min(len(p), nmax)
		for _, c := range p[:n] {
			s1 += uint32(c)
			s2 += s1
		}
		s1 %= mod
		s2 %= mod
		p = p[n:]
	}
	return s2<<16 | s1
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"math"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// SealSize is the length of a seal: an HMAC-SHA256 cut to 128 bits.
const SealSize = 16

// sealKey is drawn once per process: a seal made in another process (a
// first-tier collector, a client, a forger) never verifies here.
var sealKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // never fails (crypto/rand panics instead)
	return k
}()

// Sealer makes and checks the stall processor's seal (docs/contract.md
// section 4): a MAC, under this process's key, of a span's identity and
// times, the marks of its stream (a stall cut, frame evidence) and a digest
// of the chunk times it judged plausible. A connector of the same collector
// that finds a seal verifying against what it reads of the span knows the
// processor judged those chunk events, and need not judge them again: it
// reads their times alone. The figure attributes are not sealed: they are
// checked for consistency (Reported.Check) on every span, sealed or not,
// as on a span whose chunk events are gone. A Sealer is not safe for
// concurrent use.
type Sealer struct {
	mac hash.Hash
	buf []byte
	sum [sha256.Size]byte
}

// NewSealer returns a sealer under this process's key.
func NewSealer() *Sealer { return &Sealer{mac: hmac.New(sha256.New, sealKey)} }

// Seal returns the seal of span with its judged evidence c. The slice is
// the sealer's own, valid until its next call.
func (s *Sealer) Seal(span ptrace.Span, c *Chunks) []byte {
	b := s.buf[:0]
	tid, sid := span.TraceID(), span.SpanID()
	b = append(b, tid[:]...)
	b = append(b, sid[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(span.StartTimestamp()))
	b = binary.LittleEndian.AppendUint64(b, uint64(span.EndTimestamp()))
	// The evidence: its chunk times (their count, sum and ends), what was
	// left out or cut.
	var sum uint64
	for _, t := range c.Times {
		sum += uint64(t)
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(len(c.Times)))
	b = binary.LittleEndian.AppendUint64(b, sum)
	if n := len(c.Times); n > 0 {
		b = binary.LittleEndian.AppendUint64(b, uint64(c.Times[0]))
		b = binary.LittleEndian.AppendUint64(b, uint64(c.Times[n-1]))
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(c.skip))
	b = binary.LittleEndian.AppendUint64(b, uint64(c.cut))
	s.buf = b
	s.mac.Reset()
	s.mac.Write(b)
	return s.mac.Sum(s.sum[:0])[:SealSize]
}

// Verify reports whether rep carries the seal of span with the evidence c.
func (s *Sealer) Verify(span ptrace.Span, c *Chunks, rep *Reported) bool {
	return len(rep.seal) == SealSize && hmac.Equal(rep.seal, s.Seal(span, c))
}

// Sealed reports whether rep carries a seal, of any origin.
func (r *Reported) Sealed() bool { return r.seal != nil }

// ReadSealed reads the chunk evidence of a span that carries a seal into c
// the cheap way, and reports whether the seal verifies: the times of the
// chunk events by name, nothing else, then the seal over them. It reports
// false, and the caller reads the span with Read, when the span has no
// seal, a chunk event carries more than its kind (elision counts), the
// times are not in order or out of range, or the seal does not verify (made
// elsewhere, or the span changed since).
func (r *ChunkReader) ReadSealed(span ptrace.Span, c *Chunks, rep *Reported, s *Sealer) bool {
	if len(rep.seal) != SealSize {
		return false
	}
	c.Reset()
	for _, ev := range span.Events().All() {
		if !r.names.contains(ev.Name()) {
			continue
		}
		ts := ev.Timestamp()
		if ts == 0 {
			continue
		}
		t := int64(ts)
		if ts > math.MaxInt64 || t < c.last {
			return false
		}
		switch ev.Attributes().Len() {
		case 0:
			c.bare++
		case 1:
		default:
			return false
		}
		c.last = t
		c.Times = append(c.Times, t)
	}
	c.start = knownTime(span.StartTimestamp())
	c.end = knownTime(span.EndTimestamp())
	c.readStreamMarks(span.Attributes())
	return s.Verify(span, c, rep)
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package frames turns the bytes of a streamed LLM response, as they come,
// into classified frames: the side decoder of its content coding (bounded
// in decoded bytes), its shape's framing (SSE, NDJSON, JSON array), and
// llmstream.Classify. The proxy's tee reads a stream's frames through it
// for the span, and the guard an attempt's before its first content chunk:
// both see the same frames from the same bytes, in any coding.
package frames // import "github.com/streamstall/streamstall/receiver/ssecapture/internal/frames"

import (
	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/sse"
)

// Options configure a Classifier.
type Options struct {
	Shape   llmstream.Shape
	Framing sse.Framing
	// Coding is the body's content coding (ResponseCoding's, one it can
	// decode); Identity for none.
	Coding string
	// MaxDecoded bounds the decoded bytes of a coded body: past it no
	// frame is read (Blind).
	MaxDecoded int64
	// Budget, when set, is what the parser draws on for unfinished frames
	// past its free buffer, whatever the framing.
	Budget sse.Budget
}

// Handler takes each frame, stamped with the arrival of the read that
// completed it; err is Classify's (the frame is then KindMeta). The frame
// is only valid during the call: the classifier reuses it, so that a frame
// costs no allocation of its own.
type Handler func(f *llmstream.Frame, at int64, err error)

// Classifier classifies the frames of one streamed body, fed read by read.
// It is not safe for concurrent use: one goroutine (an attempt's reader,
// then the proxy's copy loop) owns it.
type Classifier struct {
	shape   llmstream.Shape
	split   sse.Splitter
	decoder *sideDecoder // nil when the body is not coded
	handle  Handler
	frame   llmstream.Frame
	at      int64
	// boundary follows where the last frame of the decoded bytes ends, for
	// a closing frame after them.
	boundary llmstream.Boundary
	closed   bool
	stopped  bool
}

// New returns the classifier of a body as o describes it.
func New(o Options, handle Handler) *Classifier {
	c := &Classifier{shape: o.Shape, handle: handle, boundary: llmstream.NewBoundary(o.Shape, o.Framing)}
	c.split = sse.NewBudgetedSplitter(o.Framing, 0, o.Budget, c.onEvent)
	if o.Coding != Identity {
		c.decoder = newSideDecoder(o.Coding, o.MaxDecoded, c.feed)
	}
	return c
}

// Write classifies p, one read's bytes, which arrived at at (unix
// nanoseconds). Every frame p completes has been handed on when it returns.
func (c *Classifier) Write(p []byte, at int64) {
	c.at = at
	if c.decoder != nil {
		c.decoder.Write(p)
		return
	}
	c.feed(p)
}

func (c *Classifier) feed(p []byte) {
	if len(p) == 0 {
		return
	}
	c.boundary.Track(p)
	c.split.Feed(p)
}

func (c *Classifier) onEvent(ev *sse.Event) {
	if c.stopped {
		return
	}
	var err error
	c.frame, err = llmstream.Classify(c.shape, ev)
	c.handle(&c.frame, c.at, err)
}

// Stop ends the classification: the frames after the one being handled,
// in the write under way too, are not classified (a reader that has seen
// what it waited for spends nothing on the rest).
func (c *Classifier) Stop() { c.stopped = true }

// Blind reports whether the classifier no longer reads frames: the decoder
// stopped (the decoded limit, a corrupt body, or the coding's end).
func (c *Classifier) Blind() bool { return c.decoder != nil && c.decoder.stopped() }

// Coded reports whether the body is in a content coding.
func (c *Classifier) Coded() bool { return c.decoder != nil }

// Decoded counts the decoded bytes of a coded body so far.
func (c *Classifier) Decoded() int64 {
	if c.decoder == nil {
		return 0
	}
	return c.decoder.decoded
}

// Oversized counts the frames skipped for their size.
func (c *Classifier) Oversized() int64 { return c.split.Oversized() }

// End returns a closing frame as the client of the body gets it after what
// has been written: frame, built after the decoded bytes' boundary; coded,
// for a coded body, so that it ends the coding (a gzip or zlib body is
// whole after it). It is false when a coded body cannot be ended so (it
// did not stop at a flush point, or decoding stopped).
func (c *Classifier) End(frame func(*llmstream.Boundary) []byte) ([]byte, bool) {
	f := frame(&c.boundary)
	if c.decoder == nil {
		return f, true
	}
	return c.decoder.codedEnd(f)
}

// Close ends the body: eof says it ended cleanly, and then the framing's
// end is dispatched (a last NDJSON line sent without its line feed). It
// stops the decoder and gives an unfinished frame's buffer back to the
// budget; it returns why decoding stopped early (ErrDecodedLimit, or the
// decoder's error on a corrupt body), nil when it did not.
func (c *Classifier) Close(eof bool) error {
	if c.closed {
		return nil
	}
	c.closed = true
	var err error
	if c.decoder != nil {
		// The decoder hands on what it still holds first.
		err = c.decoder.Close()
	}
	if eof {
		c.split.Flush()
	}
	// An unfinished frame is discarded: its buffer goes back to the budget.
	c.split.Reset()
	return err
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bytes"
	"errors"
	"io"

	"go.uber.org/zap"

	"github.com/streamstall/streamstall/receiver/ssecapture/internal/frames"
)

// DefaultMaxDecodedResponseBytes bounds the decoded bytes of one
// content-coded response: 128 MiB holds 128k output tokens of 1 KiB frames,
// more than any model writes in one response, while a decompression bomb
// costs at most that much decoding (well under a second of CPU) and no
// memory beyond the decoder's fixed state.
const DefaultMaxDecodedResponseBytes = 128 << 20

// closeFrames ends the tee's classifier and says in the span why it could
// not read every frame of a coded body.
func (b *streamTee) closeFrames() {
	if b.frames == nil {
		return
	}
	err := b.frames.Close(b.c.eof)
	switch {
	case err == nil:
	case errors.Is(err, frames.ErrDecodedLimit):
		b.c.captureFailed(captureDecodedLimit, "", nil)
	default:
		b.c.captureFailed(captureDecodeError, "", err)
	}
}

// decoded returns the JSON body decoded, within maxResponseCapture; false
// when it is larger (its metadata is skipped, as for a large plain body) or
// does not decode.
func (b *jsonTee) decoded() ([]byte, bool) {
	if b.coding == frames.Identity {
		return b.buf.Bytes(), true
	}
	r, err := frames.NewDecoder(b.coding, bytes.NewReader(b.buf.Bytes()))
	if err == nil {
		var body []byte
		body, err = io.ReadAll(io.LimitReader(r, maxResponseCapture+1))
		_ = r.Close()
		if err == nil {
			return body, len(body) <= maxResponseCapture
		}
	}
	b.c.captureFailed(captureDecodeError, "", err)
	return nil, false
}

// captureFailed records why the proxy could not read the response's frames;
// the first reason stands.
func (c *call) captureFailed(reason, coding string, err error) {
	if c.captureErr != "" {
		return
	}
	c.captureErr = reason
	c.d.logger.Debug("response not captured", zap.String("reason", reason),
		zap.String("content_encoding", c.capValue(coding)), zap.Error(err))
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ingest

import (
	"errors"
	"io"
	"unicode/utf8"
)

var errInvalidUTF8 = errors.New("not valid UTF-8: every string of a record must be")

// utf8Reader passes a body through while checking that it is UTF-8, as
// JSON text must be. encoding/json would replace each invalid byte of a
// string with U+FFFD; a record whose strings are not what its client wrote
// is refused instead. It stops at the first invalid byte, having passed
// everything before it, so the decoder fails at the record and field that
// hold it.
type utf8Reader struct {
	r    io.Reader
	held []byte // the start of a character split across reads
	err  error
}

func (u *utf8Reader) Read(p []byte) (int, error) {
	if u.err != nil {
		return 0, u.err
	}
	if len(p) <= len(u.held) {
		// Too small to make progress with what is held; json and bufio
		// never read this little.
		return 0, io.ErrShortBuffer
	}
	k := copy(p, u.held)
	n, err := u.r.Read(p[k:])
	n += k
	u.held = u.held[:0]
	valid := validPrefix(p[:n])
	if rest := p[valid:n]; len(rest) > 0 {
		if err == nil && len(rest) < utf8.UTFMax && !utf8.FullRune(rest) {
			// An incomplete character: hold it until its end arrives.
			u.held = append(u.held, rest...)
			return valid, nil
		}
		u.err = errInvalidUTF8
		return valid, u.err
	}
	return n, err
}

// validPrefix returns the length of the longest prefix of b made of whole,
// valid characters.
func validPrefix(b []byte) int {
	i := 0
	for i < len(b) {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return i
}

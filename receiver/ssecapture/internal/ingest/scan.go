// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ingest

import (
	"errors"
	"fmt"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// scanBufferSize is the window of the body a jsonScanner holds. Tokens
// longer than it (long strings, long numbers) are gathered in scratch
// buffers bounded by the limits their callers pass.
const scanBufferSize = 32 << 10

// maxNumberLen bounds the text of one JSON number: no time or attribute
// value needs more, and a number is read whole before it is parsed.
const maxNumberLen = 1024

var (
	errInvalidUTF8   = errors.New("not valid UTF-8: every string of a record must be")
	errLoneSurrogate = errors.New(`a \u escape names a lone UTF-16 surrogate, which is no character: every string of a record must be valid UTF-8`)
	errNumberTooLong = fmt.Errorf("a number longer than %d characters", maxNumberLen)
)

// syntaxError is JSON text that breaks the grammar.
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return e.msg }

func errUnexpected(c byte, context string) error {
	return &syntaxError{fmt.Sprintf("invalid character %q %s", c, context)}
}

// jsonScanner reads JSON text from a body once, front to back, a token at
// a time: the grammar, UTF-8 (in strings and out) and \u escapes are
// checked as the bytes pass, white space is skipped a window at a time,
// and no token is read further than the limit its caller gives. Each byte
// is looked at a bounded number of times, so that a body costs time in
// proportion to its length whatever it holds.
type jsonScanner struct {
	r        io.Reader
	buf      []byte
	pos, end int
	rerr     error  // the read error that ended the body (io.EOF at its end)
	strBuf   []byte // the last string read across windows or with escapes
}

func newJSONScanner(r io.Reader) *jsonScanner {
	return &jsonScanner{r: r, buf: make([]byte, scanBufferSize)}
}

// fill reads more of the body after buf[pos:end], moving those bytes to the
// front; it reports false when nothing more can be read.
func (s *jsonScanner) fill() bool {
	if s.rerr != nil {
		return false
	}
	if s.pos > 0 {
		s.end = copy(s.buf, s.buf[s.pos:s.end])
		s.pos = 0
	}
	for range 100 {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err != nil {
			s.rerr = err
			return n > 0
		}
		if n > 0 {
			return true
		}
	}
	s.rerr = io.ErrNoProgress
	return false
}

// ensure reads until n bytes are at hand past pos (n <= scanBufferSize),
// or the body ends; it reports whether they are.
func (s *jsonScanner) ensure(n int) bool {
	for s.end-s.pos < n {
		if !s.fill() {
			return false
		}
	}
	return true
}

// eof is the error of a token cut short by the body's end (or by a read
// error, which the decoder tells apart through its readTracker).
func (s *jsonScanner) eof() error {
	if s.rerr != nil && !errors.Is(s.rerr, io.EOF) {
		return s.rerr
	}
	return io.ErrUnexpectedEOF
}

// peek skips white space and returns the next byte, unread; at the body's
// end it returns io.EOF (or the read error).
func (s *jsonScanner) peek() (byte, error) {
	for {
		for s.pos < s.end {
			c := s.buf[s.pos]
			if c > ' ' {
				return c, nil
			}
			if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
				return c, nil
			}
			s.pos++
		}
		if !s.fill() {
			if s.rerr != nil && !errors.Is(s.rerr, io.EOF) {
				return 0, s.rerr
			}
			return 0, io.EOF
		}
	}
}

// outside returns the error for byte c met outside a string where context
// was expected: a byte that starts no valid UTF-8 character is reported as
// such, anything else as a syntax error.
func (s *jsonScanner) outside(c byte, context string) error {
	if c >= utf8.RuneSelf {
		s.ensure(utf8.UTFMax)
		if r, size := utf8.DecodeRune(s.buf[s.pos:s.end]); r == utf8.RuneError && size <= 1 {
			return errInvalidUTF8
		}
	}
	return errUnexpected(c, context)
}

// next consumes the next non-space byte, which must be want.
func (s *jsonScanner) next(want byte, context string) error {
	c, err := s.peek()
	if err != nil {
		return s.eofOr(err)
	}
	if c != want {
		return s.outside(c, context)
	}
	s.pos++
	return nil
}

// eofOr turns the io.EOF of peek into an unexpected end.
func (s *jsonScanner) eofOr(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// literal consumes true, false or null, whose first byte is next.
func (s *jsonScanner) literal() (byte, error) {
	c := s.buf[s.pos]
	var word string
	switch c {
	case 't':
		word = "true"
	case 'f':
		word = "false"
	case 'n':
		word = "null"
	default:
		return 0, s.outside(c, "looking for beginning of value")
	}
	s.ensure(len(word))
	for i := range len(word) {
		if s.pos+i >= s.end {
			return 0, s.eof()
		}
		if s.buf[s.pos+i] != word[i] {
			return 0, errUnexpected(s.buf[s.pos+i], "in literal "+word)
		}
	}
	s.pos += len(word)
	return c, nil
}

// number consumes a number whose first byte is next and returns its text,
// valid until the next call: JSON's grammar, at most maxNumberLen bytes.
func (s *jsonScanner) number() ([]byte, error) {
	i := s.pos
	for {
		for i < s.end && isNumberByte(s.buf[i]) {
			i++
		}
		if i < s.end {
			break // a delimiter ends it
		}
		n := i - s.pos
		if n > maxNumberLen {
			return nil, errNumberTooLong
		}
		more := s.fill() // moves the number to the front
		i = s.pos + n
		if !more {
			break // the body ends with it
		}
	}
	text := s.buf[s.pos:i]
	if len(text) > maxNumberLen {
		return nil, errNumberTooLong
	}
	if err := checkNumber(text); err != nil {
		return nil, err
	}
	s.pos = i
	return text, nil
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E'
}

// checkNumber checks JSON's number grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func checkNumber(b []byte) error {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return &syntaxError{fmt.Sprintf("invalid number %q", b)}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return &syntaxError{fmt.Sprintf("invalid number %q", b)}
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return &syntaxError{fmt.Sprintf("invalid number %q", b)}
		}
	}
	if i != len(b) {
		return &syntaxError{fmt.Sprintf("invalid number %q", b)}
	}
	return nil
}

// str consumes a string whose opening quote is next and returns its
// decoded bytes, valid until the next call. A string that decodes to more
// than limit bytes is not read further: tooLong, and the body is not to be
// read on. Invalid UTF-8 and lone surrogates are errors, as are control
// characters, which JSON requires escaped.
func (s *jsonScanner) str(limit int) (text []byte, tooLong bool, err error) {
	s.pos++ // the opening quote
	// The common case: plain ASCII up to the closing quote, in the window.
	for i := s.pos; i < s.end; i++ {
		c := s.buf[i]
		if c == '"' {
			text = s.buf[s.pos:i]
			if len(text) > limit {
				return nil, true, nil
			}
			s.pos = i + 1
			return text, false, nil
		}
		if c == '\\' || c < ' ' || c >= utf8.RuneSelf {
			break
		}
	}
	s.strBuf = s.strBuf[:0]
	for {
		if s.pos == s.end && !s.fill() {
			return nil, false, s.eof()
		}
		c := s.buf[s.pos]
		switch {
		case c == '"':
			s.pos++
			return s.strBuf, false, nil
		case c == '\\':
			if err := s.escape(); err != nil {
				return nil, false, err
			}
		case c < ' ':
			return nil, false, errUnexpected(c, "in string literal")
		case c < utf8.RuneSelf:
			// A run of plain bytes at once.
			j := s.pos + 1
			for j < s.end && s.buf[j] >= ' ' && s.buf[j] < utf8.RuneSelf && s.buf[j] != '"' && s.buf[j] != '\\' {
				j++
			}
			s.strBuf = append(s.strBuf, s.buf[s.pos:j]...)
			s.pos = j
		default:
			s.ensure(utf8.UTFMax)
			r, size := utf8.DecodeRune(s.buf[s.pos:s.end])
			if r == utf8.RuneError && size <= 1 {
				return nil, false, errInvalidUTF8
			}
			s.strBuf = append(s.strBuf, s.buf[s.pos:s.pos+size]...)
			s.pos += size
		}
		if len(s.strBuf) > limit {
			return nil, true, nil
		}
	}
}

// escape decodes the escape sequence at s.pos into s.strBuf.
func (s *jsonScanner) escape() error {
	if !s.ensure(2) {
		return s.eof()
	}
	c := s.buf[s.pos+1]
	if c != 'u' {
		var b byte
		switch c {
		case '"', '\\', '/':
			b = c
		case 'b':
			b = '\b'
		case 'f':
			b = '\f'
		case 'n':
			b = '\n'
		case 'r':
			b = '\r'
		case 't':
			b = '\t'
		default:
			return errUnexpected(c, "in string escape code")
		}
		s.strBuf = append(s.strBuf, b)
		s.pos += 2
		return nil
	}
	r, err := s.hex4()
	if err != nil {
		return err
	}
	if utf16.IsSurrogate(r) {
		// Only a high surrogate followed by a low one is a character.
		if r >= 0xDC00 || !s.ensure(2) || s.buf[s.pos] != '\\' || s.buf[s.pos+1] != 'u' {
			return errLoneSurrogate
		}
		low, err := s.hex4()
		if err != nil {
			return err
		}
		if r = utf16.DecodeRune(r, low); r == utf8.RuneError {
			return errLoneSurrogate
		}
	}
	s.strBuf = utf8.AppendRune(s.strBuf, r)
	return nil
}

// hex4 decodes the \uXXXX escape at s.pos.
func (s *jsonScanner) hex4() (rune, error) {
	if !s.ensure(6) {
		return 0, s.eof()
	}
	var r rune
	for _, c := range s.buf[s.pos+2 : s.pos+6] {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, errUnexpected(c, "in \\u hexadecimal character escape")
		}
		r = r<<4 | rune(v)
	}
	s.pos += 6
	return r, nil
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import "bytes"

// arrayPlace is where the bytes of a streamed JSON array have got to.
type arrayPlace uint8

const (
	arrayNotOpen arrayPlace = iota // nothing but white space yet
	arrayBefore                    // after '[' or ',': before an element
	arrayAfter                     // after an element
	arrayInside                    // inside an element (or a value that is not an array)
	arrayClosed                    // after the closing ']'
)

// arrayTracker follows the structure of a JSON array streamed element by
// element (Gemini's streamGenerateContent without alt=sse): brackets,
// strings and escapes, without buffering or checking the grammar, as
// sse.ArrayParser cuts it.
type arrayTracker struct {
	place    arrayPlace
	bare     bool // the value is not an array: an error object, say
	depth    int  // brackets open inside the element
	inString bool
	escaped  bool
	scalar   bool // a number or literal element: it ends at a delimiter
}

func (a *arrayTracker) track(p []byte) {
	for i := 0; i < len(p); i++ {
		if !a.inString {
			a.step(p[i])
			continue
		}
		if a.escaped {
			a.escaped = false
			continue
		}
		// Strings are most of the bytes: skip to the quote that can end
		// this one; the backslashes before it say whether it does.
		j := bytes.IndexByte(p[i:], '"')
		if j < 0 {
			a.escaped = backslashes(p[i:])%2 == 1
			return
		}
		i += j
		if backslashes(p[i-j:i])%2 == 1 {
			continue // an escaped quote
		}
		a.inString = false
		if a.depth == 0 {
			a.endElement()
		}
	}
}

// backslashes counts the backslashes that end b.
func backslashes(b []byte) int {
	n := 0
	for n < len(b) && b[len(b)-1-n] == '\\' {
		n++
	}
	return n
}

// step takes one byte outside a string.
func (a *arrayTracker) step(c byte) {
	if a.scalar {
		if !isJSONSpace(c) && c != ',' && c != ']' && c != '}' {
			return
		}
		a.scalar = false
		a.endElement()
	}
	switch {
	case c == '"':
		a.inString = true
		a.open()
	case c == '{' || c == '[':
		if a.place == arrayNotOpen && c == '[' {
			a.place = arrayBefore
			return
		}
		if a.open() {
			a.depth = 1
		} else {
			a.depth++
		}
	case c == '}' || c == ']':
		switch {
		case a.depth > 0:
			if a.depth--; a.depth == 0 {
				a.endElement()
			}
		case c == ']' && (a.place == arrayBefore || a.place == arrayAfter):
			a.place = arrayClosed
		}
	case c == ',':
		if a.depth == 0 && a.place == arrayAfter {
			a.place = arrayBefore
		}
	case isJSONSpace(c):
	default:
		if a.depth == 0 && a.open() {
			a.scalar = true
		}
	}
}

// open starts an element where one may start, and reports whether it did.
func (a *arrayTracker) open() bool {
	switch a.place {
	case arrayNotOpen:
		a.place, a.bare = arrayInside, true
	case arrayBefore, arrayAfter:
		// After an element without a comma too, as sse.ArrayParser
		// resynchronizes on a sloppy server.
		a.place = arrayInside
	default:
		return false
	}
	return true
}

func (a *arrayTracker) endElement() {
	if a.place != arrayInside {
		return // bytes after the array closed
	}
	if a.bare {
		a.place, a.bare = arrayClosed, false
		return
	}
	a.place = arrayAfter
}

// closeWith ends a streamed array with obj as its last element. A cut
// element cannot be closed without its grammar: the error follows it after
// a comma, and the array stays as malformed as the upstream left it. After
// the closing bracket nothing may follow but white space: a line end.
func (a *arrayTracker) closeWith(obj []byte) []byte {
	var out []byte
	switch a.place {
	case arrayClosed:
		return []byte("\n")
	case arrayNotOpen:
		out = append(out, '[')
	case arrayBefore:
	default:
		if a.bare {
			return append(append([]byte("\n"), obj...), '\n')
		}
		out = append(out, ',')
	}
	out = append(out, obj...)
	return append(out, ']')
}

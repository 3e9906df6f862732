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

// jsonToken is the token an element was cut in.
type jsonToken uint8

const (
	tokNone jsonToken = iota
	tokString
	tokKey // a string that is an object's key
	tokNumber
	tokLiteral // true, false, null
)

// jsonExpect is what the innermost open container expects next.
type jsonExpect uint8

const (
	expValue jsonExpect = iota // an array's element, or a member's value after its colon
	expKey                     // a member's key
	expColon                   // the colon after a key
	expNext                    // a comma or the closing bracket, after a value
)

// maxTrackedDepth is the nesting inside an element whose container kinds
// are kept (a bit each): an element cut deeper is not completed.
const maxTrackedDepth = 64

// arrayTracker follows a JSON array streamed element by element (Gemini's
// streamGenerateContent without alt=sse), as sse.ArrayParser cuts it, and
// inside the element it is in, the JSON grammar far enough to complete an
// element cut anywhere into a valid one: the token it was cut in, what the
// innermost container expects next, and the kind of each open container.
// It holds a few words whatever the input; input that is not JSON is
// followed without error, and its completion is not JSON either.
type arrayTracker struct {
	place arrayPlace
	bare  bool // the value is not an array: an error object, say
	// values: the bytes are JSON values, not an array of them (an NDJSON
	// line): a '[' opens a value like any other.
	values bool

	depth   int    // containers open inside the element
	objects uint64 // bit d-1 set: the container at depth d is an object
	expect  jsonExpect
	opened  bool // the innermost container has just opened: nothing in it yet

	tok     jsonToken
	escaped bool   // in a string, after a backslash
	hex     int    // in a string, the hex digits a \u escape still needs
	digit   bool   // a number's last byte is a digit
	literal string // the literal being read, and how much of it has come
	matched int
}

func (a *arrayTracker) track(p []byte) {
	for i := 0; i < len(p); i++ {
		switch a.tok {
		case tokString, tokKey:
			i = a.inString(p, i)
		case tokNumber:
			c := p[i]
			if isDigit(c) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' {
				a.digit = isDigit(c)
				continue
			}
			a.valueDone()
			a.step(c)
		case tokLiteral:
			if p[i] == a.literal[a.matched] {
				if a.matched++; a.matched == len(a.literal) {
					a.valueDone()
				}
				continue
			}
			a.valueDone() // not JSON: followed as if it had ended
			a.step(p[i])
		default:
			a.step(p[i])
		}
	}
}

// inString goes on with a string at p[i] and returns the index of the
// last byte it took. Strings are most of the bytes: it skips to the quote
// that can end one, and the backslashes before it say whether it does.
func (a *arrayTracker) inString(p []byte, i int) int {
	for ; i < len(p) && (a.escaped || a.hex > 0); i++ {
		switch {
		case a.escaped:
			a.escaped = false
			if p[i] == 'u' {
				a.hex = 4
			}
		case isHex(p[i]):
			a.hex--
		default:
			a.hex = 0
			i-- // not an escape's digit: read it as the string's
		}
	}
	if i == len(p) {
		return i - 1
	}
	j := bytes.IndexByte(p[i:], '"')
	if j < 0 {
		a.escaped, a.hex = escapeAtEnd(p[i:])
		return len(p) - 1
	}
	if backslashes(p[i:i+j])%2 == 1 {
		return i + j // an escaped quote
	}
	if a.tok == tokKey {
		a.tok, a.expect = tokNone, expColon
	} else {
		a.valueDone()
	}
	return i + j
}

// escapeAtEnd reports whether a string's bytes b (which begin outside any
// escape) end inside one: after its backslash, or with the hex digits of a
// \u escape still to come.
func escapeAtEnd(b []byte) (escaped bool, hex int) {
	if backslashes(b)%2 == 1 {
		return true, 0
	}
	n := 0
	for n < 3 && n < len(b) && isHex(b[len(b)-1-n]) {
		n++
	}
	for ; n >= 0; n-- {
		// \u and n of its digits end b, with the backslash not escaped.
		if u := len(b) - 1 - n; u >= 1 && b[u] == 'u' && backslashes(b[:u])%2 == 1 {
			return false, 4 - n
		}
	}
	return false, 0
}

// step takes one byte outside a token.
func (a *arrayTracker) step(c byte) {
	switch c {
	case ' ', '\t', '\n', '\r':
	case '[':
		if a.place == arrayNotOpen && !a.values {
			a.place = arrayBefore
			return
		}
		a.push(false)
	case '{':
		a.push(true)
	case ']', '}':
		switch {
		case a.depth > 0:
			a.depth--
			a.valueDone()
		case c == ']' && (a.place == arrayBefore || a.place == arrayAfter):
			a.place = arrayClosed
		}
	case ',':
		switch {
		case a.depth > 0:
			a.expect, a.opened = expValue, false
			if a.inObject() {
				a.expect = expKey
			}
		case a.place == arrayAfter:
			a.place = arrayBefore
		}
	case ':':
		if a.depth > 0 && a.expect == expColon {
			a.expect = expValue
		}
	case '"':
		if a.depth > 0 && a.inObject() && a.expect == expKey {
			a.tok, a.opened = tokKey, false
			return
		}
		if a.startValue() {
			a.tok = tokString
		}
	case 't', 'f', 'n':
		if a.startValue() {
			a.tok, a.literal, a.matched = tokLiteral, literalOf(c), 1
		}
	default:
		if (isDigit(c) || c == '-') && a.startValue() {
			a.tok, a.digit = tokNumber, isDigit(c)
		}
	}
}

// push opens a container, as a value.
func (a *arrayTracker) push(object bool) {
	if !a.startValue() {
		return
	}
	a.depth++
	if a.depth <= maxTrackedDepth {
		bit := uint64(1) << (a.depth - 1)
		a.objects &^= bit
		if object {
			a.objects |= bit
		}
	}
	a.expect, a.opened = expValue, true
	if object {
		a.expect = expKey
	}
}

func (a *arrayTracker) inObject() bool {
	return a.depth <= maxTrackedDepth && a.objects&(1<<(a.depth-1)) != 0
}

// startValue starts a value where one may start, and reports whether one
// did: an element at the array's level, anything inside one.
func (a *arrayTracker) startValue() bool {
	if a.depth > 0 {
		a.opened = false
		return true
	}
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

// valueDone ends the value the tracker was in: a token, or a container
// just closed.
func (a *arrayTracker) valueDone() {
	a.tok = tokNone
	if a.depth > 0 {
		a.expect, a.opened = expNext, false
		return
	}
	if a.place != arrayInside {
		return // bytes after the array closed
	}
	if a.bare {
		a.place, a.bare = arrayClosed, false
		return
	}
	a.place = arrayAfter
}

// complete returns what makes the element the bytes were cut in a valid
// one: the rest of its token, a value for a key or a member left without
// one, and the brackets of its open containers; ok is false when that
// cannot be told (the element is nested deeper than maxTrackedDepth).
func (a *arrayTracker) complete() (out []byte, ok bool) {
	if a.depth > maxTrackedDepth {
		return nil, false
	}
	expect, opened := a.expect, a.opened
	switch a.tok {
	case tokString, tokKey:
		for range a.hex {
			out = append(out, '0')
		}
		if a.escaped {
			out = append(out, 'n')
		}
		out = append(out, '"')
		expect = expNext
		if a.tok == tokKey {
			expect = expColon
		}
	case tokNumber:
		if !a.digit {
			out = append(out, '0')
		}
		expect = expNext
	case tokLiteral:
		out = append(out, a.literal[a.matched:]...)
		expect = expNext
	}
	if a.depth == 0 {
		return out, true
	}
	switch {
	case expect == expColon:
		out = append(out, ":null"...)
	case expect == expValue && !opened:
		out = append(out, "null"...) // after a comma in an array, or a colon
	case expect == expKey && !opened:
		out = append(out, `"":null`...) // after a comma in an object
	}
	for d := a.depth; d > 0; d-- {
		if a.objects&(1<<(d-1)) != 0 {
			out = append(out, '}')
		} else {
			out = append(out, ']')
		}
	}
	return out, true
}

// closeWith ends a streamed array with obj as its last element: after the
// element the bytes were cut in, completed, and a comma; after the
// closing bracket nothing may follow but white space: a line end.
func (a *arrayTracker) closeWith(obj []byte) []byte {
	var out []byte
	switch a.place {
	case arrayClosed:
		return []byte("\n")
	case arrayNotOpen:
		out = append(out, '[')
	case arrayBefore:
	case arrayInside:
		rest, ok := a.complete()
		out = append(out, rest...)
		if a.bare {
			return append(append(append(out, '\n'), obj...), '\n')
		}
		if ok {
			out = append(out, ',')
		} else {
			out = append(out, "\n,"...) // past the depth kept: left as it is
		}
	default:
		out = append(out, ',')
	}
	out = append(out, obj...)
	return append(out, ']')
}

// backslashes counts the backslashes that end b.
func backslashes(b []byte) int {
	n := 0
	for n < len(b) && b[len(b)-1-n] == '\\' {
		n++
	}
	return n
}

// literalOf is the JSON literal that starts with c: t, f or n.
func literalOf(c byte) string {
	switch c {
	case 't':
		return "true"
	case 'f':
		return "false"
	}
	return "null"
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/streamstall/streamstall/internal/semconv"
)

// classifyChatFast classifies the common chat and completions frames in one
// pass over the bytes, with one allocation: the proxy classifies every frame
// of every stream, so this is on its per-chunk budget. It reports false for
// anything out of the ordinary (usage, errors, tool calls, values of
// unexpected types, duplicate or differently cased keys, escaped keys, lone
// surrogates, invalid UTF-8 in a value it keeps, deep nesting), which
// classifyChat then handles, so both always agree (FuzzChatFastPath).
func classifyChatFast(data []byte, f *Frame) bool {
	// One copy: every string kept below is a substring of it.
	sc := scanner{s: string(data)}
	sc.ws()
	var seen uint8
	ok := sc.object(func(key string) bool {
		switch key {
		case "id":
			return claim(&seen, 1) && sc.optString(&f.Meta.ResponseID)
		case "model":
			return claim(&seen, 2) && sc.optString(&f.Meta.ResponseModel)
		case "choices":
			return claim(&seen, 4) && (sc.null() || sc.array(func() bool { return sc.choice(f) }))
		case "usage":
			return claim(&seen, 8) && sc.null()
		case "error":
			return claim(&seen, 16) && sc.null()
		}
		return !foldsTo(key, "id", "model", "choices", "usage", "error") && sc.skip(0)
	})
	sc.ws()
	return ok && sc.i == len(sc.s)
}

// choice reads one element of "choices" into f.
func (sc *scanner) choice(f *Frame) bool {
	var (
		text, finish                                  string
		content, refusal, reasoningContent, reasoning string
		seen                                          uint8
	)
	delta := func(key string) bool {
		switch key {
		case "content":
			return claim(&seen, 8) && sc.optString(&content)
		case "refusal":
			return claim(&seen, 16) && sc.optString(&refusal)
		case "reasoning_content":
			return claim(&seen, 32) && sc.optString(&reasoningContent)
		case "reasoning":
			return claim(&seen, 64) && sc.optString(&reasoning)
		case "tool_calls", "function_call", "audio":
			// Rare: tool-call and audio deltas are left to classifyChat.
			return sc.null()
		}
		return !foldsTo(key, "content", "refusal", "reasoning_content", "reasoning", "tool_calls", "function_call", "audio") && sc.skip(1)
	}
	ok := sc.object(func(key string) bool {
		switch key {
		case "text":
			return claim(&seen, 1) && sc.optString(&text)
		case "finish_reason":
			return claim(&seen, 2) && sc.optString(&finish)
		case "delta":
			return claim(&seen, 4) && (sc.null() || sc.object(delta))
		}
		return !foldsTo(key, "text", "finish_reason", "delta") && sc.skip(1)
	})
	if !ok {
		return false
	}
	if finish != "" {
		f.Meta.FinishReasons = append(f.Meta.FinishReasons, finish)
	}
	if f.Kind == KindContent {
		return true
	}
	switch {
	case text != "":
		f.content(semconv.ChunkKindText, text)
	case content != "":
		f.content(semconv.ChunkKindText, content)
	case refusal != "":
		f.content(semconv.ChunkKindText, refusal)
	case reasoningContent != "":
		f.content(semconv.ChunkKindReasoning, reasoningContent)
	case reasoning != "":
		f.content(semconv.ChunkKindReasoning, reasoning)
	}
	return true
}

// claim marks a key as seen, refusing a duplicate (encoding/json would
// merge or overwrite; the slow path decides).
func claim(seen *uint8, bit uint8) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// foldsTo reports whether key differs from one of names only in case:
// encoding/json would match it to that field.
func foldsTo(key string, names ...string) bool {
	for _, n := range names {
		if strings.EqualFold(key, n) {
			return true
		}
	}
	return false
}

// maxSkipDepth bounds the nesting of values skipped over; deeper frames
// (none a provider sends) go to the slow path.
const maxSkipDepth = 32

// scanner reads one JSON text strictly (RFC 8259, as encoding/json does).
// Every method reports false on input it does not take, leaving the
// position undefined: the caller then gives up on the fast path.
type scanner struct {
	s string
	i int
}

func (sc *scanner) ws() {
	for sc.i < len(sc.s) {
		switch sc.s[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return
		}
	}
}

// next skips whitespace and reports whether the next byte is c, consuming it.
func (sc *scanner) next(c byte) bool {
	sc.ws()
	if sc.i < len(sc.s) && sc.s[sc.i] == c {
		sc.i++
		return true
	}
	return false
}

// object reads an object, calling member for each key with the position
// at the start of its value; member must consume the value.
func (sc *scanner) object(member func(key string) bool) bool {
	if !sc.next('{') {
		return false
	}
	if sc.next('}') {
		return true
	}
	for {
		sc.ws()
		key, escaped, ok := sc.rawString()
		// An escaped key may spell a field's name: the slow path decides.
		if !ok || escaped || !sc.next(':') {
			return false
		}
		sc.ws()
		if !member(key) {
			return false
		}
		if sc.next(',') {
			continue
		}
		return sc.next('}')
	}
}

// array reads an array, calling elem at the start of each element.
func (sc *scanner) array(elem func() bool) bool {
	if !sc.next('[') {
		return false
	}
	if sc.next(']') {
		return true
	}
	for {
		sc.ws()
		if !elem() {
			return false
		}
		if sc.next(',') {
			continue
		}
		return sc.next(']')
	}
}

// null consumes a null literal.
func (sc *scanner) null() bool { return sc.literal("null") }

func (sc *scanner) literal(lit string) bool {
	if strings.HasPrefix(sc.s[sc.i:], lit) {
		sc.i += len(lit)
		return true
	}
	return false
}

// optString reads a string or null into dst. A string encoding/json would
// repair (invalid UTF-8, lone surrogates) is left to the slow path.
func (sc *scanner) optString(dst *string) bool {
	if sc.null() {
		*dst = ""
		return true
	}
	raw, escaped, ok := sc.rawString()
	if !ok {
		return false
	}
	if escaped {
		raw, ok = unescape(raw)
		if !ok {
			return false
		}
	}
	if !utf8.ValidString(raw) {
		return false
	}
	*dst = raw
	return true
}

// rawString reads a string and returns its bytes between the quotes, still
// escaped, and whether it holds an escape.
func (sc *scanner) rawString() (raw string, escaped, ok bool) {
	if sc.i >= len(sc.s) || sc.s[sc.i] != '"' {
		return "", false, false
	}
	start := sc.i + 1
	for i := start; i < len(sc.s); i++ {
		switch c := sc.s[i]; {
		case c == '"':
			sc.i = i + 1
			return sc.s[start:i], escaped, true
		case c == '\\':
			escaped = true
			i++
			if i >= len(sc.s) {
				return "", false, false
			}
			switch sc.s[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(sc.s) || !isHex4(sc.s[i+1:i+5]) {
					return "", false, false
				}
				i += 4
			default:
				return "", false, false
			}
		case c < 0x20:
			return "", false, false
		}
	}
	return "", false, false
}

func isHex4(s string) bool {
	for i := range 4 {
		if hexVal(s[i]) < 0 {
			return false
		}
	}
	return true
}

func hexVal(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// unescape decodes the escapes of a string rawString validated. It refuses
// lone surrogates, which encoding/json replaces with U+FFFD.
func unescape(raw string) (string, bool) {
	var b strings.Builder
	b.Grow(len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		switch raw[i] {
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r := hex4(raw[i+1:])
			i += 4
			if utf16.IsSurrogate(r) {
				if i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
					return "", false
				}
				r = utf16.DecodeRune(r, hex4(raw[i+3:]))
				if r == utf8.RuneError {
					return "", false
				}
				i += 6
			}
			b.WriteRune(r)
		default: // '"', '\\', '/'
			b.WriteByte(raw[i])
		}
	}
	return b.String(), true
}

func hex4(s string) rune {
	return hexVal(s[0])<<12 | hexVal(s[1])<<8 | hexVal(s[2])<<4 | hexVal(s[3])
}

// skip consumes any one value, validating it.
func (sc *scanner) skip(depth int) bool {
	if depth > maxSkipDepth || sc.i >= len(sc.s) {
		return false
	}
	switch c := sc.s[sc.i]; {
	case c == '"':
		_, _, ok := sc.rawString()
		return ok
	case c == '{':
		return sc.object(func(string) bool { return sc.skip(depth + 1) })
	case c == '[':
		return sc.array(func() bool { return sc.skip(depth + 1) })
	case c == 't':
		return sc.literal("true")
	case c == 'f':
		return sc.literal("false")
	case c == 'n':
		return sc.null()
	case c == '-' || ('0' <= c && c <= '9'):
		return sc.number()
	}
	return false
}

// number consumes a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (sc *scanner) number() bool {
	if sc.s[sc.i] == '-' {
		sc.i++
	}
	switch {
	case sc.i < len(sc.s) && sc.s[sc.i] == '0':
		sc.i++
	case sc.digits() == 0:
		return false
	}
	if sc.i < len(sc.s) && sc.s[sc.i] == '.' {
		sc.i++
		if sc.digits() == 0 {
			return false
		}
	}
	if sc.i < len(sc.s) && (sc.s[sc.i] == 'e' || sc.s[sc.i] == 'E') {
		sc.i++
		if sc.i < len(sc.s) && (sc.s[sc.i] == '+' || sc.s[sc.i] == '-') {
			sc.i++
		}
		if sc.digits() == 0 {
			return false
		}
	}
	return true
}

func (sc *scanner) digits() int {
	n := 0
	for sc.i < len(sc.s) && '0' <= sc.s[sc.i] && sc.s[sc.i] <= '9' {
		sc.i++
		n++
	}
	return n
}

// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package truncate cuts strings to a length bound without splitting a
// UTF-8 encoded character, for attribute values taken from untrusted input.
package truncate

import (
	"strings"
	"unicode/utf8"
)

// UTF8 returns s when it is at most limit bytes long, else its longest
// prefix of at most limit bytes that does not end inside a UTF-8 encoded
// character (a character is never split; invalid bytes count as one
// character each). A cut prefix is a copy, so that a short value does not
// keep a long input alive. A limit of zero or less yields "".
func UTF8(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	if limit <= 0 {
		return ""
	}
	return strings.Clone(s[:cut(s, limit)])
}

// cut returns where to cut s (longer than limit) so that the prefix is at
// most limit bytes and does not split an encoded character.
func cut(s string, limit int) int {
	// The character that s[limit] belongs to starts at most UTFMax-1 bytes
	// before it.
	for i := limit; i >= 0 && i > limit-utf8.UTFMax; i-- {
		if !utf8.RuneStart(s[i]) {
			continue
		}
		if i == limit {
			return limit // the limit falls between two characters
		}
		if _, size := utf8.DecodeRuneInString(s[i:]); size > limit-i {
			return i // a valid character straddles the limit: cut before it
		}
		// An invalid byte: the continuation bytes after it up to the limit
		// are invalid bytes of their own.
		return limit
	}
	// Only continuation bytes before the limit: invalid bytes of their own.
	return limit
}

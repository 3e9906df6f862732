// Package textcap bounds the length of recorded text: a value taken from a
// request, a response or a span attribute is cut to a maximum number of
// bytes, on a UTF-8 boundary, before it is kept.
package textcap

import "unicode/utf8"

// TruncateUTF8 returns the longest prefix of s that is at most maxBytes
// bytes long and does not end inside a UTF-8 encoded character. When s is
// valid UTF-8 the result is too. A string that is not valid UTF-8 at the cut
// (no character starts within utf8.UTFMax bytes before it) is cut at
// maxBytes exactly. A string that fits is returned as is, without copying;
// a cut string shares the memory of s (use strings.Clone to keep it alone).
// maxBytes <= 0 gives "".
func TruncateUTF8(s string, maxBytes int) string {
	if len(s) <= maxBytes {
		return s
	}
	if maxBytes <= 0 {
		return ""
	}
	// s[maxBytes] is the first byte left out: if it continues a character,
	// that character starts at most utf8.UTFMax-1 bytes earlier.
	for cut := maxBytes; cut > maxBytes-utf8.UTFMax && cut >= 0; cut-- {
		if utf8.RuneStart(s[cut]) {
			return s[:cut]
		}
	}
	return s[:maxBytes]
}

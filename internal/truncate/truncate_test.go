// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package truncate

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestUTF8(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		limit int
		want  string
	}{
		{"short", "gpt-4o", 16, "gpt-4o"},
		{"exact", "gpt-4o", 6, "gpt-4o"},
		{"ascii cut", "gpt-4o-mini", 6, "gpt-4o"},
		{"zero", "gpt", 0, ""},
		{"negative", "gpt", -1, ""},
		{"empty", "", 0, ""},
		// é is 2 bytes, € 3, 😀 4.
		{"two-byte rune at the cut", "abé", 3, "ab"},
		{"two-byte rune ends at the cut", "abéc", 4, "abé"},
		{"three-byte rune, 1 byte in", "a€b", 2, "a"},
		{"three-byte rune, 2 bytes in", "a€b", 3, "a"},
		{"three-byte rune ends at the cut", "a€b", 4, "a€"},
		{"four-byte rune, 1 byte in", "a😀b", 2, "a"},
		{"four-byte rune, 3 bytes in", "a😀b", 4, "a"},
		{"four-byte rune ends at the cut", "a😀b", 5, "a😀"},
		{"only a multi-byte rune, cut inside", "😀", 3, ""},
		{"invalid bytes count one each", "a\xffb\xffc", 3, "a\xffb"},
		{"stray continuation bytes", "\x80\x80\x80\x80\x80", 3, "\x80\x80\x80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := UTF8(tt.in, tt.limit)
			assert.Equal(t, tt.want, got)
			assert.LessOrEqual(t, len(got), max(tt.limit, 0))
		})
	}
}

func TestUTF8CopiesACutValue(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	got := UTF8(long, 8)
	assert.Equal(t, "xxxxxxxx", got)
	assert.NotSame(t, &[]byte(long)[0], &[]byte(got)[0])
	assert.Equal(t, 0, int(testing.AllocsPerRun(10, func() { _ = UTF8("short", 8) })), "no copy when nothing is cut")
}

func FuzzUTF8(f *testing.F) {
	for _, s := range []string{"gpt-4o", "abé", "a€b", "a😀b", "\xff\x80\x80", "日本語のモデル名", ""} {
		for _, n := range []int{0, 1, 2, 3, 4, 5, 64} {
			f.Add(s, n)
		}
	}
	f.Fuzz(func(t *testing.T, s string, limit int) {
		got := UTF8(s, limit)
		if len(s) <= limit {
			assert.Equal(t, s, got, "nothing to cut")
			return
		}
		assert.LessOrEqual(t, len(got), max(limit, 0), "within the limit")
		assert.True(t, strings.HasPrefix(s, got), "a prefix of the input")
		if limit <= 0 {
			return
		}
		// No character is split: what is cut off starts on a character
		// boundary, and at most one character (UTFMax-1 bytes of it) lies
		// between the cut and the limit.
		assert.True(t, utf8.RuneStart(s[len(got)]) || len(got) == limit, "cut at a character start")
		assert.Greater(t, len(got), limit-utf8.UTFMax, "no more cut than one character")
		if utf8.ValidString(s) {
			assert.True(t, utf8.ValidString(got), "a valid input gives a valid prefix")
			r, size := utf8.DecodeRuneInString(s[len(got):])
			assert.NotEqual(t, utf8.RuneError, r)
			assert.Greater(t, len(got)+size, limit, "the next character would not have fit")
		}
	})
}

package textcap

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestTruncateUTF8(t *testing.T) {
	tests := []struct {
		s    string
		max  int
		want string
	}{
		{"gpt-4o", 256, "gpt-4o"},
		{"gpt-4o", 6, "gpt-4o"},
		{"gpt-4o", 3, "gpt"},
		{"gpt-4o", 0, ""},
		{"gpt-4o", -1, ""},
		{"", 0, ""},
		{"héllo", 2, "h"},  // é is 2 bytes: not cut in half
		{"héllo", 3, "hé"}, // exactly after é
		{"日本語", 5, "日"},    // 3-byte characters
		{"日本語", 6, "日本"},
		{"a😀b", 4, "a"}, // a 4-byte character cut at each of its bytes
		{"a😀b", 3, "a"},
		{"a😀b", 2, "a"},
		{"a😀b", 5, "a😀"},
		{"😀", 3, ""},
		{"ab\x80\x80\x80\x80\x80", 5, "ab\x80\x80\x80"}, // invalid: no start within 4 bytes
		{"\x80\x80", 1, "\x80"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, TruncateUTF8(tt.s, tt.max), "%q at %d", tt.s, tt.max)
	}
}

func FuzzTruncateUTF8(f *testing.F) {
	for _, s := range []string{"", "gpt-4o", "héllo", "日本語", "a😀b", "\xff\xfe", strings.Repeat("é", 300)} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, maxBytes int) {
		got := TruncateUTF8(s, maxBytes)
		if !strings.HasPrefix(s, got) {
			t.Fatalf("%q is not a prefix of %q", got, s)
		}
		if maxBytes <= 0 {
			if got != "" {
				t.Fatalf("%q at %d bytes: want nothing", got, maxBytes)
			}
			return
		}
		if len(s) <= maxBytes {
			if got != s {
				t.Fatalf("%q fits in %d bytes but became %q", s, maxBytes, got)
			}
			return
		}
		if len(got) > maxBytes {
			t.Fatalf("%q is longer than %d bytes", got, maxBytes)
		}
		if len(got) < maxBytes-(utf8.UTFMax-1) {
			t.Fatalf("%q cut more than a character short of %d bytes", got, maxBytes)
		}
		if utf8.ValidString(s) && (!utf8.ValidString(got) || !utf8.RuneStart(s[len(got)])) {
			t.Fatalf("%q cut %q inside a character", s, got)
		}
	})
}

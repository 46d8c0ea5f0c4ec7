package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A cut never splits a rune: a string of 3-byte runes cut at 64 bytes ends
// at 63, valid UTF-8 (a byte cut would leave half a rune in a log line).
func TestCutNeverSplitsARune(t *testing.T) {
	s := strings.Repeat("€", 40) // 120 bytes
	head, cut := Cut(s, 64)
	if !cut || len(head) != 63 || !utf8.ValidString(head) {
		t.Errorf("Cut(120 bytes of €, 64) = %d bytes (valid %v), cut %v; want 63 valid bytes, cut", len(head), utf8.ValidString(head), cut)
	}
	if got := Ellipsis(s, 64); !utf8.ValidString(got) || got != head+"…" {
		t.Errorf("Ellipsis = %q, want the cut with …", got)
	}
}

// A string within the bound is returned whole, not marked.
func TestCutKeepsAStringThatFits(t *testing.T) {
	for _, s := range []string{"", "abc", strings.Repeat("a", 64)} {
		if got, cut := Cut(s, 64); got != s || cut {
			t.Errorf("Cut(%q, 64) = %q, %v; want it whole", s, got, cut)
		}
		if got := Ellipsis(s, 64); got != s {
			t.Errorf("Ellipsis(%q, 64) = %q", s, got)
		}
	}
	if got, cut := Cut("abc", -1); got != "" || !cut {
		t.Errorf("Cut(abc, -1) = %q, %v; want empty, cut", got, cut)
	}
}

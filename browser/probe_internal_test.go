package browser

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A server's reply is quoted to at most maxReplyText bytes, cut on a rune boundary.
func TestFirstLineIsBounded(t *testing.T) {
	long := strings.Repeat("é", 10000) + "\nsecond line"
	got := firstLine(long)
	if len(got) > maxReplyText+len("…") || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
		t.Fatalf("firstLine of a %d-byte reply: %d bytes, valid UTF-8 %v, suffix %q", len(long), len(got), utf8.ValidString(got), got[len(got)-3:])
	}
	if firstLine("ERR short\nmore") != "ERR short" {
		t.Fatalf("a short first line is kept whole")
	}
}

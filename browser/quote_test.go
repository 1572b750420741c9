package browser

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzAppendQuoted checks the hand-written JSON quoting of values against the decoder:
// every valid UTF-8 string comes back unchanged, and is quoted as json.Marshal quotes it
// (but for HTML characters, which the encoder escapes afterwards).
func FuzzAppendQuoted(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "\x00\x01\x1f\x7f\n\r\t", "\b\f", "é漢字🙂", "\u2028\u2029", "<a&b>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		got := appendQuoted(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q quoted as %s: %v", s, got, err)
		}
		if back != s {
			t.Fatalf("%q quoted as %s came back as %q", s, got, back)
		}
		via, err := json.Marshal(bstr(s))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(s)
		if string(via) != string(want) {
			t.Fatalf("bstr %q encodes as %s, json.Marshal as %s", s, via, want)
		}
	})
}

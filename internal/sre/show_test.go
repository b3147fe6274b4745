package sre

import (
	"testing"
	"unicode/utf8"
)

// oneLine folds whitespace and clips at a rune boundary to at most max
// bytes, "..." included.
func TestOneLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"ship  the\n\tfix", 20, "ship the fix"},
		{"abcdefghij", 10, "abcdefghij"},
		{"abcdefghijk", 10, "abcdefg..."},
		{"ééééé", 8, "éé..."}, // 10 bytes: the cut at byte 5 falls inside the third é
	} {
		got := oneLine(tc.in, tc.max)
		if got != tc.want || len(got) > tc.max || !utf8.ValidString(got) {
			t.Errorf("oneLine(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

package suggest

import (
	"slices"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"show", "show", 0},
		{"shwo", "show", 1}, // a swap of two adjacent letters
		{"lss", "ls", 1},
		{"verfy", "verify", 1},
		{"", "tail", 4},
		{"ab", "ba", 1},
		{"ca", "abc", 3}, // optimal string alignment: no edit of a swapped pair
		{"writer", "forker", 4},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestNear(t *testing.T) {
	names := []string{"erase", "eraser", "ls", "repair", "repairer", "show", "tail"}
	for _, tc := range []struct {
		name  string
		limit int
		want  []string
	}{
		{"shwo", 2, []string{"show"}},
		{"erasr", 2, []string{"erase", "eraser"}}, // ties, in the candidates' order
		{"repairr", 2, []string{"repair", "repairer"}},
		{"lss", 1, []string{"ls"}},
		{"xyz", 1, nil},
		{"tial", 0, nil},
	} {
		if got := Near(tc.name, names, tc.limit); !slices.Equal(got, tc.want) {
			t.Errorf("Near(%q, %d) = %q, want %q", tc.name, tc.limit, got, tc.want)
		}
	}
}

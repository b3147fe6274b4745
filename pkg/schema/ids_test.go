package schema

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// The hand-written id and type checks must accept exactly what the
// grammars of DESIGN.md accept: compare them with the regular expressions
// on edge cases and on random strings over an alphabet that includes
// every class boundary.
func TestIDChecksMatchGrammar(t *testing.T) {
	grammars := []struct {
		name string
		re   *regexp.Regexp
		fn   func(string) bool
	}{
		{"session id", regexp.MustCompile(sessionIDPattern), ValidSessionID},
		{"item id", regexp.MustCompile(itemIDPattern), ValidItemID},
		{"type", regexp.MustCompile(`^[a-z][a-z0-9_-]*(/[a-z][a-z0-9_-]*)+$`), func(s string) bool { return ValidTypeName(s) }},
	}
	edge := []string{
		"", "a", "A", "0", "_", "-", ".", ":", "/", "a/b", "a/", "/a", "a//b", "a/b/c", "a/B", "A/b",
		"a/0", "a0/b_", "a-/b-", "tool/started", "session/created", "x.y", "x:y", "é", "a\x00", "a\n",
		strings.Repeat("a", 128), strings.Repeat("a", 129), strings.Repeat("a", 30) + "/" + strings.Repeat("b", 33),
		strings.Repeat("a", 31) + "/" + strings.Repeat("b", 33),
	}
	alphabet := []byte("azAZ09_-.:/ \x00\xff")
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		n := rng.IntN(12)
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		edge = append(edge, string(b))
	}
	for _, g := range grammars {
		for _, s := range edge {
			want := g.re.MatchString(s)
			if g.name == "type" {
				want = want && len(s) <= 64
			}
			if got := g.fn(s); got != want {
				t.Fatalf("%s %q: got %v, the grammar says %v", g.name, s, got, want)
			}
		}
	}
}

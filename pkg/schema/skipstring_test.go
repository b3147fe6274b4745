package schema

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// skipStringBytes is skipString a byte at a time, as it was written
// before: a backslash escapes the byte after it, the first other quote
// ends the string.
func skipStringBytes(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipString, which finds quotes with bytes.IndexByte and counts the
// backslashes before each, ends every string where the byte by byte walk
// ends it, closed or not, valid JSON or not.
func TestSkipStringIsByteLoop(t *testing.T) {
	for _, s := range []string{`""`, `"a"`, `"\""`, `"\\"`, `"\\\""x"`, `"\\\\"`, `"a\`, `"a\"`, `"\\\`, `"`, `x"\"y"`, `\\"a"`} {
		for i := range len(s) {
			if got, want := skipString([]byte(s), i), skipStringBytes([]byte(s), i); got != want {
				t.Fatalf("skipString(%q, %d) = %d, want %d", s, i, got, want)
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte{'a', '\\', '"', 'x', 0, 0xff, '\\'}
	b := make([]byte, 48)
	for range 200_000 {
		n := r.IntN(len(b)) + 1
		b[0] = '"'
		for k := 1; k < n; k++ {
			b[k] = alphabet[r.IntN(len(alphabet))]
		}
		i := r.IntN(n)
		if got, want := skipString(b[:n], i), skipStringBytes(b[:n], i); got != want {
			t.Fatalf("skipString(%q, %d) = %d, want %d", b[:n], i, got, want)
		}
	}
}

// A message's text of about 1 KiB with an escape every 100 bytes or so,
// skipped as the search index skips it: Index (skipString) and Bytes (a
// byte at a time).
func BenchmarkSkipString(b *testing.B) {
	s := []byte(`"` + strings.Repeat(`Read the failing test and fix it.\n Then \"run\" it again, `, 18) + `"`)
	for _, c := range []struct {
		name string
		skip func([]byte, int) int
	}{{"Index", skipString}, {"Bytes", skipStringBytes}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				if c.skip(s, 0) != len(s) {
					b.Fatal("not skipped whole")
				}
			}
		})
	}
}

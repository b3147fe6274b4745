package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

var jsonSeeds = []string{
	`{}`, `[]`, `""`, `0`, `-0.5e+10`, `1E3`, `true`, `null`, ` {"a":1} `,
	`{"a":1,"a":2}`, `{"a":1,"b":{"a":2}}`, `{"a\u0062":1,"ab":2}`, `{"\ud800":1,"\udbff":2}`,
	`{"a":[1,2,{"b":null}],"c":"x\"y\\z\n"}`, `{"a":1}x`, `{"a":1} {}`, ``, `   `, `{`, `[1,]`, `{"a":}`,
	`01`, `1.`, `.5`, `-`, `+1`, `1e`, `"\x"`, "\"a\x01\"", `"\u12"`, `tru`, `nul`, `[`, `{"a" 1}`, `{1:2}`,
	"\"\xff\"", strings.Repeat("[", 64) + strings.Repeat("]", 64), strings.Repeat("[", 65) + strings.Repeat("]", 65),
	`{"sessionId":"s1","events":[{"type":"message/user","data":{"content":"hi"}}]}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"a":18}`,
}

func sameVerdict(t *testing.T, b []byte) {
	got, want := CheckJSON(b, MaxJSONDepth), refCheckJSON(b, MaxJSONDepth)
	if (got == nil) != (want == nil) {
		t.Fatalf("%q: CheckJSON = %v, reference = %v", b, got, want)
	}
}

func TestCheckJSONMatchesReference(t *testing.T) {
	for _, s := range jsonSeeds {
		sameVerdict(t, []byte(s))
	}
}

// FuzzCheckJSON holds the one-pass checker to the Token-based reference.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameVerdict(t, b) })
}

// BenchmarkCheckJSON shows what the hand-written checker buys over the
// library: json.Valid and json.Unmarshal into a json.RawMessage read the
// grammar only (they cannot see duplicated keys or lone surrogates, so
// they could not replace it alone), the reference makes every check with
// json.Decoder.Token. The other rows report their time over CheckJSON's
// (x-CheckJSON).
func BenchmarkCheckJSON(b *testing.B) {
	docs := []struct {
		name string
		doc  []byte
	}{
		{"request", []byte(`{"sessionId":"01JD8X4Y5Z6A7B8C9D0E1F2G3H","expectedSeq":41,"events":[{"type":"tool/call","eventId":"01JD8X4Y5Z6A7B8C9D0E1F2G3J","turnId":"t1","toolCallId":"c1","data":{"name":"read_file","arguments":{"path":"/src/main.go","offset":0,"limit":2000}}}]}`)},
		{"data4k", []byte(`{"content":"` + strings.Repeat("lorem ipsum dolor sit amet, ", 146) + `","lines":[` + strings.Repeat(`{"n":1,"text":"x"},`, 20) + `{"n":2,"text":"y"}]}`)},
	}
	paths := []struct {
		name  string
		check func([]byte) bool
	}{
		{"CheckJSON", func(d []byte) bool { return CheckJSON(d, MaxJSONDepth) == nil }},
		{"jsonValid", json.Valid},
		{"UnmarshalRaw", func(d []byte) bool { var r json.RawMessage; return json.Unmarshal(d, &r) == nil }},
		{"reference", func(d []byte) bool { return refCheckJSON(d, MaxJSONDepth) == nil }},
	}
	for _, doc := range docs {
		var fastNs float64
		for _, path := range paths {
			b.Run(doc.name+"/"+path.name, func(b *testing.B) {
				b.SetBytes(int64(len(doc.doc)))
				b.ReportAllocs()
				for b.Loop() {
					if !path.check(doc.doc) {
						b.Fatal("refused")
					}
				}
				ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				if path.name == "CheckJSON" {
					fastNs = ns
				} else if fastNs > 0 {
					b.ReportMetric(ns/fastNs, "x-CheckJSON")
				}
			})
		}
	}
}

type refFrame struct {
	keys map[string]struct{} // nil for arrays
	key  bool                // in an object, the next token is a key
}

// refCheckJSON is the reference CheckJSON is held to: the same checks
// made with json.Decoder.Token (which reads the grammar) and a second
// pass for lone surrogate escapes. It was the package's checker before
// the one-pass scanner replaced it.
func refCheckJSON(b []byte, maxDepth int) error {
	if !utf8.Valid(b) {
		return errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var stack []*refFrame
	values := 0
	valueDone := func() {
		if len(stack) == 0 {
			values++
			return
		}
		if top := stack[len(stack)-1]; top.keys != nil {
			top.key = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if values > 0 {
			return errors.New("trailing data after JSON value")
		}
		if n := len(stack); n > 0 && stack[n-1].keys != nil && stack[n-1].key {
			if k, ok := tok.(string); ok {
				top := stack[n-1]
				if _, dup := top.keys[k]; dup {
					return fmt.Errorf("duplicated key %q", Clip(k, 40))
				}
				top.keys[k] = struct{}{}
				top.key = false
				continue
			}
		}
		switch d := tok.(type) {
		case json.Delim:
			switch d {
			case '{', '[':
				if len(stack) >= maxDepth {
					return fmt.Errorf("nested deeper than %d levels", maxDepth)
				}
				f := &refFrame{}
				if d == '{' {
					f.keys, f.key = map[string]struct{}{}, true
				}
				stack = append(stack, f)
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		default:
			valueDone()
		}
	}
	if values != 1 {
		return errors.New("empty document")
	}
	return refCheckSurrogates(b)
}

// refCheckSurrogates refuses a \u escape of a lone UTF-16 surrogate:
// encoding/json reads it as U+FFFD, other readers keep or refuse it. b is
// well-formed JSON, so every backslash starts an escape inside a string.
func refCheckSurrogates(b []byte) error {
	hex4 := func(i int) rune {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return -1
		}
		var r rune
		for _, h := range b[i+2 : i+6] {
			switch {
			case h >= '0' && h <= '9':
				r = r<<4 | rune(h-'0')
			case h >= 'a' && h <= 'f':
				r = r<<4 | rune(h-'a'+10)
			case h >= 'A' && h <= 'F':
				r = r<<4 | rune(h-'A'+10)
			default:
				return -1
			}
		}
		return r
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		r := hex4(i)
		switch {
		case r < 0:
			i++ // a two-byte escape
		case r >= 0xDC00 && r <= 0xDFFF:
			return errors.New("lone low surrogate \\u escape")
		case r >= 0xD800 && r <= 0xDBFF:
			if lo := hex4(i + 6); lo < 0xDC00 || lo > 0xDFFF {
				return errors.New("lone high surrogate \\u escape")
			}
			i += 11
		default:
			i += 5
		}
	}
	return nil
}

// Clip cuts at a rune boundary and says where it cut.
func TestClip(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 40, "short"},
		{"abcdef", 3, "abc..."},
		{"ab€cd", 3, "ab..."}, // € is 3 bytes: not cut inside it
		{"ab€cd", 5, "ab€..."},
	} {
		if got := Clip(c.in, c.n); got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// CheckJSON finds a duplicated key wherever it stands in an object:
// among an object's first keys (held in a fixed array), on the key that
// hands the check to a map and past it, and when the two keys are equal
// only once unescaped ("a" and "\u0061", as encoding/json reads them).
// Keys that differ, or are the same in different objects, are not
// duplicates.
func TestCheckJSONDuplicatedKeys(t *testing.T) {
	// keys: n distinct keys k0..k(n-1) as object members.
	keys := func(n int) string {
		var s strings.Builder
		for i := range n {
			fmt.Fprintf(&s, `"k%d":%d,`, i, i)
		}
		return s.String()
	}
	for _, c := range []struct{ doc, err string }{
		{`{"a":1,"a":2}`, `duplicated key "a"`},
		{`{"a":1,"\u0061":2}`, `duplicated key "a"`},
		{`{"\u0061":1,"a":2}`, `duplicated key "a"`},
		{`{"a\u0062":1,"ab":2}`, `duplicated key "ab"`},
		{`{"\n":1,"\u000a":2}`, `duplicated key "\n"`},
		{`{"é":1,"\u00e9":2}`, `duplicated key "é"`},
		{`{"😀":1,"\ud83d\ude00":2}`, `duplicated key "😀"`},
		{`{"":1,"":2}`, `duplicated key ""`},
		{`{"x":{"a":1,"b":{"c":1,"c":2}}}`, `duplicated key "c"`},
		{`{` + keys(15) + `"k3":0}`, `duplicated key "k3"`},
		{`{` + keys(16) + `"k0":0}`, `duplicated key "k0"`},
		{`{` + keys(16) + `"k15":0}`, `duplicated key "k15"`},
		{`{` + keys(17) + `"k16":0}`, `duplicated key "k16"`},
		{`{` + keys(17) + `"k0":0}`, `duplicated key "k0"`},
		{`{` + keys(40) + `"\u006b39":0}`, `duplicated key "k39"`},
		{`{` + keys(40) + `"k7":0}`, `duplicated key "k7"`},
		{`{"` + strings.Repeat("y", 50) + `":1,"` + strings.Repeat("y", 50) + `":2}`, `duplicated key "` + strings.Repeat("y", 40) + `..."`},
		{`{"a":1,"A":2,"a ":3,"\u0062":4,"c":{"a":1},"d":[{"a":1},{"a":2}]}`, ``},
		{`{` + keys(40) + `"k40":0}`, ``},
		{`{` + keys(16) + `"\u006b16":0}`, ``},
	} {
		err := CheckJSON([]byte(c.doc), MaxJSONDepth)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.err {
			t.Errorf("CheckJSON(%s) = %q, want %q", c.doc, got, c.err)
		}
		sameVerdict(t, []byte(c.doc))
	}
}

// PlainRun, eight bytes at a time, stops where a byte by byte walk stops:
// at the first quote, backslash or control byte, wherever it stands in
// its word and whatever bytes (0x80 and over, bytes next to the ones it
// looks for) stand around it.
func TestPlainRunIsByteLoop(t *testing.T) {
	byteLoop := func(b []byte, i int) int {
		for i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 {
			i++
		}
		return i
	}
	r := rand.New(rand.NewPCG(5, 6))
	alphabet := []byte{'a', '"', '\\', 0, 0x1f, 0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff}
	b := make([]byte, 40)
	for range 200_000 {
		n := r.IntN(len(b) + 1)
		for j := range n {
			b[j] = 'a'
			if r.IntN(4) == 0 {
				b[j] = alphabet[r.IntN(len(alphabet))]
			}
		}
		for i := 0; i <= n; i++ {
			if got, want := PlainRun(b[:n], i), byteLoop(b[:n], i); got != want {
				t.Fatalf("PlainRun(%q, %d) = %d, want %d", b[:n], i, got, want)
			}
		}
	}
}

// TestPlainRunEveryByte: in a word of eight, PlainRun stops at the first
// quote, backslash or control byte, for each byte value at each place among
// others (of both halves of the byte range), with a quote at each place
// after it.
func TestPlainRunEveryByte(t *testing.T) {
	first := func(w [8]byte) int {
		for i, c := range w {
			if c == '"' || c == '\\' || c < 0x20 {
				return i
			}
		}
		return 8
	}
	for _, fill := range []byte{'a', 0x20, 0x7f, 0x80, 0xff, 0x21, 0x5d} {
		for at := range 8 {
			for c := range 256 {
				w := [8]byte{fill, fill, fill, fill, fill, fill, fill, fill}
				w[at] = byte(c)
				for at2 := at; at2 <= 8; at2++ {
					w2 := w
					if at2 < 8 {
						w2[at2] = '"'
					}
					if got, want := PlainRun(w2[:], 0), first(w2); got != want {
						t.Fatalf("PlainRun(%q, 0) = %d, want %d", w2, got, want)
					}
				}
			}
		}
	}
}

package schema

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"unicode/utf8"
)

// CheckJSON checks that b is exactly one well-formed JSON value, in valid
// UTF-8, with no duplicated object keys, no lone UTF-16 surrogate escape,
// nested at most maxDepth deep. encoding/json silently keeps the last of
// duplicated keys and replaces invalid UTF-8 and lone surrogates with
// U+FFFD: a log must not store a document two readers could read
// differently.
//
// It is one pass over the bytes: json.Valid cannot see duplicated keys
// or lone surrogates, and json.Decoder.Token allocates per token (it was
// the largest cost of parsing an append request). BenchmarkCheckJSON
// compares it with both; FuzzCheckJSON holds its verdicts to a
// Token-based reference.
func CheckJSON(b []byte, maxDepth int) error {
	if !utf8.Valid(b) {
		return errors.New("not valid UTF-8")
	}
	p := &JSONScanner{B: b, MaxDepth: maxDepth}
	p.WS()
	if p.I == len(b) {
		return errors.New("empty document")
	}
	if err := p.Value(0); err != nil {
		return err
	}
	p.WS()
	if p.I != len(b) {
		return errors.New("trailing data after JSON value")
	}
	return nil
}

// JSONScanner reads JSON by CheckJSON's rules. CheckJSON is its one
// complete use; a decoder that builds a value while it checks (the
// writer's append request) embeds it and reads its own fields with these
// steps, so the grammar is written once.
type JSONScanner struct {
	B        []byte // the document
	I        int    // offset of the next byte to read
	MaxDepth int    // objects and arrays nest at most this deep
}

// Sep reads what follows a member of an object or array: a comma (more
// to come) or the closing byte (done).
func (p *JSONScanner) Sep(closing byte, what string) (done bool, err error) {
	p.WS()
	if p.I >= len(p.B) {
		return false, p.Errf("unterminated %s", what)
	}
	switch p.B[p.I] {
	case ',':
		p.I++
		return false, nil
	case closing:
		p.I++
		return true, nil
	}
	return false, p.Errf("expected , or %c", closing)
}

// WS skips whitespace.
func (p *JSONScanner) WS() {
	for p.I < len(p.B) {
		switch p.B[p.I] {
		case ' ', '\t', '\n', '\r':
			p.I++
		default:
			return
		}
	}
}

// Errf is a syntax error at the current offset.
func (p *JSONScanner) Errf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", p.I, fmt.Sprintf(format, args...))
}

// Value scans one value at I, which nests in depth objects or arrays.
func (p *JSONScanner) Value(depth int) error {
	if p.I >= len(p.B) {
		return p.Errf("unexpected end")
	}
	switch c := p.B[p.I]; {
	case c == '{':
		if depth >= p.MaxDepth {
			return fmt.Errorf("nested deeper than %d levels", p.MaxDepth)
		}
		return p.object(depth + 1)
	case c == '[':
		if depth >= p.MaxDepth {
			return fmt.Errorf("nested deeper than %d levels", p.MaxDepth)
		}
		return p.array(depth + 1)
	case c == '"':
		_, _, err := p.Str()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return p.Number()
	case c == 't':
		return p.Lit("true")
	case c == 'f':
		return p.Lit("false")
	case c == 'n':
		return p.Lit("null")
	}
	return p.Errf("unexpected character %q", p.B[p.I])
}

// Lit scans the literal s (true, false, null).
func (p *JSONScanner) Lit(s string) error {
	if len(p.B)-p.I < len(s) || string(p.B[p.I:p.I+len(s)]) != s {
		return p.Errf("invalid literal")
	}
	p.I += len(s)
	return nil
}

func jsonDigits(b []byte, i int) int {
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	return j
}

// Number scans a number at I.
func (p *JSONScanner) Number() error {
	b, i := p.B, p.I
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = jsonDigits(b, i)
	default:
		return p.Errf("invalid number")
	}
	if i < len(b) && b[i] == '.' {
		j := jsonDigits(b, i+1)
		if j == i+1 {
			return p.Errf("invalid number")
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := jsonDigits(b, i)
		if j == i {
			return p.Errf("invalid number")
		}
		i = j
	}
	p.I = i
	return nil
}

// Str scans a string at I; it returns its raw bytes (quotes included) and
// whether it holds an escape.
func (p *JSONScanner) Str() ([]byte, bool, error) {
	start := p.I
	p.I++
	esc := false
	for p.I < len(p.B) {
		c := p.B[p.I]
		switch {
		case c == '"':
			p.I++
			return p.B[start:p.I], esc, nil
		case c == '\\':
			esc = true
			if p.I+1 >= len(p.B) {
				return nil, false, p.Errf("unterminated string")
			}
			switch p.B[p.I+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.I += 2
			case 'u':
				if p.I+6 > len(p.B) {
					return nil, false, p.Errf("invalid \\u escape")
				}
				r, ok := Hex4(p.B[p.I+2 : p.I+6])
				if !ok {
					return nil, false, p.Errf("invalid \\u escape")
				}
				p.I += 6
				// A surrogate escape must be a pair: readers disagree on a
				// lone one (Go reads U+FFFD, others keep or refuse it).
				switch {
				case r >= 0xDC00 && r <= 0xDFFF:
					return nil, false, p.Errf("lone low surrogate \\u escape")
				case r >= 0xD800 && r <= 0xDBFF:
					lo, ok := rune(0), p.I+6 <= len(p.B) && p.B[p.I] == '\\' && p.B[p.I+1] == 'u'
					if ok {
						lo, ok = Hex4(p.B[p.I+2 : p.I+6])
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return nil, false, p.Errf("lone high surrogate \\u escape")
					}
					p.I += 6
				}
			default:
				return nil, false, p.Errf("invalid escape")
			}
		case c < 0x20:
			return nil, false, p.Errf("control character in string")
		default:
			p.I = PlainRun(p.B, p.I+1)
		}
	}
	return nil, false, p.Errf("unterminated string")
}

// PlainRun is the offset of the first quote, backslash or control byte
// (under 0x20) of b at or after i, len(b) when there is none: eight bytes
// at a time, the last few one at a time. In a word w, the lowest byte
// whose high bit (x - 0x01..) &^ x sets is its first zero byte of x (the
// bytes under it take no borrow), and (w - 0x20..) &^ w likewise marks the
// first byte under 0x20; the marks above the first may be wrong, and are
// not read.
func PlainRun(b []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		quote, slash := w^(ones*'"'), w^(ones*'\\')
		if m := ((quote-ones)&^quote | (slash-ones)&^slash | (w-ones*0x20)&^w) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 {
		i++
	}
	return i
}

func (p *JSONScanner) array(depth int) error {
	p.I++ // [
	p.WS()
	if p.I < len(p.B) && p.B[p.I] == ']' {
		p.I++
		return nil
	}
	for {
		p.WS()
		if err := p.Value(depth); err != nil {
			return err
		}
		if done, err := p.Sep(']', "array"); done || err != nil {
			return err
		}
	}
}

// smallObject is how many keys an object's duplicate check holds in a
// fixed array before it takes a map.
const smallObject = 16

func (p *JSONScanner) object(depth int) error {
	p.I++ // {
	p.WS()
	if p.I < len(p.B) && p.B[p.I] == '}' {
		p.I++
		return nil
	}
	// Keys compare as decoded strings, as encoding/json reads them. A key
	// with no escape is its raw bytes, a slice of B, so only an escaped
	// key is copied; a small object's keys are compared in a fixed array,
	// a map takes over past smallObject keys.
	var small [smallObject][]byte
	keys := small[:0]
	var set map[string]struct{}
	for {
		p.WS()
		if p.I >= len(p.B) || p.B[p.I] != '"' {
			return p.Errf("expected object key")
		}
		raw, esc, err := p.Str()
		if err != nil {
			return err
		}
		k := raw[1 : len(raw)-1]
		if esc {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return p.Errf("invalid key: %v", err)
			}
			k = []byte(s)
		}
		dup := false
		switch {
		case set != nil:
			if _, dup = set[string(k)]; !dup {
				set[string(k)] = struct{}{}
			}
		default:
			for _, o := range keys {
				if string(o) == string(k) {
					dup = true
					break
				}
			}
			if dup {
				break
			}
			if len(keys) < len(small) {
				keys = append(keys, k)
				break
			}
			set = make(map[string]struct{}, 2*smallObject)
			for _, o := range keys {
				set[string(o)] = struct{}{}
			}
			set[string(k)] = struct{}{}
		}
		if dup {
			return fmt.Errorf("duplicated key %q", Clip(string(k), 40))
		}
		p.WS()
		if p.I >= len(p.B) || p.B[p.I] != ':' {
			return p.Errf("expected :")
		}
		p.I++
		p.WS()
		if err := p.Value(depth); err != nil {
			return err
		}
		if done, err := p.Sep('}', "object"); done || err != nil {
			return err
		}
	}
}

// Hex4 reads the four hex digits of a \u escape (b: the digits).
func Hex4(b []byte) (rune, bool) {
	var r rune
	for _, h := range b {
		switch {
		case h >= '0' && h <= '9':
			r = r<<4 | rune(h-'0')
		case h >= 'a' && h <= 'f':
			r = r<<4 | rune(h-'a'+10)
		case h >= 'A' && h <= 'F':
			r = r<<4 | rune(h-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

package writer

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// checkJSON makes the checks of schema.CheckJSON (one JSON value, valid
// UTF-8, no duplicated object key, nested at most maxDepth deep) in one
// pass over the bytes, without json.Decoder.Token, which allocates per
// token and was the largest cost of parsing an append request. A fuzz
// test holds it to schema.CheckJSON's verdicts.
func checkJSON(b []byte, maxDepth int) error {
	if !utf8.Valid(b) {
		return errors.New("not valid UTF-8")
	}
	p := &scanner{b: b, maxDepth: maxDepth}
	p.ws()
	if p.i == len(b) {
		return errors.New("empty document")
	}
	if err := p.value(0); err != nil {
		return err
	}
	p.ws()
	if p.i != len(b) {
		return errors.New("trailing data after JSON value")
	}
	return nil
}

type scanner struct {
	b        []byte
	i        int
	maxDepth int
}

// sep reads what follows a member of an object or array: a comma (more
// to come) or the closing byte (done).
func (p *scanner) sep(closing byte, what string) (done bool, err error) {
	p.ws()
	if p.i >= len(p.b) {
		return false, p.errf("unterminated %s", what)
	}
	switch p.b[p.i] {
	case ',':
		p.i++
		return false, nil
	case closing:
		p.i++
		return true, nil
	}
	return false, p.errf("expected , or %c", closing)
}

func (p *scanner) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *scanner) errf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *scanner) value(depth int) error {
	if p.i >= len(p.b) {
		return p.errf("unexpected end")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		if depth >= p.maxDepth {
			return fmt.Errorf("nested deeper than %d levels", p.maxDepth)
		}
		return p.object(depth + 1)
	case c == '[':
		if depth >= p.maxDepth {
			return fmt.Errorf("nested deeper than %d levels", p.maxDepth)
		}
		return p.array(depth + 1)
	case c == '"':
		_, _, err := p.str()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return p.lit("true")
	case c == 'f':
		return p.lit("false")
	case c == 'n':
		return p.lit("null")
	}
	return p.errf("unexpected character %q", p.b[p.i])
}

func (p *scanner) lit(s string) error {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return p.errf("invalid literal")
	}
	p.i += len(s)
	return nil
}

func digits(b []byte, i int) int {
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	return j
}

func (p *scanner) number() error {
	b, i := p.b, p.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return p.errf("invalid number")
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return p.errf("invalid number")
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return p.errf("invalid number")
		}
		i = j
	}
	p.i = i
	return nil
}

// str scans a string; it returns its raw bytes (quotes included) and
// whether it holds an escape.
func (p *scanner) str() ([]byte, bool, error) {
	start := p.i
	p.i++
	esc := false
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return p.b[start:p.i], esc, nil
		case c == '\\':
			esc = true
			if p.i+1 >= len(p.b) {
				return nil, false, p.errf("unterminated string")
			}
			switch p.b[p.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i += 2
			case 'u':
				if p.i+6 > len(p.b) {
					return nil, false, p.errf("invalid \\u escape")
				}
				r, ok := hex4(p.b[p.i+2 : p.i+6])
				if !ok {
					return nil, false, p.errf("invalid \\u escape")
				}
				p.i += 6
				// A surrogate escape must be a pair: readers disagree on a
				// lone one (Go reads U+FFFD, others keep or refuse it).
				switch {
				case r >= 0xDC00 && r <= 0xDFFF:
					return nil, false, p.errf("lone low surrogate \\u escape")
				case r >= 0xD800 && r <= 0xDBFF:
					lo, ok := rune(0), p.i+6 <= len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u'
					if ok {
						lo, ok = hex4(p.b[p.i+2 : p.i+6])
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return nil, false, p.errf("lone high surrogate \\u escape")
					}
					p.i += 6
				}
			default:
				return nil, false, p.errf("invalid escape")
			}
		case c < 0x20:
			return nil, false, p.errf("control character in string")
		default:
			p.i++
		}
	}
	return nil, false, p.errf("unterminated string")
}

func (p *scanner) array(depth int) error {
	p.i++ // [
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return nil
	}
	for {
		p.ws()
		if err := p.value(depth); err != nil {
			return err
		}
		if done, err := p.sep(']', "array"); done || err != nil {
			return err
		}
	}
}

func (p *scanner) object(depth int) error {
	p.i++ // {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return nil
	}
	// Keys compare as decoded strings, as encoding/json reads them.
	var keys []string
	var set map[string]struct{}
	for {
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return p.errf("expected object key")
		}
		raw, esc, err := p.str()
		if err != nil {
			return err
		}
		k := string(raw[1 : len(raw)-1])
		if esc {
			if err := json.Unmarshal(raw, &k); err != nil {
				return p.errf("invalid key: %v", err)
			}
		}
		dup := false
		if set != nil {
			_, dup = set[k]
			set[k] = struct{}{}
		} else {
			for _, o := range keys {
				if o == k {
					dup = true
					break
				}
			}
			keys = append(keys, k)
			if len(keys) > 16 {
				set = make(map[string]struct{}, 32)
				for _, o := range keys {
					set[o] = struct{}{}
				}
			}
		}
		if dup {
			if len(k) > 40 {
				k = k[:40] + "..."
			}
			return fmt.Errorf("duplicated key %q", k)
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return p.errf("expected :")
		}
		p.i++
		p.ws()
		if err := p.value(depth); err != nil {
			return err
		}
		if done, err := p.sep('}', "object"); done || err != nil {
			return err
		}
	}
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
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

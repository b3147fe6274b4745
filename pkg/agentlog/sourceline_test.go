package agentlog

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// sourceLineCases are compact JSON lines with the characters the
// marshaler escapes (HTML, U+2028/U+2029) in keys and values.
var sourceLineCases = []string{
	`{}`, `[]`, `"s"`, `0`, `null`,
	`{"type":"user","message":{"content":"a <b> & c"}}`,
	`{"k<>&":"\u003c already escaped \u2028","v":"line\u2028sep\u2029para"}`,
	"{\"raw\":\"line\u2028sep\u2029para <&>\"}",
	`{"a":[1,2.5e3,true,false,null,{"b":"\\\"\/"}]}`,
	`{"u":"\ud83d\ude00 ü ` + strings.Repeat("x", 300) + `"}`,
}

// TestSourceLineData: the hand-written source/line data is the bytes
// json.Marshal writes for it.
func TestSourceLineData(t *testing.T) {
	for _, format := range []string{"claude-code", "co<de>x", "p\u2028i"} {
		for i, raw := range sourceLineCases {
			checkSourceLineData(t, format, i*1000-1, []byte(raw))
		}
	}
}

func FuzzSourceLineData(f *testing.F) {
	for _, raw := range sourceLineCases {
		f.Add("claude-code", 3, []byte(raw))
	}
	f.Fuzz(func(t *testing.T, format string, index int, raw []byte) {
		var c bytes.Buffer
		if json.Compact(&c, raw) != nil {
			return
		}
		checkSourceLineData(t, format, index, c.Bytes())
	})
}

func checkSourceLineData(t *testing.T, format string, index int, raw []byte) {
	t.Helper()
	want, err := json.Marshal(SourceLine{Format: format, Index: index, Line: raw})
	if err != nil {
		t.Fatal(err)
	}
	if got := sourceLineData(format, index, raw); !bytes.Equal(got, want) {
		t.Fatalf("%q line %d %s:\ngot  %s\nwant %s", format, index, raw, got, want)
	}
}

// BenchmarkSourceLineData: the hand-written data against json.Marshal
// (x-marshal) for a 2 KB line.
func BenchmarkSourceLineData(b *testing.B) {
	raw := []byte(`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"` +
		strings.Repeat("result line of a typical tool output\\n", 50) + `"}]}}`)
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sourceLineData("claude-code", 17, raw)
		}
	})
	b.Run("x-marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(SourceLine{Format: "claude-code", Index: 17, Line: raw})
		}
	})
}

// TestCompactLine: a line is what json.Compact makes of it, the same
// bytes when it is compact already.
func TestCompactLine(t *testing.T) {
	for _, raw := range append(sourceLineCases, ` { "a" : [ 1 , "x y\t" ] } `, "{\"a\":\"q\\\" \"}", "[\n1]", "\"\\\\\" ") {
		checkCompactLine(t, []byte(raw))
	}
}

func FuzzCompactLine(f *testing.F) {
	for _, raw := range sourceLineCases {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if json.Valid(raw) {
			checkCompactLine(t, raw)
		}
	})
}

func checkCompactLine(t *testing.T, raw []byte) {
	t.Helper()
	var want, buf bytes.Buffer
	if err := json.Compact(&want, raw); err != nil {
		t.Fatal(err)
	}
	if got, err := compactLine(&buf, raw); err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("%q: got %q %v, want %q", raw, got, err, want.Bytes())
	}
}

// BenchmarkCompactLine: a compact 2 KB line against json.Compact
// (x-compact).
func BenchmarkCompactLine(b *testing.B) {
	raw := []byte(`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"` +
		strings.Repeat("result line of a typical tool output\\n", 50) + `"}]}}`)
	var buf bytes.Buffer
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			_, _ = compactLine(&buf, raw)
		}
	})
	b.Run("x-compact", func(b *testing.B) {
		for b.Loop() {
			buf.Reset()
			_ = json.Compact(&buf, raw)
		}
	})
}

// isCompactBytewise is isCompact as a loop over each byte, a backslash
// in a string taking the byte after it: the reference isCompact is held to.
func isCompactBytewise(raw []byte) bool {
	in := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case in:
			if c == '\\' {
				i++
			} else if c == '"' {
				in = false
			}
		case c == '"':
			in = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return false
		}
	}
	return true
}

// isCompactCases have runs of backslashes before quotes, whitespace
// right after a string, and strings left open; not all are JSON.
var isCompactCases = []string{
	``, ` `, `""`, `"" `, `"\" "`, `"\\" `, `"\\\" "`, `"\\\\" `, `"\\\\\" " `, `"a\"b" x`,
	`{"a":"b c","d":"\\"}`, `{"a":"\\\\"} `, `"\`, `"\\`, `"abc`, `"a\"`, `\" "`, `x\\" " `,
	`{"k":"v\"} "}`, `["\\\\\\\"", "x"]`, "\"\\\n\" ", "\"\\\\\"\t",
}

// TestIsCompact: isCompact says what the bytewise loop says, for any
// bytes.
func TestIsCompact(t *testing.T) {
	for _, raw := range append(isCompactCases, sourceLineCases...) {
		if got, want := isCompact([]byte(raw)), isCompactBytewise([]byte(raw)); got != want {
			t.Errorf("isCompact(%q) = %v, the bytewise loop says %v", raw, got, want)
		}
	}
}

func FuzzIsCompact(f *testing.F) {
	for _, raw := range isCompactCases {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if got, want := isCompact(raw), isCompactBytewise(raw); got != want {
			t.Fatalf("isCompact(%q) = %v, the bytewise loop says %v", raw, got, want)
		}
	})
}

// htmlEscapeCases have each byte json.HTMLEscape escapes, alone, with
// others, and near it (other runes whose UTF-8 starts with 0xE2).
var htmlEscapeCases = []string{
	``, `plain`, `<`, `>`, `&`, "\u2028", "\u2029", "\u2027", "\u20ac", "\u2030", "a\u2028b<c>d&e\u2029",
	"\xe2", "\xe2\x80", "x\xe2\x80\xa8", `"\u003c"`, strings.Repeat("result line\\n", 40) + "&",
}

// TestHTMLEscape: htmlEscape writes what json.HTMLEscape writes.
func TestHTMLEscape(t *testing.T) {
	for _, src := range htmlEscapeCases {
		checkHTMLEscape(t, []byte(src))
	}
}

func FuzzHTMLEscape(f *testing.F) {
	for _, src := range htmlEscapeCases {
		f.Add([]byte(src))
	}
	f.Fuzz(func(t *testing.T, src []byte) { checkHTMLEscape(t, src) })
}

func checkHTMLEscape(t *testing.T, src []byte) {
	t.Helper()
	var got, want bytes.Buffer
	got.WriteString("head")
	want.WriteString("head")
	htmlEscape(&got, src)
	json.HTMLEscape(&want, src)
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("%q: got %q, want %q", src, got.Bytes(), want.Bytes())
	}
}

// BenchmarkHTMLEscape: a 2 KB line with nothing to escape, against
// json.HTMLEscape (x-json).
func BenchmarkHTMLEscape(b *testing.B) {
	src := []byte(`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"` +
		strings.Repeat("result line of a typical tool output\\n", 50) + `"}]}}`)
	var buf bytes.Buffer
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			buf.Reset()
			htmlEscape(&buf, src)
		}
	})
	b.Run("x-json", func(b *testing.B) {
		for b.Loop() {
			buf.Reset()
			json.HTMLEscape(&buf, src)
		}
	})
}

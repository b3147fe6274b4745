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

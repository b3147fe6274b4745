package agentlog

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// toolOutputs are tool outputs the hand-written data may or may not take:
// sourceLineCases, and outputs it must leave to the marshaler (not
// compact, not one value, not valid, a duplicated key, nested too deep).
var toolOutputs = append(append([]string{}, sourceLineCases...),
	` "a"`, `"a" `, `{"a": 1}`, `"a","x":1`, `{"a":1,"a":2}`, `"\ud800"`, "\"\xff\"", `nul`, `{`, `"a`,
	strings.Repeat("[", schema.MaxJSONDepth-1)+strings.Repeat("]", schema.MaxJSONDepth-1),
	strings.Repeat("[", schema.MaxJSONDepth)+strings.Repeat("]", schema.MaxJSONDepth),
	`"`+strings.Repeat("x", 2000)+`"`)

// checkToolResultData holds the hand-written data of a tool result to
// what add writes: json.Marshal's bytes, which valid passes.
func checkToolResultData(t *testing.T, b *Builder, status string, output []byte) {
	t.Helper()
	got, ok := b.toolResultData(status, output)
	if !ok {
		return
	}
	want, err := json.Marshal(schema.ToolResult{Status: status, Output: output})
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%q: hand-written %s, json.Marshal %s %v", output, got, want, err)
	}
	if err := b.valid(&schema.Envelope{Type: schema.TypeToolResult, Data: got}); err != nil {
		t.Fatalf("%q: hand-written %s does not pass valid: %v", output, got, err)
	}
}

func TestToolResultData(t *testing.T) {
	b := NewBuilder("f", "s", 0, nil)
	small := NewBuilder("f", "s", 4096+256, nil) // valid's short check up to 256 bytes
	// Statuses json.Marshal escapes are no tool's today; the hand-written
	// data must still leave them to it.
	for _, out := range toolOutputs {
		for _, status := range []string{schema.ToolOK, schema.ToolError, "<i>", `a"b`, "A"} {
			checkToolResultData(t, b, status, []byte(out))
			checkToolResultData(t, small, status, []byte(out))
		}
	}
	// An output under valid's short-check bound whose escapes take the data
	// past it (and past the event's limit) is left to the marshaler.
	mid := NewBuilder("f", "s", 4096+1000, nil)
	escaped := []byte(`"` + strings.Repeat("<", 900) + `"`)
	if d, ok := mid.toolResultData(schema.ToolOK, escaped); ok {
		t.Fatalf("an output its escapes take past the bound written by hand (%d bytes)", len(d))
	}
	checkToolResultData(t, mid, schema.ToolOK, escaped)
	// A plain output is written by hand.
	if _, ok := b.toolResultData(schema.ToolOK, json.RawMessage(`"result line\n"`)); !ok {
		t.Fatal("a plain output is left to the marshaler")
	}
}

func FuzzToolResultData(f *testing.F) {
	for _, out := range toolOutputs {
		f.Add([]byte(out))
	}
	b := NewBuilder("f", "s", 0, nil)
	f.Fuzz(func(t *testing.T, out []byte) { checkToolResultData(t, b, schema.ToolOK, out) })
}

// BenchmarkToolResultData: the data of a 1.5 KB tool result, as `bench
// import` maps it, written by hand and by json.Marshal (x-marshal), each
// with the check valid makes of it.
func BenchmarkToolResultData(b *testing.B) {
	out, _ := json.Marshal(strings.Repeat("result line of a typical tool output\n", 40))
	bl := NewBuilder("f", "s", 0, nil)
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := bl.toolResultData(schema.ToolOK, out); !ok {
				b.Fatal("not written by hand")
			}
		}
	})
	b.Run("x-marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d, _ := json.Marshal(schema.ToolResult{Status: schema.ToolOK, Output: out})
			if err := bl.valid(&schema.Envelope{Type: schema.TypeToolResult, Data: d}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

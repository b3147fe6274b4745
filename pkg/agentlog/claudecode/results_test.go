package claudecode

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// contentSeeds are user contents of blocks that onlyResults may or may
// not take in one pass.
var contentSeeds = []string{
	`[{"type":"tool_result","tool_use_id":"toolu_1","content":"out"}]`,
	`[{"type":"tool_result","tool_use_id":"toolu_1","content":"a"},{"type":"tool_result","tool_use_id":"toolu_2","content":"b","is_error":true}]`,
	`[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"x <b>&"}],"is_error":true}]`,
	`[{"type":"tool_result","tool_use_id":"toolu_1"}]`,
	`[{"type":"tool_result","tool_use_id":"toolu_1","is_error":"yes"}]`,
	`[{"type":"tool_result","tool_use_id":"toolu_1","content":"a"},{"type":"tool_result","tool_use_id":"toolu_2","is_error":1}]`,
	`[{"type":"tool_result","tool_use_id":"toolu_1","content":"a"},{"type":"text","text":"more"}]`,
	`[{"type":"tool_result","tool_use_id":"toolu_1","content":"a"},{"type":"text","text":"[Request interrupted by user for tool use]"}]`,
	`[{"type":"tool_result","tool_use_id":"toolu_1","content":"a"},null]`,
	`[{"type":"tool_result","tool_use_id":"toolu_1","content":"a","type":"text"}]`,
	`[{"type":"text","text":"x","TYPE":"tool_result","tool_use_id":"toolu_1"}]`,
	`[{"type":"tool_result","tool_use_id":"toolu_1"},{"type":"tool_result","tool_use_id":"toolu_1"}]`,
	`[{"type":"tool_result","tool_use_id":"elsewhere","content":"a"}]`,
	`[{"type":"tool_result","tool_use_id":"toolu_1","content":null}]`,
	`[]`, `[null]`, `{}`, `[1]`, `[{"type":"tool_result"`, `[{"type":"text","text":"[Request interrupted by user]"}]`,
}

// mapContent maps content as the user line u3 after a prompt and an
// assistant message calling toolu_1 and toolu_2, by fn.
func mapContent(t testing.TB, content []byte, fn func(m *mapper, b *agentlog.Builder, l *line)) ([]schema.Envelope, []string, error) {
	var events []schema.Envelope
	b := agentlog.NewBuilder(Name, "cc-s", 0, func(e schema.Envelope) error { events = append(events, e); return nil })
	m := Format{}.NewMapper("cc-s").(*mapper)
	b.Prompt(json.RawMessage(`"run it"`))
	m.leaf = "u2"
	b.Assistant(agentlog.Assistant{ID: "m1", Calls: []agentlog.ToolCall{
		{ID: "toolu_1", Name: "Bash", Input: json.RawMessage(`{}`)}, {ID: "toolu_2", Name: "Bash", Input: json.RawMessage(`{}`)}}, Stop: "tool_use"})
	parent := "u2"
	fn(m, b, &line{Type: "user", UUID: "u3", ParentUUID: &parent})
	return events, b.Notes(), b.Err()
}

// sameContent holds the one-pass mapping of a line of results to the
// general one.
func sameContent(t *testing.T, content []byte) {
	got, gotNotes, gotErr := mapContent(t, content, func(m *mapper, b *agentlog.Builder, l *line) { m.userContent(b, l, content) })
	want, wantNotes, wantErr := mapContent(t, content, func(m *mapper, b *agentlog.Builder, l *line) { m.userBlocks(b, l, content) })
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotNotes, wantNotes) || (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%s:\n got %+v %q %v\nwant %+v %q %v", content, got, gotNotes, gotErr, want, wantNotes, wantErr)
	}
}

func TestUserContentOnePass(t *testing.T) {
	for _, s := range contentSeeds {
		sameContent(t, []byte(s))
	}
	// A line of results takes the one pass.
	if _, ok := onlyResults(json.RawMessage(contentSeeds[0])); !ok {
		t.Fatal("a line of results not decoded in one pass")
	}
}

// FuzzUserContent holds the one-pass mapping of a line of results to the
// general one.
func FuzzUserContent(f *testing.F) {
	for _, s := range contentSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, content []byte) { sameContent(t, content) })
}

// BenchmarkUserResults maps a tool result line's content of `bench
// import`'s shape (1.5 KB of output) in one pass and by the general path.
func BenchmarkUserResults(b *testing.B) {
	content, _ := json.Marshal([]any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1",
		"content": strings.Repeat("result line of a typical tool output\n", 40)}})
	for _, c := range []struct {
		name string
		fn   func(m *mapper, b *agentlog.Builder, l *line)
	}{
		{"OnePass", func(m *mapper, b *agentlog.Builder, l *line) { m.userContent(b, l, content) }},
		{"General", func(m *mapper, b *agentlog.Builder, l *line) { m.userBlocks(b, l, content) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(content)))
			b.ReportAllocs()
			for b.Loop() {
				if evs, _, err := mapContent(b, content, c.fn); err != nil || len(evs) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestResultsOfACheckedLine: a result's output is written by hand
// unchecked only when its line passed the check of its source/line; an
// output the writer would refuse (a duplicated key, a lone surrogate,
// nested too deep) is in a line that does not, so it is still checked
// and written again as encoding/json reads it: every event passes the
// writer's validation.
func TestResultsOfACheckedLine(t *testing.T) {
	deep := strings.Repeat("[", schema.MaxJSONDepth-4) + strings.Repeat("]", schema.MaxJSONDepth-4)
	for _, content := range []string{`"out <&>"`, `[{"type":"text","text":"a"}]`, `[{"type":"text","text":"a","text":"b"}]`,
		`"\ud800"`, deep, `[{"type":"text","text":"a"}],"x":{"k":1,"k":2}`} {
		file := `{"type":"user","uuid":"u1","sessionId":"s","message":{"role":"user","content":"run it"}}` + "\n" +
			`{"type":"assistant","uuid":"u2","parentUuid":"u1","message":{"id":"m1","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}],"stop_reason":"tool_use"}}` + "\n" +
			`{"type":"user","uuid":"u3","parentUuid":"u2","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":` + content + `}]}}` + "\n"
		path := filepath.Join(t.TempDir(), "s.jsonl")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		var c collect
		if _, err := agentlog.ReadFile(Format{}, path, agentlog.Options{}, &c); err != nil {
			t.Fatal(err)
		}
		results := 0
		for _, e := range c.events["cc-s"] {
			if err := schema.Validate(&e, schema.ValidateOptions{}); err != nil {
				t.Fatalf("%s: seq %d %s: %v", content, e.Seq, e.Type, err)
			}
			if e.Type != schema.TypeToolResult {
				continue
			}
			results++
		}
		if results != 1 {
			t.Fatalf("%s: %d results", content, results)
		}
	}
}

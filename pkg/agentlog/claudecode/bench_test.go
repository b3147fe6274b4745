package claudecode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// BenchmarkReadFile maps a file of 40 turns in the shape `sessionlog
// bench import` generates (a prompt, a tool call, its 1.5 KB result and
// a reply per turn), reporting the time per event.
func BenchmarkReadFile(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "-bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	sid := "bbbbbbbb-bbbb-4bbb-8bbb-000000000001"
	path := filepath.Join(dir, sid+".jsonl")
	var text strings.Builder
	parent, k := any(nil), 0
	put := func(typ string, msg any) {
		k++
		uuid := fmt.Sprintf("%s-%06d", sid[:8], k)
		l, _ := json.Marshal(map[string]any{"parentUuid": parent, "isSidechain": false, "userType": "external", "cwd": "/bench",
			"sessionId": sid, "version": "2.1.3", "gitBranch": "main", "type": typ, "message": msg, "uuid": uuid,
			"timestamp": "2026-11-30T10:00:00.000Z"})
		text.Write(l)
		text.WriteByte('\n')
		parent = uuid
	}
	output := strings.Repeat("result line of a typical tool output\n", 40)
	for t := range 40 {
		call := fmt.Sprintf("toolu_%d", t)
		put("user", map[string]any{"role": "user", "content": fmt.Sprintf("step %d: run the tests", t)})
		put("assistant", map[string]any{"id": fmt.Sprintf("msg_a%d", t), "type": "message", "role": "assistant", "model": "m",
			"content":     []any{map[string]any{"type": "tool_use", "id": call, "name": "Bash", "input": map[string]string{"command": "go test ./..."}}},
			"stop_reason": "tool_use", "usage": map[string]int{"input_tokens": 100, "output_tokens": 20}})
		put("user", map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": call, "content": output}}})
		put("assistant", map[string]any{"id": fmt.Sprintf("msg_b%d", t), "type": "message", "role": "assistant", "model": "m",
			"content": []any{map[string]any{"type": "text", "text": "All tests pass."}}, "stop_reason": "end_turn"})
	}
	if err := os.WriteFile(path, []byte(text.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	var n count
	b.ReportAllocs()
	for b.Loop() {
		if _, err := agentlog.ReadFile(Format{}, path, agentlog.Options{}, &n); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n.events), "ns/event")
}

// count counts the events of a Sink.
type count struct{ events int }

func (*count) Session(agentlog.Plan) error   { return nil }
func (c *count) Event(schema.Envelope) error { c.events++; return nil }
func (*count) Done() error                   { return nil }

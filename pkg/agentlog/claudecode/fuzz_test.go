package claudecode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Any file maps without error to events the writer accepts: the mapping
// never breaks a rule of pkg/session (ReadFile would say so) nor of the
// envelope.
func FuzzMapping(f *testing.F) {
	for _, p := range []string{
		"testdata/projects/-home-ann-shop/22222222-2222-4222-8222-222222222222.jsonl",
		"testdata/projects/-home-ann-shop/22222222-2222-4222-8222-222222222222/subagents/agent-a1b2c3d.jsonl",
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"type":"user","uuid":"x","message":{"content":[{"type":"tool_result","tool_use_id":"a b","content":"x"}]}}` + "\n" +
		`{"type":"assistant","uuid":"x","parentUuid":"x","message":{"id":"m","content":[{"type":"tool_use","id":"","name":"","input":null}],"stop_reason":"end_turn"}}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "f.jsonl")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		var c collect
		if _, err := agentlog.ReadFile(Format{}, path, agentlog.Options{MaxEventBytes: 4096}, &c); err != nil {
			t.Fatalf("mapping failed: %v", err)
		}
		for _, evs := range c.events {
			for i := range evs {
				e := evs[i]
				if err := schema.Validate(&e, schema.ValidateOptions{MaxEventBytes: 4096}); err != nil {
					t.Fatalf("seq %d %s: %v", e.Seq, e.Type, err)
				}
			}
		}
	})
}

package source_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/services/source"
)

// ccEntry is the i-th entry of a generated Claude Code transcript: turns
// of a prompt and an answer, each entry's parent the one before.
func ccEntry(i int) json.RawMessage {
	parent := "null"
	if i > 0 {
		parent = fmt.Sprintf(`"e-%06d"`, i-1)
	}
	head := fmt.Sprintf(`"uuid":"e-%06d","parentUuid":%s,"sessionId":"55555555-5555-4555-8555-555555555555","timestamp":"2026-01-02T03:04:05.000Z","cwd":"/home/ann/shop"`, i, parent)
	if i%2 == 0 {
		return json.RawMessage(fmt.Sprintf(`{"type":"user",%s,"message":{"role":"user","content":"question %d about the shop's order pipeline"}}`, head, i))
	}
	return json.RawMessage(fmt.Sprintf(`{"type":"assistant",%s,"message":{"id":"msg_%d","role":"assistant","model":"m","content":[{"type":"text","text":"an answer of a typical size for question %d"}],"stop_reason":"end_turn"}}`, head, i, i))
}

// BenchmarkSourceAppendEntry appends one entry per source append to a
// transcript of 1000 entries, as the SDK mirrors a live session:
// "continued" keeps the mapping state between appends, "remapped" (the
// floor it replaces) reads and maps the transcript each time.
func BenchmarkSourceAppendEntry(b *testing.B) {
	for _, c := range []struct {
		name   string
		states int
	}{{"continued", 0}, {"remapped", -1}} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b, envOpts{source: source.Config{SourceStates: c.states}})
			ctx := context.Background()
			key := api.SourceKey{Format: "claude-code", ProjectKey: "-home-ann-shop", SessionKey: "55555555-5555-4555-8555-555555555555"}
			const n = 1000
			var first []json.RawMessage
			for i := range n {
				first = append(first, ccEntry(i))
			}
			if _, err := e.src.SourceAppend(ctx, api.SourceAppendRequest{SourceKey: key, Entries: first}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				rep, err := e.src.SourceAppend(ctx, api.SourceAppendRequest{SourceKey: key, Entries: []json.RawMessage{ccEntry(n + i)}})
				if err != nil || rep.Appended == 0 {
					b.Fatalf("entry %d: %+v %v", n+i, rep, err)
				}
			}
		})
	}
}

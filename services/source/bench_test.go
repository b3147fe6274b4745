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

// BenchmarkSourceListTenant lists a project of 200 transcripts that
// tenant acme's alice wrote (each a session she created and recorded with
// an empty source append): as alice, whose listing records name her, and
// as bob, another agent of acme, of each of whose records the writer is
// asked (a read of one event as bob, refused forbidden).
func BenchmarkSourceListTenant(b *testing.B) {
	e := newTenantEnv(b)
	const n = 200
	for i := range n {
		session := fmt.Sprintf("%08d-0000-4000-8000-000000000000", i)
		if err := createAs(e.alice, "cc-"+session); err != nil {
			b.Fatal(err)
		}
		if _, err := e.src.SourceAppendAs(context.Background(), api.Caller{Tenant: "acme", Agent: "alice"},
			api.SourceAppendRequest{SourceKey: srcKey(session, "")}); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		want int
	}{{"alice", n}, {"bob", 0}} {
		b.Run(c.name, func(b *testing.B) {
			caller := api.Caller{Tenant: "acme", Agent: c.name}
			for b.Loop() {
				rep, err := e.src.SourceListAs(context.Background(), caller, api.SourceListRequest{Format: "claude-code", ProjectKey: project})
				if err != nil || len(rep.Sessions) != c.want {
					b.Fatalf("%s lists %d: %v", c.name, len(rep.Sessions), err)
				}
			}
		})
	}
}

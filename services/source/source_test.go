package source_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/writertest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/source"
)

const ccDir = "../../pkg/agentlog/claudecode/testdata/projects/-home-ann-shop/"

// importFile appends the session a file maps to, as import does.
func importFile(t *testing.T, nc *nats.Conn, path string) {
	t.Helper()
	c, _, _ := agentlogtest.Read(t, claudecode.Format{}, path)
	for _, s := range c.Sessions {
		evs := make([]schema.Envelope, len(s.Events))
		for i, e := range s.Events {
			e.Seq, e.SessionID = 0, ""
			evs[i] = e
		}
		zero := uint64(0)
		r := request(t, nc, api.SubjectAppend, api.AppendRequest{SessionID: s.Plan.ID, ExpectedSeq: &zero, Events: evs})
		if r.err != nil {
			t.Fatalf("append %s: %+v", s.Plan.ID, r.err)
		}
	}
}

// TestSourceLoad: sessions.api.source.load answers the verbatim entries of
// an imported transcript and of its subagent, found:false for a key never
// written, and bad_request for a key that is no file name.
func TestSourceLoad(t *testing.T) {
	e := newEnv(t, envOpts{})
	main := ccDir + "22222222-2222-4222-8222-222222222222.jsonl"
	sub := ccDir + "22222222-2222-4222-8222-222222222222/subagents/agent-a1b2c3d.jsonl"
	importFile(t, e.nc, main)
	importFile(t, e.nc, sub)
	for _, c := range []struct {
		path, subpath string
	}{{main, ""}, {sub, "subagents/agent-a1b2c3d"}} {
		rep, err := e.src.SourceLoad(context.Background(), api.SourceLoadRequest{SourceKey: api.SourceKey{
			Format: "claude-code", ProjectKey: "-home-ann-shop", SessionKey: "22222222-2222-4222-8222-222222222222", Subpath: c.subpath}})
		if err != nil || !rep.Found {
			t.Fatalf("load %s: %+v %v", c.path, rep, err)
		}
		var got []any
		for _, raw := range rep.Entries {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatal(err)
			}
			got = append(got, v)
		}
		if want := agentlogtest.CompleteLines(t, c.path); !reflect.DeepEqual(got, want) {
			t.Fatalf("load %s: %d entries, the file has %d (or they differ)", c.path, len(got), len(want))
		}
	}
	r := request(t, e.nc, api.SubjectSourceLoad, api.SourceLoadRequest{SourceKey: api.SourceKey{
		Format: "claude-code", ProjectKey: "p", SessionKey: "33333333-3333-4333-8333-333333333333"}})
	if r.err != nil || !json.Valid(r.raw) || string(r.raw) != `{"found":false,"entries":[]}` {
		t.Fatalf("never written: %s %+v", r.raw, r.err)
	}
	for _, k := range []api.SourceKey{
		{Format: "nope", SessionKey: "a"},
		{Format: "claude-code", SessionKey: "../x"},
		{Format: "claude-code", SessionKey: "a", Subpath: "../../b"},
	} {
		r := request(t, e.nc, api.SubjectSourceLoad, api.SourceLoadRequest{SourceKey: k})
		if r.code() != string(schema.CodeBadRequest) {
			t.Fatalf("%+v: %s", k, r.raw)
		}
	}
}

// TestSourceAppend: entries appended in two batches give the session
// import gives the file (same event ids), the same batch again adds
// nothing, and load answers the file's entries.
func TestSourceAppend(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	for _, c := range []struct {
		path, subpath string
	}{
		{ccDir + "11111111-1111-4111-8111-111111111111.jsonl", ""},
		{ccDir + "22222222-2222-4222-8222-222222222222/subagents/agent-a1b2c3d.jsonl", "subagents/agent-a1b2c3d"},
	} {
		key := api.SourceKey{Format: "claude-code", ProjectKey: "-home-ann-shop", SessionKey: "11111111-1111-4111-8111-111111111111", Subpath: c.subpath}
		if c.subpath != "" {
			key.SessionKey = "22222222-2222-4222-8222-222222222222"
		}
		var entries []json.RawMessage
		for _, v := range agentlogtest.CompleteLines(t, c.path) {
			b, _ := json.Marshal(v)
			entries = append(entries, b)
		}
		half := len(entries) / 2
		for _, batch := range [][]json.RawMessage{entries[:half], entries[half:], entries[half:]} {
			r := request(t, e.nc, api.SubjectSourceAppend, api.SourceAppendRequest{SourceKey: key, Entries: batch})
			if r.err != nil {
				t.Fatalf("append %s: %+v", c.path, r.err)
			}
		}
		// A replay of stored entries, placed by a stored uuid among them.
		rep, err := e.src.SourceAppend(ctx, api.SourceAppendRequest{SourceKey: key, Entries: entries[:3]})
		if err != nil || rep.Appended != 0 {
			t.Fatalf("again: %+v %v", rep, err)
		}
		imp, _, _ := agentlogtest.Read(t, claudecode.Format{}, c.path)
		want := imp.Sessions[0]
		got := stored(t, e.st, want.Plan.ID)
		if len(got) != len(want.Events) {
			t.Fatalf("%s: %d events stored, import gives %d", c.path, len(got), len(want.Events))
		}
		for i, ev := range want.Events {
			if got[i].Envelope.EventID != ev.EventID || got[i].Envelope.Type != ev.Type {
				t.Fatalf("%s: event %d is %s %s, import gives %s %s", c.path, i+1, got[i].Envelope.Type, got[i].Envelope.EventID, ev.Type, ev.EventID)
			}
		}
		ld, err := e.src.SourceLoad(ctx, api.SourceLoadRequest{SourceKey: key})
		if err != nil || len(ld.Entries) != len(entries) {
			t.Fatalf("load: %d entries of %d, %v", len(ld.Entries), len(entries), err)
		}
	}
	r := request(t, e.nc, api.SubjectSourceAppend, api.SourceAppendRequest{SourceKey: api.SourceKey{Format: "claude-code", SessionKey: "x"},
		Entries: []json.RawMessage{json.RawMessage(`[1]`)}})
	if r.code() != string(schema.CodeBadRequest) {
		t.Fatalf("not an object: %s", r.raw)
	}
}

// TestSourceAppendKeyOnly: an append without entries (the key alone, as
// ship and import record it) answers the stored tail and appends nothing.
func TestSourceAppendKeyOnly(t *testing.T) {
	e := newEnv(t, envOpts{})
	path := ccDir + "11111111-1111-4111-8111-111111111111.jsonl"
	importFile(t, e.nc, path)
	imp, _, _ := agentlogtest.Read(t, claudecode.Format{}, path)
	want := imp.Sessions[0]
	key := api.SourceKey{Format: "claude-code", ProjectKey: "-home-ann-shop", SessionKey: "11111111-1111-4111-8111-111111111111"}
	rep, err := e.src.SourceAppend(context.Background(), api.SourceAppendRequest{SourceKey: key, Entries: []json.RawMessage{}})
	if err != nil || rep.SessionID != want.Plan.ID || rep.Appended != 0 || rep.LastSeq != uint64(len(want.Events)) {
		t.Fatalf("key only: %+v %v, want last seq %d", rep, err, len(want.Events))
	}
	if got := stored(t, e.st, want.Plan.ID); len(got) != len(want.Events) {
		t.Fatalf("%d events stored, import gives %d", len(got), len(want.Events))
	}
	key.SessionKey = "33333333-3333-4333-8333-333333333333"
	rep, err = e.src.SourceAppend(context.Background(), api.SourceAppendRequest{SourceKey: key, Entries: []json.RawMessage{}})
	if err != nil || rep.LastSeq != 0 || rep.Appended != 0 {
		t.Fatalf("never written: %+v %v", rep, err)
	}
}

// TestSourceAppendKeylessEntries: an entry without a uuid (a title, a
// mode marker) is appended each time it is sent, as the SDK asks, even
// when the same text is stored already (a title set back to an earlier
// one); only a replay of stored entries, placed by a stored uuid in the
// same batch, adds nothing. Both with the kept mapping state and with
// every append mapped again.
func TestSourceAppendKeylessEntries(t *testing.T) {
	for _, c := range []struct {
		name   string
		states int
	}{{"continued", 0}, {"remapped", -1}} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, envOpts{source: source.Config{SourceStates: c.states}})
			ctx := context.Background()
			const sid = "44444444-4444-4444-8444-444444444444"
			key := api.SourceKey{Format: "claude-code", ProjectKey: "-home-ann-shop", SessionKey: sid}
			user := func(uuid, parent, text string) json.RawMessage {
				p := "null"
				if parent != "" {
					p = `"` + parent + `"`
				}
				return json.RawMessage(`{"parentUuid":` + p + `,"isSidechain":false,"cwd":"/home/ann/shop","sessionId":"` + sid +
					`","type":"user","message":{"role":"user","content":"` + text + `"},"uuid":"` + uuid + `","timestamp":"2026-12-04T09:00:00.000Z"}`)
			}
			title := func(s string) json.RawMessage {
				return json.RawMessage(`{"type":"custom-title","customTitle":"` + s + `","sessionId":"` + sid + `"}`)
			}
			a, b := user("k-1", "", "first"), user("k-2", "k-1", "second")
			x, y := title("x"), title("y")
			var want []json.RawMessage
			for _, batch := range [][]json.RawMessage{{a, x}, {y}, {x}, {b, x, x}, {y, x}} {
				if _, err := e.src.SourceAppend(ctx, api.SourceAppendRequest{SourceKey: key, Entries: batch}); err != nil {
					t.Fatal(err)
				}
				want = append(want, batch...)
			}
			load := func(what string) {
				t.Helper()
				ld, err := e.src.SourceLoad(ctx, api.SourceLoadRequest{SourceKey: key})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, l := range ld.Entries {
					got = append(got, string(l))
				}
				var w []string
				for _, l := range want {
					w = append(w, string(l))
				}
				if !reflect.DeepEqual(got, w) {
					t.Fatalf("%s: load\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(w, "\n"))
				}
			}
			load("appended")
			// A replay of the whole transcript, in batches as the SDK's
			// importSessionToStore sends it, adds nothing.
			for _, batch := range [][]json.RawMessage{want[:3], want[3:]} {
				rep, err := e.src.SourceAppend(ctx, api.SourceAppendRequest{SourceKey: key, Entries: batch})
				if err != nil || rep.Appended != 0 {
					t.Fatalf("replay: %+v %v", rep, err)
				}
			}
			load("replayed")
			// The last batch again (a retry whose reply was lost) adds
			// nothing: the transcript ends with it.
			if rep, err := e.src.SourceAppend(ctx, api.SourceAppendRequest{SourceKey: key, Entries: want[len(want)-2:]}); err != nil || rep.Appended != 0 {
				t.Fatalf("retry: %+v %v", rep, err)
			}
			load("retried")
		})
	}
}

// TestSourceLoadPages: a transcript larger than a NATS message (entries of
// 100-150 KB, some full of characters JSON escapes, one of 600 KB and one
// of 3 MB, each kept in parts) loads through sessions.api.source.load a
// page at a time, each page a message the server carries, the 3 MB entry
// in pieces: the pages put together are the entries as appended.
func TestSourceLoadPages(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	const sid = "55555555-5555-4555-8555-555555555555"
	key := api.SourceKey{Format: "claude-code", ProjectKey: "-home-ann-shop", SessionKey: sid}
	var entries []json.RawMessage
	parent := "null"
	add := func(text string) {
		uuid := fmt.Sprintf("big-%02d", len(entries))
		b, _ := json.Marshal(map[string]any{"parentUuid": json.RawMessage(parent), "isSidechain": false, "cwd": "/home/ann/shop", "sessionId": sid,
			"type": "user", "message": map[string]any{"role": "user", "content": text}, "uuid": uuid, "timestamp": "2026-12-04T09:00:00.000Z"})
		entries = append(entries, b)
		parent = `"` + uuid + `"`
	}
	for i := range 8 {
		if i%2 == 0 {
			add(strings.Repeat("<&>", 100<<10/3))
		} else {
			add(strings.Repeat("x", 150<<10))
		}
	}
	add(strings.Repeat("y", 600<<10))
	add(strings.Repeat("é<", 1<<20))
	add("short")
	add("the end")
	for i := 0; i < len(entries); i += 3 {
		if _, err := e.src.SourceAppend(ctx, api.SourceAppendRequest{SourceKey: key, Entries: entries[i:min(i+3, len(entries))]}); err != nil {
			t.Fatal(err)
		}
	}
	var got []json.RawMessage
	var pieces []byte
	cursor, pages, pieced := "", 0, 0
	for {
		r := request(t, e.nc, api.SubjectSourceLoad, api.SourceLoadRequest{SourceKey: key, Cursor: cursor})
		if r.err != nil {
			t.Fatalf("page %d: %+v", pages, r.err)
		}
		var rep api.SourceLoadReply
		if err := json.Unmarshal(r.raw, &rep); err != nil || !rep.Found {
			t.Fatalf("page %d: %v %.200s", pages, err, r.raw)
		}
		pages++
		got = append(got, rep.Entries...)
		if rep.Part != nil {
			if len(rep.Entries) > 0 {
				t.Fatalf("page %d: a piece beside %d entries", pages, len(rep.Entries))
			}
			pieced++
			pieces = append(pieces, rep.Part.Text...)
			if rep.Part.Last {
				got = append(got, json.RawMessage(pieces))
				pieces = nil
			}
		}
		if rep.Next == "" {
			break
		}
		cursor = rep.Next
	}
	if len(got) != len(entries) {
		t.Fatalf("%d entries in %d pages, want %d", len(got), pages, len(entries))
	}
	for i := range entries {
		var a, b any
		if json.Unmarshal(got[i], &a) != nil || json.Unmarshal(entries[i], &b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("entry %d differs (%d bytes, want %d)", i, len(got[i]), len(entries[i]))
		}
	}
	if pieced < 2 || pages < 8 {
		t.Errorf("%d pages, %d pieces: the transcript should take several of each", pages, pieced)
	}
	// A cursor the service never gave is refused.
	if r := request(t, e.nc, api.SubjectSourceLoad, api.SourceLoadRequest{SourceKey: key, Cursor: "x"}); r.code() != string(schema.CodeBadRequest) {
		t.Fatalf("bad cursor: %s", r.raw)
	}
}

// TestSourceAppendBounded: a source append that has to read its
// transcript whole (no mapping state kept) refuses one whose session
// holds more than MaxSourceBytes with too_large and stores nothing: an
// agent cannot make the writer hold a session of any size.
func TestSourceAppendBounded(t *testing.T) {
	e := newEnv(t, envOpts{source: source.Config{SourceStates: -1, MaxSourceBytes: 64 << 10}})
	ctx := context.Background()
	const sid = "88888888-8888-4888-8888-888888888888"
	key := api.SourceKey{Format: "claude-code", ProjectKey: "-home-ann-shop", SessionKey: sid}
	entry := func(i int) json.RawMessage { return userEntry(sid, "b", i, 8<<10) }
	var last uint64
	for i := 0; ; i++ {
		if i > 20 {
			t.Fatal("never refused")
		}
		rep, err := e.src.SourceAppend(ctx, api.SourceAppendRequest{SourceKey: key, Entries: []json.RawMessage{entry(i)}})
		if err != nil {
			if schema.CodeOf(err) != schema.CodeTooLarge {
				t.Fatalf("append %d: %v, want too_large", i, err)
			}
			break
		}
		last = rep.LastSeq
	}
	if got := stored(t, e.st, "cc-"+sid); uint64(len(got)) != last {
		t.Fatalf("%d events stored, the last accepted append left %d", len(got), last)
	}
}

// The source append's sink reads the tail through the writer, as the
// caller (internal/clientlog, the adapter ship uses too), not from the
// store: a session being erased answers erased, though its events are
// still stored.
func TestSourceSinkReadsTailThroughWriter(t *testing.T) {
	e := newEnv(t, envOpts{})
	writertest.CheckTail(t, e.nc, e.st, e.src.SinkLog(api.Caller{}, "w-1", "s-1", "s-1"), "w-1", "s-1",
		func(err error) api.Code { return schema.CodeOf(err) })
}

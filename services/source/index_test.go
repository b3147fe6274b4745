package source_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/source"
)

// entriesOf is a transcript file's complete lines as store entries.
func entriesOf(t *testing.T, path string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for _, v := range agentlogtest.CompleteLines(t, path) {
		b, _ := json.Marshal(v)
		out = append(out, b)
	}
	return out
}

const (
	sid1 = "11111111-1111-4111-8111-111111111111"
	sid2 = "22222222-2222-4222-8222-222222222222"
)

// TestSourceList: transcripts appended through sessions.api.source.append
// are listed by their project only (paged, each once per write), a
// session's subagent transcripts are its subkeys, a key of another project
// for a session is refused (append) or never written (load), and bad
// listings are refused.
func TestSourceList(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	put := func(project, session, subpath, file string) api.SourceAppendReply {
		t.Helper()
		rep, err := e.src.SourceAppend(ctx, api.SourceAppendRequest{
			SourceKey: api.SourceKey{Format: "claude-code", ProjectKey: project, SessionKey: session, Subpath: subpath},
			Entries:   entriesOf(t, ccDir+file)})
		if err != nil {
			t.Fatalf("append %s/%s/%s: %v", project, session, subpath, err)
		}
		return rep
	}
	put("-home-ann-shop", sid1, "", sid1+".jsonl")
	put("-home-ann-shop", sid2, "", sid2+".jsonl")
	put("-home-ann-shop", sid2, "subagents/agent-a1b2c3d", sid2+"/subagents/agent-a1b2c3d.jsonl")
	put("-home-bob-mill", "44444444-4444-4444-8444-444444444444", "", sid1+".jsonl")

	list := func(project string, limit int) []string {
		t.Helper()
		var keys []string
		cursor := ""
		for range 10 {
			r := request(t, e.nc, api.SubjectSourceList, api.SourceListRequest{Format: "claude-code", ProjectKey: project, Limit: limit, Cursor: cursor})
			if r.err != nil {
				t.Fatalf("list %s: %+v", project, r.err)
			}
			var rep api.SourceListReply
			if err := json.Unmarshal(r.raw, &rep); err != nil {
				t.Fatal(err)
			}
			if limit > 0 && len(rep.Sessions) > limit {
				t.Fatalf("list %s: %d sessions in a page of %d", project, len(rep.Sessions), limit)
			}
			for _, s := range rep.Sessions {
				if s.Mtime <= 0 {
					t.Fatalf("list %s: %+v has no mtime", project, s)
				}
				keys = append(keys, s.SessionKey)
			}
			if rep.Next == "" {
				slices.Sort(keys)
				return keys
			}
			cursor = rep.Next
		}
		t.Fatalf("list %s: no last page", project)
		return nil
	}
	if got, want := list("-home-ann-shop", 0), []string{sid1, sid2}; !slices.Equal(got, want) {
		t.Fatalf("list: %v, want %v", got, want)
	}
	if got, want := list("-home-ann-shop", 1), []string{sid1, sid2}; !slices.Equal(got, want) {
		t.Fatalf("list by pages of 1: %v, want %v", got, want)
	}
	if got, want := list("-home-bob-mill", 0), []string{"44444444-4444-4444-8444-444444444444"}; !slices.Equal(got, want) {
		t.Fatalf("list of another project: %v, want %v", got, want)
	}
	if got := list("-home-eve", 0); len(got) != 0 {
		t.Fatalf("list of a project never written: %v", got)
	}
	sub, err := e.src.SourceSubkeys(ctx, api.SourceSubkeysRequest{Format: "claude-code", ProjectKey: "-home-ann-shop", SessionKey: sid2})
	if err != nil || !slices.Equal(sub.Subkeys, []string{"subagents/agent-a1b2c3d"}) {
		t.Fatalf("subkeys: %+v %v", sub, err)
	}
	sub, err = e.src.SourceSubkeys(ctx, api.SourceSubkeysRequest{Format: "claude-code", ProjectKey: "-home-bob-mill", SessionKey: sid2})
	if err != nil || len(sub.Subkeys) != 0 {
		t.Fatalf("subkeys under another project: %+v %v", sub, err)
	}

	// Another project's key for the same session: refused, nothing stored.
	before := len(stored(t, e.st, "cc-"+sid1))
	foreign := api.SourceKey{Format: "claude-code", ProjectKey: "-home-eve", SessionKey: sid1}
	extra := json.RawMessage(`{"type":"user","uuid":"eve-1","parentUuid":null,"message":{"role":"user","content":"hi"}}`)
	r := request(t, e.nc, api.SubjectSourceAppend, api.SourceAppendRequest{SourceKey: foreign, Entries: []json.RawMessage{extra}})
	if r.code() != string(schema.CodeConflict) {
		t.Fatalf("append under another project: %s", r.raw)
	}
	if after := len(stored(t, e.st, "cc-"+sid1)); after != before {
		t.Fatalf("a refused append stored %d events", after-before)
	}
	ld, err := e.src.SourceLoad(ctx, api.SourceLoadRequest{SourceKey: foreign})
	if err != nil || ld.Found || len(ld.Entries) != 0 {
		t.Fatalf("load under another project: %+v %v", ld, err)
	}
	if got := list("-home-eve", 0); len(got) != 0 {
		t.Fatalf("a refused append was listed: %v", got)
	}

	for name, req := range map[string]any{
		"unknown format": api.SourceListRequest{Format: "nope", ProjectKey: "p"},
		"no project":     api.SourceListRequest{Format: "claude-code"},
		"page too large": api.SourceListRequest{Format: "claude-code", ProjectKey: "p", Limit: api.SourcePageMax + 1},
		"bad cursor":     api.SourceListRequest{Format: "claude-code", ProjectKey: "p", Cursor: "x"},
		"unknown field":  `{"format":"claude-code","projectKey":"p","all":true}`,
	} {
		if r := request(t, e.nc, api.SubjectSourceList, req); r.code() != string(schema.CodeBadRequest) {
			t.Errorf("%s: %s", name, r.raw)
		}
	}
	if r := request(t, e.nc, api.SubjectSourceSubkeys, api.SourceSubkeysRequest{Format: "claude-code", ProjectKey: "p", SessionKey: "../x"}); r.code() != string(schema.CodeBadRequest) {
		t.Errorf("subkeys of a key that is no file name: %s", r.raw)
	}
}

// TestSourceAppendRewindStaysInTheSession: a transcript whose prompt goes
// back, appended through the store, is the one session import gives the
// file (same event ids, its context/rewound included), and appending it
// again adds nothing.
func TestSourceAppendRewindStaysInTheSession(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	key := api.SourceKey{Format: "claude-code", ProjectKey: "-home-ann-shop", SessionKey: sid2}
	entries := entriesOf(t, ccDir+sid2+".jsonl")
	for range 2 {
		if _, err := e.src.SourceAppend(ctx, api.SourceAppendRequest{SourceKey: key, Entries: entries}); err != nil {
			t.Fatal(err)
		}
	}
	imp, _, _ := agentlogtest.Read(t, claudecode.Format{}, ccDir+sid2+".jsonl")
	if len(imp.Sessions) != 1 {
		t.Fatalf("import gives %d sessions", len(imp.Sessions))
	}
	s := imp.Sessions[0]
	got := stored(t, e.st, s.Plan.ID)
	if len(got) != len(s.Events) {
		t.Fatalf("%s: %d events stored, import gives %d", s.Plan.ID, len(got), len(s.Events))
	}
	rewound := false
	for i, ev := range s.Events {
		if g := got[i].Envelope; g.EventID != ev.EventID {
			t.Fatalf("%s: event at seq %d is %s, import gives %s", s.Plan.ID, ev.Seq, g.EventID, ev.EventID)
		}
		rewound = rewound || ev.Type == schema.TypeContextRewound
	}
	if !rewound {
		t.Fatal("the transcript has no rewind to check")
	}
}

// TestSourceAppendContinues: a transcript appended one entry per request
// (as the SDK mirrors a live session) gives the events import gives the
// file, and after the first request each maps only its new entry; a
// session that moved on since (another writer appended) is mapped again.
func TestSourceAppendContinues(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, envOpts{source: source.Config{Registerer: reg}})
	ctx := context.Background()
	key := api.SourceKey{Format: "claude-code", ProjectKey: "-home-ann-shop", SessionKey: sid1}
	entries := entriesOf(t, ccDir+sid1+".jsonl")
	for i, en := range entries {
		if _, err := e.src.SourceAppend(ctx, api.SourceAppendRequest{SourceKey: key, Entries: []json.RawMessage{en}}); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	imp, _, _ := agentlogtest.Read(t, claudecode.Format{}, ccDir+sid1+".jsonl")
	want := imp.Sessions[0].Events
	got := stored(t, e.st, want[0].SessionID)
	if len(got) != len(want) {
		t.Fatalf("%d events stored, import gives %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Envelope.EventID != want[i].EventID || got[i].Envelope.Type != want[i].Type {
			t.Fatalf("event %d: %s %s, import gives %s %s", i+1, got[i].Envelope.Type, got[i].Envelope.EventID, want[i].Type, want[i].EventID)
		}
	}
	continued := counterSum(t, reg, "sessionlog_writer_source_appends_total", "mapping", "continued")
	remapped := counterSum(t, reg, "sessionlog_writer_source_appends_total", "mapping", "remapped")
	if remapped != 1 || continued < float64(len(entries)-2) {
		t.Fatalf("%v remapped, %v continued, of %d entries", remapped, continued, len(entries))
	}

	// Another writer appends (a repair would): the kept state no longer
	// holds, and the next entry maps the transcript again.
	exp := uint64(len(got))
	r := request(t, e.nc, api.SubjectAppend, api.AppendRequest{SessionID: want[0].SessionID, ExpectedSeq: &exp,
		Events: []schema.Envelope{{EventID: "other.1", Type: "x-note/added", Ignorable: true, Data: json.RawMessage(`{}`)}}})
	if r.err != nil {
		t.Fatalf("other append: %+v", r.err)
	}
	var last struct{ UUID string }
	for _, en := range entries {
		var l struct{ UUID string }
		if json.Unmarshal(en, &l) == nil && l.UUID != "" {
			last = l
		}
	}
	extra := json.RawMessage(`{"type":"user","uuid":"u-late","parentUuid":"` + last.UUID + `","message":{"role":"user","content":"late"}}`)
	if _, err := e.src.SourceAppend(ctx, api.SourceAppendRequest{SourceKey: key, Entries: []json.RawMessage{extra}}); schema.CodeOf(err) != schema.CodeConflict {
		t.Fatalf("append after another writer's event: %v, want the remap's conflict", err)
	}
	if n := counterSum(t, reg, "sessionlog_writer_source_appends_total", "mapping", "remapped"); n != 2 {
		t.Fatalf("%v remapped, want 2", n)
	}
}

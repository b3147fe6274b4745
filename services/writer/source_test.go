package writer_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

const ccDir = "../../pkg/agentlog/claudecode/testdata/projects/-home-ann-shop/"

// importFile appends the sessions a file maps to, as import does, but its
// branches' fork children (load reads the main session only).
func importFile(t *testing.T, nc *nats.Conn, path string) {
	t.Helper()
	c, _, _ := agentlogtest.Read(t, claudecode.Format{}, path)
	for _, s := range c.Sessions {
		if s.Plan.Fork != nil {
			continue
		}
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
		rep, err := e.w.SourceLoad(context.Background(), api.SourceLoadRequest{SourceKey: api.SourceKey{
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

package e2e

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/codex"
	"github.com/sessionlog/sessionlog/pkg/agentlog/pi"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The codex and pi fixtures through the import and export verbs: what is
// stored is what the mapping gives, a /tree jump is a rewind in the same
// session, a second import appends nothing, and the export to the format
// is the file's complete lines (then the answers to the calls it leaves
// open).
func TestImportCodexAndPi(t *testing.T) {
	for _, tc := range []struct {
		f        agentlog.Format
		src      string // fixtures, under ../pkg/agentlog/<format>/testdata/sessions
		file     string // the main fixture, under src
		sessions []string
		rewound  bool // the first session holds a context/rewound (a /tree jump)
	}{
		{f: codex.Format{}, file: "2026/03/10/rollout-2026-03-10T09-15-02-0197d8a1-5b2c-7e30-9a41-3f6c2d8e9b10.jsonl",
			sessions: []string{"codex-0197d8a1-5b2c-7e30-9a41-3f6c2d8e9b10", "codex-0197d8c4-1e0f-7a52-b3c6-77d41f2a0c58"}},
		{f: pi.Format{}, file: "--home-ana-src-ledger--/2026-03-11T14-02-11-500Z_8c2f4b1e-6d3a-4f7e-9b21-5a0c7e3d9f42.jsonl",
			sessions: []string{"pi-8c2f4b1e-6d3a-4f7e-9b21-5a0c7e3d9f42"}, rewound: true},
	} {
		t.Run(tc.f.Name(), func(t *testing.T) {
			s := imStart(t)
			dir := copyTree(t, filepath.Join("..", "pkg", "agentlog", tc.f.Name(), "testdata", "sessions"))
			code, out, errs := s.run(t, "import", "--from", tc.f.Name(), dir)
			if code != 0 {
				t.Fatalf("import: exit %d\n%s\n%s", code, out, errs)
			}
			for _, id := range tc.sessions {
				if !strings.Contains(out, "imported "+id+" ") {
					t.Errorf("no `imported %s` in\n%s", id, out)
				}
			}
			if !strings.Contains(errs, filepath.Base(tc.file)+":") {
				t.Errorf("the garbled line is not named: %s", errs)
			}
			// What is stored is what the mapping gives, seq for seq.
			path := filepath.Join(dir, tc.file)
			var c agentlogtest.Collect
			if _, err := agentlog.ReadFile(tc.f, path, agentlog.Options{}, &c); err != nil {
				t.Fatal(err)
			}
			stored := s.events(t, tc.sessions[0])
			mapped := c.Sessions[0].Events
			if len(stored) != len(mapped) {
				t.Fatalf("%d events stored, the mapping gives %d", len(stored), len(mapped))
			}
			for i, e := range stored {
				if m := mapped[i]; e.EventID != m.EventID || e.Seq != m.Seq || !sameData(e, m) {
					t.Errorf("seq %d: stored %s %s, mapped %s %s", e.Seq, e.EventID, e.Data, m.EventID, m.Data)
				}
			}
			rewound := false
			for _, e := range stored {
				rewound = rewound || e.Type == schema.TypeContextRewound
			}
			if rewound != tc.rewound {
				t.Errorf("context/rewound in %s: %v, want %v", tc.sessions[0], rewound, tc.rewound)
			}

			before := s.snapshot(t, tc.sessions...)
			code, out, errs = s.run(t, "import", "--from", tc.f.Name(), dir)
			if code != 0 {
				t.Fatalf("second import: exit %d\n%s\n%s", code, out, errs)
			}
			for _, id := range tc.sessions {
				if !strings.Contains(out, "unchanged "+id+"\n") {
					t.Errorf("no `unchanged %s` in\n%s", id, out)
				}
			}
			if after := s.snapshot(t, tc.sessions...); after != before {
				t.Errorf("the second import changed the log")
			}

			exported := filepath.Join(t.TempDir(), "out.jsonl")
			if code, _, errs := s.run(t, "export", "--to", tc.f.Name(), "--session", tc.sessions[0], "-o", exported); code != 0 {
				t.Fatalf("export: exit %d: %s", code, errs)
			}
			got, want := jsonLines(t, exported), agentlogtest.CompleteLines(t, path)
			if len(got) < len(want) || !reflect.DeepEqual(got[:len(want)], want) {
				t.Errorf("the export is not the file's complete lines first (%d lines, %d in the file)", len(got), len(want))
			}

			// Exported to the other format and imported from it: the same
			// model-visible context (then the answers to calls left open).
			other, file, back := agentlog.Format(pi.Format{}), "2026-03-12T00-00-00-000Z_x.jsonl", "pi-"+pi.SessionUUID(tc.sessions[0])
			if tc.f.Name() == pi.Name {
				other, file, back = codex.Format{}, "rollout-x.jsonl", "codex-"+codex.ThreadID(tc.sessions[0])
			}
			exported = filepath.Join(t.TempDir(), file)
			if code, _, errs := s.run(t, "export", "--to", other.Name(), "--session", tc.sessions[0], "-o", exported); code != 0 {
				t.Fatalf("export --to %s: exit %d: %s", other.Name(), code, errs)
			}
			if code, out, errs := s.run(t, "import", "--from", other.Name(), exported); code != 0 || !strings.Contains(out, "imported "+back+" ") {
				t.Fatalf("import --from %s: exit %d\n%s\n%s", other.Name(), code, out, errs)
			}
			ctxWant, ctxGot := agentlogtest.Context(stored), agentlogtest.Context(s.events(t, back))
			if len(ctxGot) < len(ctxWant) || !reflect.DeepEqual(ctxGot[:len(ctxWant)], ctxWant) {
				t.Errorf("context after export --to %s and import: %d entries, want the %d of the session first", other.Name(), len(ctxGot), len(ctxWant))
			}
		})
	}
}

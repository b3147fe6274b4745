package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// realCCFile is the longest real Claude Code transcript of the tests
// (96 lines, testdata/real/README.md says where it came from).
const realCCFile = "../pkg/agentlog/testdata/real/cc/491e126e-1e71-469c-ade2-fcc8af567c74.jsonl"

// `ship` follows a real Claude Code transcript written line by line (one
// line written in two halves), is killed with SIGKILL in the middle (once
// while half a line is in the file, once with lines written while it is
// down) and restarted, and stores what one import of the whole file
// stores on a server of its own, event for event (DESIGN.md section 13).
func TestShipRealTranscriptAcrossKillEqualsOneShotImport(t *testing.T) {
	raw, err := os.ReadFile(realCCFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(raw, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	name := filepath.Base(realCCFile)
	id, err := claudecode.Format{}.SessionID(name, nil)
	if err != nil {
		t.Fatal(err)
	}

	// The one-shot import, from a file of the same project and name (the
	// same session, the same sourceFile label).
	whole := imStart(t)
	oneDir := filepath.Join(t.TempDir(), "projects")
	if err := os.MkdirAll(filepath.Join(oneDir, "-w"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(oneDir, "-w", name), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := whole.run(t, "import", "--from", "claude-code", oneDir); code != 0 {
		t.Fatalf("import: exit %d\n%s\n%s", code, out, errs)
	}
	want := whole.events(t, id)
	if len(want) < len(lines) {
		t.Fatalf("the import stored %d events of %s", len(want), id)
	}

	// ship, on a server of its own. --idle is long: the lease is kept
	// while the file grows, so no repair comes between the lines.
	s := imStart(t)
	dir := filepath.Join(t.TempDir(), "projects")
	if err := os.MkdirAll(filepath.Join(dir, "-w"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "-w", name)
	write, _ := agentWriter(t, s, path, id)
	// stored waits until the session holds the source lines an import of
	// the file's first n lines stores (lines before the first prompt
	// wait for it, so fewer than n).
	prefix := filepath.Join(t.TempDir(), "-w", name)
	if err := os.MkdirAll(filepath.Dir(prefix), 0o755); err != nil {
		t.Fatal(err)
	}
	stored := func(n int) {
		t.Helper()
		if err := os.WriteFile(prefix, bytes.Join(lines[:n], nil), 0o644); err != nil {
			t.Fatal(err)
		}
		c, _, _ := agentlogtest.Read(t, claudecode.Format{}, prefix)
		if len(c.Sessions) == 0 {
			return
		}
		k := len(sourceIndexes(c.Sessions[0].Events))
		natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
			if got := sourceIndexes(s.events(t, id)); len(got) < k {
				return fmt.Errorf("%d source lines stored after line %d, the import of the first %d lines stores %d", len(got), n, n, k)
			}
			return nil
		})
	}
	ship := startShip(t, s, dir, "--idle", "1h")
	half, down := len(lines)/2, 2*len(lines)/3
	for i, l := range lines {
		switch i {
		case half:
			write(string(l[:len(l)/2])) // half a line: nothing of it yet
			ship.kill(t)
			ship = startShip(t, s, dir, "--idle", "1h")
			write(string(l[len(l)/2:]))
		case down:
			ship.kill(t)
			write(string(l))
		case down + 5:
			write(string(l)) // written while ship is down
			ship = startShip(t, s, dir, "--idle", "1h")
		default:
			write(string(l))
		}
		if i < down || i > down+5 {
			stored(i + 1)
		}
	}
	stored(len(lines))
	got := s.events(t, id)
	if len(got) != len(want) {
		t.Fatalf("ship stored %d events, one import of the file %d\n%s", len(got), len(want), ship.out.String())
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.EventID != w.EventID || g.Type != w.Type || g.TurnID != w.TurnID || g.ToolCallID != w.ToolCallID ||
			g.AttemptID != w.AttemptID || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("seq %d: ship stored %s %s %.300s, one import %s %s %.300s", g.Seq, g.Type, g.EventID, g.Data, w.Type, w.EventID, w.Data)
		}
	}
	for _, e := range got {
		if e.Type == schema.TypeSessionPaused || e.Synthetic {
			t.Fatalf("seq %d: %s (synthetic %v): the session was repaired while its file grew", e.Seq, e.Type, e.Synthetic)
		}
	}
}

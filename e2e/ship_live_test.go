package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The lease TTL of the liveness tests: an agent is quiet for ten of them.
const liveTTL = 2 * time.Second

// ccCall is what a Claude Code agent that calls one tool after another
// writes for call k: the result of call k-1 (for k = 1, the prompt) and
// the assistant line starting call k (toolu_<k>), left open. After call k
// the file has 2k lines.
func ccCall(sid string, k int) string {
	use := func(k int) string {
		return fmt.Sprintf(`{"id":"msg_%d","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"toolu_%d","name":"Bash","input":{"command":"step %d"}}],"stop_reason":"tool_use"}`, k, k, k)
	}
	u, a := fmt.Sprintf("c-%d", k), fmt.Sprintf("c-%da", k)
	if k == 1 {
		return ccLine(sid, u, "", "user", `{"role":"user","content":"build it"}`) + ccLine(sid, a, u, "assistant", use(k))
	}
	result := fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%d","content":"ok"}]}`, k-1)
	return ccLine(sid, u, fmt.Sprintf("c-%da", k-1), "user", result) + ccLine(sid, a, u, "assistant", use(k))
}

// ccProject makes dir/-w for Claude Code session sid: the directory to
// follow, the session file's path and its session id.
func ccProject(t *testing.T, sid string) (dir, path, id string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "projects")
	if err := os.MkdirAll(filepath.Join(dir, "-w"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, filepath.Join(dir, "-w", sid+".jsonl"), "cc-" + sid
}

// repairedAt names the first repair event of a session, or "".
func repairedAt(events []schema.Envelope) string {
	for _, e := range events {
		if e.Type == schema.TypeRepairApplied || e.Type == schema.TypeSessionPaused {
			return fmt.Sprintf("%s at seq %d", e.Type, e.Seq)
		}
	}
	return ""
}

// stayUnrepaired looks at session id until d has passed and fails at the
// first repair it finds.
func stayUnrepaired(t *testing.T, s *imStack, id string, d time.Duration, ship *shipProc) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if r := repairedAt(s.events(t, id)); r != "" {
			t.Fatalf("%s repaired while its agent lives: %s\n%s", id, r, ship.out.String())
		}
	}
}

// waitRepaired waits until the repairer closed call toolu_<k> of id.
func waitRepaired(t *testing.T, s *imStack, id string, k int, ship *shipProc) {
	t.Helper()
	call := fmt.Sprintf("toolu_%d", k)
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		for _, e := range s.events(t, id) {
			if e.Type == schema.TypeToolResult && e.ToolCallID == call && strings.Contains(string(e.Data), schema.ToolOutcomeUnknown) {
				return nil
			}
		}
		return fmt.Errorf("%s not repaired yet\n%s", call, ship.out.String())
	})
}

// An agent that waits (on its user, on a long tool call) for ten lease
// TTLs with its session file open keeps its session: ship renews the lease
// while a process holds the file open, and no repair is made. Once the
// file is closed and --idle has passed, the lease lapses and the repairer
// closes the call the agent left open.
func TestShipKeepsLeaseWhileFileHeldOpen(t *testing.T) {
	s := imStartTTL(t, liveTTL)
	const sid = "5a5a5a5a-0000-4000-8000-00000000000a"
	dir, path, id := ccProject(t, sid)
	_, waitLines := agentWriter(t, s, path, id)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ship := startShip(t, s, dir) // --idle 1s: only the open file keeps it
	if _, err := f.WriteString(ccCall(sid, 1)); err != nil {
		t.Fatal(err)
	}
	waitLines(2)
	stayUnrepaired(t, s, id, 10*liveTTL, ship)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	waitRepaired(t, s, id, 1, ship)
	if out := ship.out.String(); !strings.Contains(out, "held open by no process: its sessions' leases lapse") {
		t.Errorf("ship did not say the lease lapses:\n%s", out)
	}
}

// An agent that writes its file every two lease TTLs, closing it in
// between (as Claude Code and pi do), keeps its session while each write
// comes within --idle of the last; when it stops writing, the lease lapses
// and the repairer closes its open call; when it writes again, ship takes
// the lease again.
func TestShipKeepsLeaseWhileFileGrows(t *testing.T) {
	s := imStartTTL(t, liveTTL)
	const sid = "5a5a5a5a-0000-4000-8000-00000000000b"
	dir, path, id := ccProject(t, sid)
	write, waitLines := agentWriter(t, s, path, id)
	ship := startShip(t, s, dir, "--idle", (4 * liveTTL).String())
	const calls = 5
	for k := 1; k <= calls; k++ {
		write(ccCall(sid, k))
		waitLines(2 * k)
		stayUnrepaired(t, s, id, 2*liveTTL, ship)
	}
	waitRepaired(t, s, id, calls, ship)
	for k := 1; k < calls; k++ {
		for _, e := range s.events(t, id) {
			if e.Type == schema.TypeToolResult && e.ToolCallID == fmt.Sprintf("toolu_%d", k) && strings.Contains(string(e.Data), schema.ToolOutcomeUnknown) {
				t.Fatalf("toolu_%d was repaired while its agent wrote", k)
			}
		}
	}
	// The agent writes again after the repair: ship takes the lease again.
	write(ccCall(sid, calls+1))
	holder := agentlog.ItemID("h1:claude-code:" + filepath.Base(path))
	natstest.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		l, _, err := s.st.GetLease(context.Background(), id)
		if err != nil {
			return err
		}
		if l == nil || l.Holder != holder {
			return fmt.Errorf("lease %+v, want one held by %s\n%s", l, holder, ship.out.String())
		}
		return nil
	})
	// The append itself takes the lease (it names the holder); ship's
	// liveness round that notes the file written again comes up to a
	// third of the TTL later.
	natstest.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		if out := ship.out.String(); !strings.Contains(out, "written again: its sessions' leases are renewed") {
			return fmt.Errorf("ship did not say it renews the leases again:\n%s", out)
		}
		return nil
	})
}

// ship follows what appears after a long quiet period: a new project
// directory, a new file in a known one, and the followed directory itself
// removed and made again (its watch is gone with it).
func TestShipFollowsNewDirectoriesAfterQuiet(t *testing.T) {
	s := imStart(t)
	const sid = "5a5a5a5a-0000-4000-8000-00000000000c"
	dir, path, id := ccProject(t, sid)
	write, waitLines := agentWriter(t, s, path, id)
	write(ccCall(sid, 1))
	ship := startShip(t, s, dir)
	waitLines(2)
	quiet := func() {
		// Longer than ship's rescan period and than a lease TTL.
		time.Sleep(12 * time.Second)
	}
	follow := func(proj, sid string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, proj), 0o755); err != nil {
			t.Fatal(err)
		}
		write, waitLines := agentWriter(t, s, filepath.Join(dir, proj, sid+".jsonl"), "cc-"+sid)
		write(ccCall(sid, 1))
		waitLines(2)
	}
	quiet()
	follow("-x", "5a5a5a5a-0000-4000-8000-0000000000c1") // a new project
	follow("-w", "5a5a5a5a-0000-4000-8000-0000000000c2") // a new file in a known one
	write(ccCall(sid, 2))                                // the first file again
	waitLines(4)
	quiet()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	follow("-y", "5a5a5a5a-0000-4000-8000-0000000000c3")
	if out := ship.out.String(); strings.Contains(out, "rewritten") {
		t.Errorf("ship refused a file:\n%s", out)
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// shipProc is a running `sessionlog ship`.
type shipProc struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
}

func startShip(t *testing.T, s *imStack, dir string, args ...string) *shipProc {
	t.Helper()
	return startShipFrom(t, s, "claude-code", dir, args...)
}

// shipIdle is the tests' --idle: a file nobody holds open counts as its
// agent gone this long after its last write (args may say otherwise).
const shipIdle = "1s"

func startShipFrom(t *testing.T, s *imStack, format, dir string, args ...string) *shipProc {
	t.Helper()
	p := &shipProc{out: &lockedBuffer{}, done: make(chan struct{})}
	args = append([]string{"ship", "--from", format, "--host", "h1", "--idle", shipIdle, dir, "--nats-url", s.url}, args...)
	p.cmd = exec.Command(sessionlogBin(t), args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
	return p
}

// agentWriter plays an agent writing the file at path as Claude Code and
// pi do (open, append, close): write appends to it; waitLines waits until
// session id holds the source lines 1..n.
func agentWriter(t *testing.T, s *imStack, path, id string) (write func(string), waitLines func(n int)) {
	t.Helper()
	write = func(s string) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	waitLines = func(n int) {
		t.Helper()
		natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
			got := sourceIndexes(s.events(t, id))
			if len(got) < n {
				return fmt.Errorf("source lines %v, want 1..%d", got, n)
			}
			return nil
		})
	}
	return write, waitLines
}

func (p *shipProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

// `ship` follows a file an agent writes line by line (a half-written line
// completed later included), is killed and restarted in the middle, and
// stores every line's events once, in order; when the agent stops, the
// lease lapses and the repairer closes the call it left open.
func TestShipFollowsGrowingFileAcrossKill(t *testing.T) {
	s := imStartTTL(t, 2*time.Second)
	dir := filepath.Join(t.TempDir(), "projects")
	proj := filepath.Join(dir, "-w")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	const sid = "77777777-7777-4777-8777-777777777777"
	id := "cc-" + sid
	path := filepath.Join(proj, sid+".jsonl")
	line := func(uuid, parent, typ, msg string) string { return ccLine(sid, uuid, parent, typ, msg) }
	lines := []string{
		line("v-1", "", "user", `{"role":"user","content":"build it"}`),
		line("v-2", "v-1", "assistant", `{"id":"msg_v1","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"toolu_v1","name":"Bash","input":{"command":"make"}}],"stop_reason":"tool_use"}`),
		line("v-3", "v-2", "user", `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_v1","content":"ok"}]}`),
		line("v-4", "v-3", "assistant", `{"id":"msg_v2","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"toolu_v2","name":"Bash","input":{"command":"make install"}}],"stop_reason":"tool_use"}`),
	}
	write, waitLines := agentWriter(t, s, path, id)
	ship := startShip(t, s, dir)
	write(lines[0])
	waitLines(1)
	write(lines[1][:40]) // half a line: nothing of it yet
	ship.kill(t)
	ship = startShip(t, s, dir)
	write(lines[1][40:])
	waitLines(2)
	write(lines[2])
	waitLines(3)
	ship.kill(t)
	write(lines[3]) // written while ship is down
	ship = startShip(t, s, dir)
	waitLines(4)
	got := sourceIndexes(s.events(t, id))
	if fmt.Sprint(got) != "[1 2 3 4]" {
		t.Fatalf("source lines stored %v, want each of 1..4 once, in order\n%s", got, ship.out.String())
	}
	// The agent stops: the lease lapses and the repairer closes toolu_v2.
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		for _, e := range s.events(t, id) {
			if e.Type == schema.TypeToolResult && e.ToolCallID == "toolu_v2" && strings.Contains(string(e.Data), schema.ToolOutcomeUnknown) {
				return nil
			}
		}
		return fmt.Errorf("toolu_v2 not repaired yet")
	})
	if !strings.Contains(ship.out.String(), "events_appended=") {
		t.Errorf("no metrics line: %s", ship.out.String())
	}
	// The agent comes back: the call's real result and the reply that
	// follows continue the repaired session (resumed; the result kept as
	// tool/late-result beside the repair's).
	write(line("v-5", "v-4", "user", `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_v2","content":"installed"}]}`))
	write(line("v-6", "v-5", "assistant", `{"id":"msg_v3","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Installed."}],"stop_reason":"end_turn"}`))
	waitLines(6)
	evs := s.events(t, id)
	if got := sourceIndexes(evs); fmt.Sprint(got) != "[1 2 3 4 5 6]" {
		t.Fatalf("source lines stored %v after the repair\n%s", got, ship.out.String())
	}
	var resumed, late, results int
	for _, e := range evs {
		switch {
		case e.Type == schema.TypeSessionResumed:
			resumed++
		case e.Type == schema.TypeToolLateResult && strings.Contains(string(e.Data), "toolu_v2"):
			late++
		case e.Type == schema.TypeToolResult && e.ToolCallID == "toolu_v2":
			results++
		}
	}
	if resumed != 1 || late != 1 || results != 1 {
		t.Fatalf("after the repair: %d session/resumed, %d tool/late-result, %d tool/result of toolu_v2; want 1 each\n%s", resumed, late, results, ship.out.String())
	}
}

// ccLine is a line of Claude Code session sid: uuid, its parent ("" for
// none), its type and message.
func ccLine(sid, uuid, parent, typ, msg string) string {
	p := "null"
	if parent != "" {
		p = `"` + parent + `"`
	}
	return fmt.Sprintf(`{"parentUuid":%s,"isSidechain":false,"userType":"external","cwd":"/w","sessionId":"%s","version":"2.1.3","type":"%s","message":%s,"uuid":"%s","timestamp":"2026-11-30T10:00:00.000Z"}`,
		p, sid, typ, msg, uuid) + "\n"
}

// sourceIndexes lists the line numbers of a session's source/line events.
func sourceIndexes(events []schema.Envelope) []int {
	var out []int
	for _, e := range events {
		if e.Type != agentlog.TypeSourceLine {
			continue
		}
		var d agentlog.SourceLine
		_ = json.Unmarshal(e.Data, &d)
		out = append(out, d.Index)
	}
	return out
}

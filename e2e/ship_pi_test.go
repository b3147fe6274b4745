package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// `ship --from pi` follows a pi session file as pi writes it (a half line
// completed later, ship killed and restarted in the middle): every entry's
// events are stored once, in order, and when pi stops the repairer closes
// the call it left open.
func TestShipFollowsPiFileAcrossKill(t *testing.T) {
	s := imStartTTL(t, 2*time.Second)
	dir := filepath.Join(t.TempDir(), "sessions")
	proj := filepath.Join(dir, "--w--")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	const sid = "0197e000-0000-7000-8000-0000000000aa"
	id := "pi-" + sid
	usage := `{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}}`
	entry := func(eid, parent, msg string) string {
		p := "null"
		if parent != "" {
			p = `"` + parent + `"`
		}
		return fmt.Sprintf(`{"type":"message","id":"%s","parentId":%s,"timestamp":"2026-03-12T10:00:00.000Z","message":%s}`, eid, p, msg) + "\n"
	}
	lines := []string{
		`{"type":"session","version":3,"id":"` + sid + `","timestamp":"2026-03-12T10:00:00.000Z","cwd":"/w"}` + "\n",
		entry("e1", "", `{"role":"user","content":"build it","timestamp":1}`),
		entry("e2", "e1", `{"role":"assistant","content":[{"type":"toolCall","id":"tc1","name":"bash","arguments":{"command":"make"}}],"api":"anthropic-messages","provider":"anthropic","model":"m","usage":`+usage+`,"stopReason":"toolUse","timestamp":2}`),
		entry("e3", "e2", `{"role":"toolResult","toolCallId":"tc1","toolName":"bash","content":[{"type":"text","text":"ok"}],"isError":false,"timestamp":3}`),
		entry("e4", "e3", `{"role":"assistant","content":[{"type":"toolCall","id":"tc2","name":"bash","arguments":{"command":"make install"}}],"api":"anthropic-messages","provider":"anthropic","model":"m","usage":`+usage+`,"stopReason":"toolUse","timestamp":4}`),
	}
	write, waitLines := agentWriter(t, s, filepath.Join(proj, "2026-03-12T10-00-00-000Z_"+sid+".jsonl"), id)
	ship := startShipFrom(t, s, "pi", dir)
	write(lines[0] + lines[1])
	waitLines(2)
	write(lines[2][:50]) // half a line: nothing of it yet
	ship.kill(t)
	ship = startShipFrom(t, s, "pi", dir)
	write(lines[2][50:])
	waitLines(3)
	ship.kill(t)
	write(lines[3] + lines[4]) // written while ship is down
	ship = startShipFrom(t, s, "pi", dir)
	waitLines(5)
	if got := sourceIndexes(s.events(t, id)); fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Fatalf("source lines stored %v, want each of 1..5 once, in order\n%s", got, ship.out.String())
	}
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		for _, e := range s.events(t, id) {
			if e.Type == schema.TypeToolResult && e.ToolCallID == "tc2" && strings.Contains(string(e.Data), schema.ToolOutcomeUnknown) {
				return nil
			}
		}
		return fmt.Errorf("tc2 not repaired yet")
	})
}

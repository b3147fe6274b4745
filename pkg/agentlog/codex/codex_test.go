package codex_test

import (
	"encoding/json"
	"fmt"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/codex"
	"github.com/sessionlog/sessionlog/pkg/agentlog/pi"
)

// TestFixtures: the mapped events of each fixture (testdata/golden, a
// reviewer reads them as the mapping's spec; -update rewrites them), the
// export to codex deep-equal to the file, and the round trips through
// codex and pi keeping the model-visible context.
func TestFixtures(t *testing.T) {
	agentlogtest.Suite(t, codex.Format{}, "testdata/sessions/*/*/*/rollout-*.jsonl", codex.Format{}, pi.Format{})
}

// TestRepairedExportAnswersEveryCall: the main fixture ends in a call
// without a result; repaired and exported to codex or pi, every call has
// exactly one result, the unknown one an error that says to check.
func TestRepairedExportAnswersEveryCall(t *testing.T) {
	agentlogtest.SuiteRepaired(t, codex.Format{}, "testdata/sessions/*/*/*/rollout-*-0197d8a1-*.jsonl", codex.Format{}, pi.Format{})
}

// TestLineOverEventLimit: a tool output of 300 KiB (over the 256 KiB event
// limit) is kept in source/line parts and the export is the file.
func TestLineOverEventLimit(t *testing.T) {
	big := strings.Repeat("0123456789abcdé\n", 300*1024/17)
	out, _ := json.Marshal(big)
	agentlogtest.CheckLinesOverLimit(t, codex.Format{}, "rollout-2026-03-12T08-00-00-0197e000-0000-7000-8000-000000000001.jsonl",
		`{"timestamp":"2026-03-12T08:00:00.000Z","type":"session_meta","payload":{"id":"0197e000-0000-7000-8000-000000000001","timestamp":"2026-03-12T08:00:00.000Z","cwd":"/tmp","originator":"codex_cli_rs","cli_version":"0.114.0","source":"cli"}}`,
		`{"timestamp":"2026-03-12T08:00:01.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t1","model_context_window":258400}}`,
		`{"timestamp":"2026-03-12T08:00:01.001Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"dump the log"}]}}`,
		`{"timestamp":"2026-03-12T08:00:02.000Z","type":"response_item","payload":{"type":"function_call","name":"shell_command","arguments":"{\"command\":\"cat big.log\"}","call_id":"call_Z"}}`,
		`{"timestamp":"2026-03-12T08:00:03.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_Z","output":`+string(out)+`}}`,
		`{"timestamp":"2026-03-12T08:00:04.000Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"t1","last_agent_message":null}}`)
}

func FuzzRollout(f *testing.F) {
	agentlogtest.Seed(f, "testdata/sessions/*/*/*/rollout-*.jsonl")
	f.Fuzz(func(t *testing.T, data []byte) {
		agentlogtest.FuzzFile(t, codex.Format{}, "rollout-fuzz.jsonl", data)
	})
}

// TestTurns: a prompt sent while codex works on a task joins its turn; in
// a rollout older than task_started/task_complete a prompt ends the turn
// before it (completed after a reply without calls).
func TestTurns(t *testing.T) {
	meta := `{"timestamp":"2026-03-12T08:00:00.000Z","type":"session_meta","payload":{"id":"0197e000-0000-7000-8000-00000000000%d","timestamp":"2026-03-12T08:00:00.000Z","cwd":"/tmp","originator":"codex_cli_rs","cli_version":"0.%d.0"}}`
	user := `{"timestamp":"2026-03-12T08:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"%s"}]}}`
	reply := `{"timestamp":"2026-03-12T08:00:02.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"%s"}]}}`
	for _, tc := range []struct {
		name  string
		lines []string
		want  string // turn/started and turn/ended, in order
	}{
		{"SteeringJoinsTheTask", []string{
			fmt.Sprintf(meta, 4, 114),
			`{"timestamp":"2026-03-12T08:00:01.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t1"}}`,
			fmt.Sprintf(user, "fix it"), fmt.Sprintf(user, "and keep the API"), fmt.Sprintf(reply, "done"),
			`{"timestamp":"2026-03-12T08:00:03.000Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"t1"}}`,
		}, "started ended:completed"},
		{"OlderRolloutPromptEndsTurn", []string{
			fmt.Sprintf(meta, 5, 30),
			fmt.Sprintf(user, "one"), fmt.Sprintf(reply, "1"), fmt.Sprintf(user, "two"), fmt.Sprintf(reply, "2"),
		}, "started ended:completed started"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rollout-x.jsonl")
			if err := os.WriteFile(path, []byte(strings.Join(tc.lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			c, _, _ := agentlogtest.Read(t, codex.Format{}, path)
			var got []string
			for _, e := range c.Sessions[0].Events {
				switch e.Type {
				case schema.TypeTurnStarted:
					got = append(got, "started")
				case schema.TypeTurnEnded:
					var r schema.Reason
					_ = e.DecodeData(&r)
					got = append(got, "ended:"+r.Reason)
				}
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("turns %q, want %q", g, tc.want)
			}
		})
	}
}

package pi_test

import (
	"encoding/json"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/codex"
	"github.com/sessionlog/sessionlog/pkg/agentlog/pi"
)

// TestFixtures: the mapped events of each fixture (testdata/golden, a
// reviewer reads them as the mapping's spec; -update rewrites them), the
// export to pi deep-equal to the file, and the round trips through pi and
// codex keeping the model-visible context.
func TestFixtures(t *testing.T) {
	agentlogtest.Suite(t, pi.Format{}, "testdata/sessions/*/*.jsonl", pi.Format{}, codex.Format{})
}

// TestRepairedExportAnswersEveryCall: the fixture ends in a call without
// a result; repaired and exported to pi or codex, every call has exactly
// one result, the repaired one an error that says to check.
func TestRepairedExportAnswersEveryCall(t *testing.T) {
	agentlogtest.SuiteRepaired(t, pi.Format{}, "testdata/sessions/*/*.jsonl", pi.Format{}, codex.Format{})
}

// TestLineOverEventLimit: a tool result of 300 KiB (over the 256 KiB event
// limit) is kept in source/line parts and the export is the file.
func TestLineOverEventLimit(t *testing.T) {
	big, _ := json.Marshal(strings.Repeat("0123456789abcdé\n", 300*1024/17))
	agentlogtest.CheckLinesOverLimit(t, pi.Format{}, "2026-03-12T08-00-00-000Z_0197e000-0000-7000-8000-000000000002.jsonl",
		`{"type":"session","version":3,"id":"0197e000-0000-7000-8000-000000000002","timestamp":"2026-03-12T08:00:00.000Z","cwd":"/tmp"}`,
		`{"type":"message","id":"a1","parentId":null,"timestamp":"2026-03-12T08:00:01.000Z","message":{"role":"user","content":"dump the log","timestamp":1773302401000}}`,
		`{"type":"message","id":"a2","parentId":"a1","timestamp":"2026-03-12T08:00:02.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"tc1","name":"bash","arguments":{"command":"cat big.log"}}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse","timestamp":1773302402000}}`,
		`{"type":"message","id":"a3","parentId":"a2","timestamp":"2026-03-12T08:00:03.000Z","message":{"role":"toolResult","toolCallId":"tc1","toolName":"bash","content":[{"type":"text","text":`+string(big)+`}],"isError":false,"timestamp":1773302403000}}`)
}

func FuzzSessionFile(f *testing.F) {
	agentlogtest.Seed(f, "testdata/sessions/*/*.jsonl")
	f.Fuzz(func(t *testing.T, data []byte) {
		agentlogtest.FuzzFile(t, pi.Format{}, "fuzz_x.jsonl", data)
	})
}

// TestContextMessages: what pi gives the model as user messages of its own
// kinds becomes message/user with pi's own text: a "!" command (not a "!!"
// one), an extension's message.
func TestContextMessages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "2026-03-12T09-00-00-000Z_0197e000-0000-7000-8000-000000000003.jsonl")
	lines := []string{
		`{"type":"session","version":3,"id":"0197e000-0000-7000-8000-000000000003","timestamp":"2026-03-12T09:00:00.000Z","cwd":"/tmp","parentSession":"/home/ana/.pi/agent/sessions/--tmp--/2026-03-11T08-00-00-000Z_x.jsonl"}`,
		`{"type":"message","id":"b1","parentId":null,"timestamp":"2026-03-12T09:00:01.000Z","message":{"role":"bashExecution","command":"git status","output":"clean","exitCode":1,"cancelled":false,"truncated":false,"timestamp":1}}`,
		`{"type":"message","id":"b2","parentId":"b1","timestamp":"2026-03-12T09:00:02.000Z","message":{"role":"bashExecution","command":"ls","output":"a","exitCode":0,"cancelled":false,"truncated":false,"excludeFromContext":true,"timestamp":2}}`,
		`{"type":"message","id":"b3","parentId":"b2","timestamp":"2026-03-12T09:00:03.000Z","message":{"role":"custom","customType":"ext","content":"from an extension","display":true,"timestamp":3}}`,
		`{"type":"message","id":"b4","parentId":"b3","timestamp":"2026-03-12T09:00:04.000Z","message":{"role":"user","content":"go on","timestamp":4}}`,
		`{"type":"message","timestamp":"2026-03-12T09:00:05.000Z","message":{"role":"user","content":"a version 1 entry: no id"}}`,
		`{"type":"label","id":"b5","parentId":"b4","timestamp":"2026-03-12T09:00:06.000Z","targetId":"b4","label":"x"}`,
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, res, _ := agentlogtest.Read(t, pi.Format{}, path)
	got := agentlogtest.Context(c.Sessions[0].Events)
	want := []agentlogtest.Entry{
		{Role: "user", Text: "Ran `git status`\n```\nclean\n```\n\nCommand exited with code 1"},
		{Role: "user", Text: "from an extension"},
		{Role: "user", Text: "go on"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("context %+v, want %+v", got, want)
	}
	var created schema.SessionCreated
	_ = c.Sessions[0].Events[0].DecodeData(&created)
	if got := created.Labels[pi.LabelParentSession]; !strings.HasSuffix(got, "_x.jsonl") {
		t.Errorf("parentSession label %q, want the header's path", got)
	}
	if res.Damaged != 1 {
		t.Errorf("%d damaged lines, want the entry without id", res.Damaged)
	}
}

// TestTreeJumpIsRewind: the fixture's two /tree jumps (back to an earlier
// reply, then back to the branch it left) are context/rewound in the one
// session, to the last event of the entry each continues, and the model's
// context is pi's: the root-to-leaf path, without the abandoned branch.
func TestTreeJumpIsRewind(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "sessions", "*", "*8c2f4b1e*.jsonl"))
	if err != nil || len(paths) != 1 {
		t.Fatalf("fixture: %v %v", paths, err)
	}
	c, _, _ := agentlogtest.Read(t, pi.Format{}, paths[0])
	if len(c.Sessions) != 1 {
		t.Fatalf("%d sessions", len(c.Sessions))
	}
	events := c.Sessions[0].Events
	var to []string
	for _, e := range events {
		if e.Type == schema.TypeContextRewound {
			var d schema.ContextRewound
			_ = json.Unmarshal(e.Data, &d)
			if events[d.ToSeq-1].EventID != d.ToEventID {
				t.Errorf("toSeq %d is %s, not %s", d.ToSeq, events[d.ToSeq-1].EventID, d.ToEventID)
			}
			to = append(to, d.ToEventID)
		}
	}
	if got := strings.Join(to, " "); got != "7e8f9001.3 aabbccdd.3" {
		t.Errorf("rewound to %s, want 7e8f9001.3 aabbccdd.3", got)
	}
	for _, en := range agentlogtest.Context(events) {
		if strings.Contains(en.Text, "NFC") || strings.Contains(en.Text, "summary of a branch") {
			t.Errorf("the abandoned branch is in the context: %+v", en)
		}
	}
}

package claudecode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/testbin"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// realFiles are the real Claude Code transcripts of pkg/agentlog/testdata.
func realFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "real", "cc", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("real files: %v %v", files, err)
	}
	return files
}

// mapReal maps a real file, failing unless it is one session.
func mapReal(t *testing.T, path string) []schema.Envelope {
	t.Helper()
	var c collect
	res, err := agentlog.ReadFile(Format{}, path, agentlog.Options{}, &c)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.plans) != 1 || len(res.Sessions) != 1 {
		t.Fatalf("%s: %d sessions, want 1", path, len(c.plans))
	}
	return c.events[c.plans[0].ID]
}

// fileCalls are the tool_use ids of a transcript and whether the file
// holds a result for each.
func fileCalls(t *testing.T, path string) (ids []string, answered map[string]bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	answered = map[string]bool{}
	for _, raw := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var l struct {
			Message struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		_ = json.Unmarshal([]byte(raw), &l)
		var blocks []block
		_ = json.Unmarshal(l.Message.Content, &blocks)
		for _, b := range blocks {
			switch b.Type {
			case "tool_use":
				ids = append(ids, b.ID)
			case "tool_result":
				answered[b.ToolUseID] = true
			}
		}
	}
	return ids, answered
}

// TestRealFilesOneSessionEveryCallPaired: each real transcript is one
// session in which every tool call of the file is requested and has its
// result when the file has one (whatever line the result is parented to,
// parallel calls included), and stays open only when the file ends
// without it. The 39-line file has 6 calls, all paired.
func TestRealFilesOneSessionEveryCallPaired(t *testing.T) {
	for _, path := range realFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			events := mapReal(t, path)
			st := session.New(events[0].SessionID)
			status := map[string]string{}
			for i := range events {
				if err := st.Apply(&events[i]); err != nil {
					t.Fatal(err)
				}
				switch events[i].Type {
				case schema.TypeToolRequested:
					status[events[i].ToolCallID] = "open"
				case schema.TypeToolResult:
					status[events[i].ToolCallID] = "paired"
				}
			}
			ids, answered := fileCalls(t, path)
			for _, id := range ids {
				want := "open"
				if answered[id] {
					want = "paired"
				}
				if status[id] != want {
					t.Errorf("call %s is %q, want %s", id, status[id], want)
				}
			}
			if len(status) != len(ids) {
				t.Errorf("%d calls in the session, %d in the file", len(status), len(ids))
			}
			if strings.HasPrefix(filepath.Base(path), "d6e0bada") {
				paired := 0
				for _, s := range status {
					if s == "paired" {
						paired++
					}
				}
				if len(ids) != 6 || paired != 6 {
					t.Errorf("%d calls, %d paired: want 6 and 6", len(ids), paired)
				}
			}
		})
	}
}

// sdkMessage is one model-visible message, as the SDK's reader or the
// session gives it: lines of one assistant message that follow each other
// are one message (sessionlog's message/assistant), under its first
// line's uuid.
type sdkMessage struct {
	Type       string   `json:"type"`
	UUID       string   `json:"uuid"`
	MessageID  string   `json:"messageId"`
	ToolUse    []string `json:"toolUse"`
	ToolResult []string `json:"toolResult"`
}

func (m sdkMessage) String() string {
	return fmt.Sprintf("%s %s use=%v result=%v", m.Type, m.UUID, m.ToolUse, m.ToolResult)
}

// groupSDK joins the SDK's consecutive assistant lines of one message.
func groupSDK(in []sdkMessage) []sdkMessage {
	var out []sdkMessage
	for _, m := range in {
		if n := len(out); n > 0 && m.Type == "assistant" && out[n-1].Type == "assistant" && out[n-1].MessageID == m.MessageID {
			out[n-1].ToolUse = append(out[n-1].ToolUse, m.ToolUse...)
			continue
		}
		if m.ToolUse == nil {
			m.ToolUse = []string{}
		}
		if m.ToolResult == nil {
			m.ToolResult = []string{}
		}
		out = append(out, m)
	}
	return out
}

// lineOf is the uuid of the line an event came from (its id is
// "<uuid>.<n>").
func lineOf(e schema.Envelope) string {
	if i := strings.LastIndexByte(e.EventID, '.'); i > 0 {
		return e.EventID[:i]
	}
	return e.EventID
}

// sessionMessages are the session's model-visible messages in the SDK's
// terms: a user message per prompt, compact summary or line of results,
// an assistant message per message/assistant with its calls.
func sessionMessages(events []schema.Envelope) []sdkMessage {
	out := []sdkMessage{}
	for _, e := range agentlog.VisibleEvents(events) {
		last := len(out) - 1
		switch e.Type {
		case schema.TypeMessageUser, schema.TypeCompactionEnded:
			out = append(out, sdkMessage{Type: "user", UUID: lineOf(e), ToolUse: []string{}, ToolResult: []string{}})
		case schema.TypeMessageAssistant:
			out = append(out, sdkMessage{Type: "assistant", UUID: lineOf(e), ToolUse: []string{}, ToolResult: []string{}})
		case schema.TypeToolRequested:
			if last < 0 || out[last].Type != "assistant" {
				out = append(out, sdkMessage{Type: "assistant", UUID: "(none)", ToolUse: []string{}, ToolResult: []string{}})
				last++
			}
			out[last].ToolUse = append(out[last].ToolUse, e.ToolCallID)
		case schema.TypeToolResult:
			if last < 0 || out[last].UUID != lineOf(e) {
				out = append(out, sdkMessage{Type: "user", UUID: lineOf(e), ToolUse: []string{}, ToolResult: []string{}})
				last = len(out) - 1
			}
			out[last].ToolResult = append(out[last].ToolResult, e.ToolCallID)
		}
	}
	return out
}

// ccLine is a Claude Code line of type typ (user, assistant, progress,
// boundary: a compact_boundary, summary: a compact summary, stop: the
// stop_hook_summary that ends a turn).
func ccLine(typ, uuid, parent, content string) string {
	p := `null`
	if parent != "" {
		p = `"` + parent + `"`
	}
	head := `"uuid":"` + uuid + `","parentUuid":` + p + `,"sessionId":"s","timestamp":"2026-02-10T22:00:00Z"`
	switch typ {
	case "progress":
		return `{"type":"progress",` + head + `}`
	case "stop":
		return `{"type":"system","subtype":"stop_hook_summary",` + head + `}`
	case "boundary":
		// A boundary whose logical parent is not in the file.
		return `{"type":"system","subtype":"compact_boundary",` + head + `,"logicalParentUuid":"not-in-the-file","content":"Conversation compacted"}`
	case "summary":
		return `{"type":"user",` + head + `,"isCompactSummary":true,"message":{"role":"user","content":` + content + `}}`
	case "assistant":
		return `{"type":"assistant",` + head + `,"message":{"id":"m-` + uuid + `","role":"assistant","content":` + content + `}}`
	}
	return `{"type":"` + typ + `",` + head + `,"message":{"role":"` + typ + `","content":` + content + `}}`
}

// handMade writes transcripts the real files lack into dir: a prompt that
// goes back (through a progress line) to an earlier reply, and a
// compact_boundary whose logical parent is not in the file.
func handMade(t *testing.T, dir string) []string {
	t.Helper()
	files := map[string][]string{
		"0a0a0a0a-0000-4000-8000-000000000000": {
			ccLine("user", "u1", "", `"one"`),
			ccLine("assistant", "a1", "u1", `[{"type":"text","text":"first"}]`),
			ccLine("progress", "p1", "a1", ""),
			ccLine("user", "u2", "p1", `"two"`),
			ccLine("assistant", "a2", "u2", `[{"type":"text","text":"second"}]`),
			ccLine("user", "u3", "p1", `"two, again"`),
			ccLine("assistant", "a3", "u3", `[{"type":"text","text":"third"}]`),
			ccLine("user", "u4", "a3", `"four"`),
		},
		"0b0b0b0b-0000-4000-8000-000000000000": {
			ccLine("user", "u1", "", `"one"`),
			ccLine("assistant", "a1", "u1", `[{"type":"text","text":"first"}]`),
			ccLine("boundary", "b1", "", ""),
			ccLine("summary", "s1", "b1", `"the summary"`),
			ccLine("user", "u2", "s1", `"two"`),
			ccLine("assistant", "a2", "u2", `[{"type":"text","text":"second"}]`),
			ccLine("stop", "h1", "a2", ""),
		},
	}
	var paths []string
	for _, name := range []string{"0a0a0a0a-0000-4000-8000-000000000000", "0b0b0b0b-0000-4000-8000-000000000000"} {
		p := filepath.Join(dir, name+".jsonl")
		if err := os.WriteFile(p, []byte(strings.Join(files[name], "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// TestCompactBoundaryKeepsTheSession: a compact_boundary whose logical
// parent is not in the file does not cut the session: the lines before it
// stay, and the model's context is the summary and what follows.
func TestCompactBoundaryKeepsTheSession(t *testing.T) {
	events := mapReal(t, handMade(t, t.TempDir())[1])
	var created schema.SessionCreated
	_ = json.Unmarshal(events[0].Data, &created)
	if created.Title != "one" {
		t.Errorf("title %q, want the first prompt", created.Title)
	}
	var seen []string
	for _, m := range sessionMessages(events) {
		seen = append(seen, m.UUID)
	}
	if got := strings.Join(seen, " "); got != "s1 u2 a2" {
		t.Errorf("model-visible lines %q, want s1 u2 a2", got)
	}
	lines := 0
	for _, e := range events {
		if e.Type == agentlog.TypeSourceLine {
			lines++
		}
	}
	if lines != 7 {
		t.Errorf("%d source lines, want 7", lines)
	}
}

// TestSDKMessages holds the session of each real transcript against the
// Claude Agent SDK's own reader: getSessionMessages of
// @anthropic-ai/claude-agent-sdk (clients/claude-agent-sdk, run by
// test/messages.mjs) returns, message for message, what the session's
// model-visible context holds: the same roles, lines, tool_use ids and
// tool_result ids, in the same order; the hand-made files too (a rewind, a
// compaction whose boundary's parent is not in the file). Node and the
// package must be installed (make node-deps): the test fails without them.
func TestSDKMessages(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "clients", "claude-agent-sdk")
	node := testbin.Node(t, dir, filepath.Join("node_modules", "@anthropic-ai", "claude-agent-sdk", "package.json"))
	files := append(realFiles(t), handMade(t, t.TempDir())...)
	var args []string
	for _, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, abs)
	}
	out := testbin.RunNode(t, node, dir, nil, append([]string{filepath.Join("test", "messages.mjs")}, args...)...)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(files) {
		t.Fatalf("%d answers for %d files:\n%s", len(lines), len(files), out)
	}
	for i, l := range lines {
		var r struct {
			File     string       `json:"file"`
			Messages []sdkMessage `json:"messages"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(files[i]), func(t *testing.T) {
			if len(r.Messages) == 0 {
				t.Fatalf("the SDK reads no message of %s", r.File)
			}
			if strings.HasPrefix(filepath.Base(files[i]), "d6e0bada") && len(r.Messages) != 21 {
				t.Errorf("the SDK reads %d messages, want 21", len(r.Messages))
			}
			want := groupSDK(r.Messages)
			got := sessionMessages(mapReal(t, files[i]))
			n := max(len(want), len(got))
			for j := 0; j < n; j++ {
				var w, g string
				if j < len(want) {
					w = want[j].String()
				}
				if j < len(got) {
					g = got[j].String()
				}
				if w != g {
					t.Errorf("message %d: the session has %q, the SDK %q", j+1, g, w)
				}
			}
		})
	}
}

// TestPromptThatGoesBackIsRewind: a prompt parented (through a progress
// line) to an assistant line before the conversation's last is
// context/rewound to where that line's events end, in the same session;
// the abandoned exchange stays in the log but leaves the model's context.
func TestPromptThatGoesBackIsRewind(t *testing.T) {
	events := mapReal(t, handMade(t, t.TempDir())[0])
	var rewinds []schema.ContextRewound
	for _, e := range events {
		if e.Type == schema.TypeContextRewound {
			var d schema.ContextRewound
			_ = json.Unmarshal(e.Data, &d)
			rewinds = append(rewinds, d)
		}
	}
	if len(rewinds) != 1 || events[rewinds[0].ToSeq-1].EventID != rewinds[0].ToEventID || !strings.HasPrefix(rewinds[0].ToEventID, "a1.") {
		t.Fatalf("rewinds %+v", rewinds)
	}
	var seen []string
	for _, m := range sessionMessages(events) {
		seen = append(seen, m.UUID)
	}
	if got := strings.Join(seen, " "); got != "u1 a1 u3 a3 u4" {
		t.Errorf("model-visible lines %q, want u1 a1 u3 a3 u4", got)
	}
}

package formats_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/testbin"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/agentlog/codex"
	"github.com/sessionlog/sessionlog/pkg/agentlog/pi"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// real are the real transcripts of each format (testdata/real/README.md).
var real = []struct {
	dir string
	f   agentlog.Format
}{
	{"cc", claudecode.Format{}},
	{"codex", codex.Format{}},
	{"pi", pi.Format{}},
}

var all = []agentlog.Format{claudecode.Format{}, codex.Format{}, pi.Format{}}

func realFiles(t *testing.T, dir string) []string {
	return agentlogtest.Files(t, filepath.Join("..", "testdata", "real", dir, "*.jsonl"))
}

// TestRealFilesExportToTheirOwnFormat: each real transcript exported to
// its own format is the file, line for line deep-equal as JSON values, and
// nothing more, though a codex file ends with a call without output and
// the pi file has calls without results.
func TestRealFilesExportToTheirOwnFormat(t *testing.T) {
	for _, r := range real {
		for _, path := range realFiles(t, r.dir) {
			t.Run(r.dir+"/"+filepath.Base(path), func(t *testing.T) { agentlogtest.CheckOwnExport(t, r.f, path) })
		}
	}
}

// TestRealFilesRoundTrip: each real transcript exported to every format
// from its events and imported again keeps its model-visible context, its
// calls paired as they were.
func TestRealFilesRoundTrip(t *testing.T) {
	for _, r := range real {
		for _, path := range realFiles(t, r.dir) {
			for _, to := range all {
				t.Run(r.dir+"/"+to.Name()+"/"+filepath.Base(path), func(t *testing.T) { agentlogtest.CheckRoundTrip(t, r.f, path, to) })
			}
		}
	}
}

// TestExportsCarryOnlyTheirFormatsFields: each real transcript exported
// to another format from its events names the model and provider the
// session recorded in that format's own fields, none of another format's
// (no provider or api "sessionlog" in pi, no Claude Code version as
// codex's cli_version), usage in the format's own shape, and no time of
// 1970 or year 1 even when the first events have the epoch (a line
// without a time before any line with one).
func TestExportsCarryOnlyTheirFormatsFields(t *testing.T) {
	for _, r := range real {
		for _, path := range realFiles(t, r.dir) {
			c, _, _ := agentlogtest.Read(t, r.f, path)
			events := agentlogtest.FromElsewhere(c.Sessions[0].Events)
			for i := range events[:min(5, len(events))] {
				events[i].Time = time.Unix(0, 0).UTC()
			}
			for _, to := range all {
				t.Run(r.dir+"/"+to.Name()+"/"+filepath.Base(path), func(t *testing.T) {
					checkFields(t, r.f.Name(), to.Name(), agentlogtest.Export(t, to, events))
				})
			}
		}
	}
}

var usageKeys = map[string][]string{
	claudecode.Name: {"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"},
	codex.Name:      {"input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens", "total_tokens"},
	pi.Name:         {"input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost"},
}

// wantProvider is the provider an export names for a session from agent.
var wantProvider = map[string]string{claudecode.Name: "anthropic", codex.Name: "openai", pi.Name: ""}

func checkFields(t *testing.T, from, to string, out []byte) {
	t.Helper()
	models := 0
	for n, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		where := fmt.Sprintf("%s -> %s line %d", from, to, n+1)
		if ts, _ := l["timestamp"].(string); ts == "" || strings.HasPrefix(ts, "1970-") || strings.HasPrefix(ts, "0001-") {
			t.Errorf("%s: timestamp %q", where, ts)
		}
		if strings.Contains(line, `"sessionlog"`) && !(to == codex.Name && n == 0) { // codex's originator names the writer
			t.Errorf("%s names sessionlog: %.300s", where, line)
		}
		var msg map[string]any
		switch to {
		case pi.Name:
			msg, _ = l["message"].(map[string]any)
			if msg == nil || msg["role"] != "assistant" {
				continue
			}
			models++
			if p := wantProvider[from]; p != "" && msg["provider"] != p {
				t.Errorf("%s: provider %v, want %s", where, msg["provider"], p)
			}
			if msg["model"] == nil || msg["model"] == "" || (msg["provider"] != nil && msg["api"] == nil) {
				t.Errorf("%s: model %v provider %v api %v", where, msg["model"], msg["provider"], msg["api"])
			}
		case claudecode.Name:
			if _, ok := l["version"]; ok && from != to {
				t.Errorf("%s: Claude Code's version field in a session from %s", where, from)
			}
			msg, _ = l["message"].(map[string]any)
			if msg == nil || msg["role"] != "assistant" {
				continue
			}
			models++
			if m, _ := msg["model"].(string); m == "" || m == "<synthetic>" || strings.Contains(m, "/") {
				t.Errorf("%s: model %q, want the session's", where, m)
			}
		case codex.Name:
			p, _ := l["payload"].(map[string]any)
			if l["type"] == "session_meta" && from != to && (p["cli_version"] != "" || p["model_provider"] != nil) {
				t.Errorf("%s: cli_version %v, model_provider %v in a session from %s", where, p["cli_version"], p["model_provider"], from)
			}
			if p["type"] == "token_count" {
				if info, _ := p["info"].(map[string]any); info != nil {
					msg = map[string]any{"usage": info["last_token_usage"]}
				}
			}
		}
		if u, ok := msg["usage"].(map[string]any); ok && from != to {
			for k := range u {
				if !slices.Contains(usageKeys[to], k) {
					t.Errorf("%s: usage field %s is not %s's", where, k, to)
				}
			}
		}
	}
	if to != codex.Name && models == 0 {
		t.Errorf("%s -> %s: no assistant message", from, to)
	}
}

// TestRealFilesRepairedExport: a real transcript that leaves calls open,
// repaired as the repairer does, exports to its own format as the file's
// lines, deep-equal, followed by what the repair recorded; in every
// format each call then has exactly one result, the repaired ones an
// error saying to check before any retry.
func TestRealFilesRepairedExport(t *testing.T) {
	files := 0
	for _, r := range real {
		for _, path := range realFiles(t, r.dir) {
			c, _, _ := agentlogtest.Read(t, r.f, path)
			events := c.Sessions[0].Events
			st := session.New(events[0].SessionID)
			for i := range events {
				if err := st.Apply(&events[i]); err != nil {
					t.Fatal(err)
				}
			}
			repair := session.PlanRepair(st, session.RepairOptions{Now: st.LastTime})
			if len(repair) == 0 {
				continue // nothing open
			}
			files++
			name := r.dir + "/" + filepath.Base(path)
			t.Run("own/"+name, func(t *testing.T) {
				want := agentlogtest.CompleteLines(t, path)
				got := agentlogtest.DecodeLines(t, agentlogtest.Export(t, r.f, append(events, repair...)))
				if len(got) <= len(want) || !reflect.DeepEqual(got[:len(want)], want) {
					t.Errorf("%d lines, want the file's %d deep-equal, then the repair's", len(got), len(want))
				}
			})
			for _, to := range all {
				t.Run(to.Name()+"/"+name, func(t *testing.T) { agentlogtest.CheckRepairedExport(t, r.f, path, to) })
			}
		}
	}
	if files < 2 {
		t.Errorf("%d real files leave calls open, want the codex and pi ones", files)
	}
}

// sdkDir is clients/claude-agent-sdk: the Claude Agent SDK in Node.
const sdkDir = "../../../clients/claude-agent-sdk"

// readAsClaudeCode gives the messages the Claude Agent SDK's
// getSessionMessages reads from the Claude Code transcript at path (named
// <session id>.jsonl) as agentlogtest.Steps gives a session's: a user
// message "user" (Claude Code's "[Request interrupted by user]" included:
// the model reads it, and the import maps it to message/user), a
// tool_result block "result <id>", an assistant message "assistant" and
// its tool_use blocks "call <id>".
func readAsClaudeCode(t *testing.T, path string) []string {
	t.Helper()
	node := testbin.Node(t, sdkDir, "node_modules/@anthropic-ai/claude-agent-sdk/package.json")
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	var messages []struct {
		Type    string `json:"type"`
		Message struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if err := json.Unmarshal(testbin.RunNode(t, node, sdkDir, nil, "test/export-messages.mjs", abs), &messages); err != nil {
		t.Fatalf("export-messages.mjs %s: %v", path, err)
	}
	var steps []string
	for _, m := range messages {
		var text string
		if json.Unmarshal(m.Message.Content, &text) == nil {
			steps = append(steps, m.Type)
			continue
		}
		var blocks []struct {
			Type, ID, Text string
			ToolUseID      string `json:"tool_use_id"`
		}
		_ = json.Unmarshal(m.Message.Content, &blocks)
		var calls, results []string
		said := m.Type == "assistant"
		for _, b := range blocks {
			switch b.Type {
			case "tool_use":
				calls = append(calls, "call "+b.ID)
			case "tool_result":
				results = append(results, "result "+b.ToolUseID)
			case "text":
				said = true
			}
		}
		if said {
			steps = append(steps, m.Type)
		}
		steps = append(append(steps, calls...), results...)
	}
	return steps
}

// TestExportsReadByClaudeAgentSDK: the real transcripts of every format,
// exported to Claude Code from their events, read by the Claude Agent
// SDK's getSessionMessages, give the session's messages, tool calls and
// results (then the error results the export gives calls left open).
func TestExportsReadByClaudeAgentSDK(t *testing.T) {
	for _, r := range real {
		for _, path := range realFiles(t, r.dir) {
			t.Run(r.dir+"/"+filepath.Base(path), func(t *testing.T) {
				c, _, _ := agentlogtest.Read(t, r.f, path)
				want := agentlogtest.Steps(c.Sessions[0].Events)
				out := agentlogtest.Export(t, claudecode.Format{}, agentlogtest.FromElsewhere(c.Sessions[0].Events))
				var first struct {
					SessionID string `json:"sessionId"`
				}
				_ = json.Unmarshal(out[:bytes.IndexByte(out, '\n')], &first)
				file := filepath.Join(t.TempDir(), first.SessionID+".jsonl")
				if err := os.WriteFile(file, out, 0o644); err != nil {
					t.Fatal(err)
				}
				got := readAsClaudeCode(t, file)
				i := 0
				for i < min(len(got), len(want)) && got[i] == want[i] {
					i++
				}
				if i < len(want) {
					t.Fatalf("the SDK reads the export differently at step %d of %d/%d:\n got %v\nwant %v", i, len(got), len(want),
						got[max(i-3, 0):min(i+4, len(got))], want[max(i-3, 0):min(i+4, len(want))])
				}
				for _, g := range got[len(want):] {
					if !strings.HasPrefix(g, "result ") {
						t.Errorf("after the session's steps the SDK reads %q, want only the results of open calls", g)
					}
				}
			})
		}
	}
}

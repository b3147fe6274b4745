package pi_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/testbin"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/agentlog/codex"
	"github.com/sessionlog/sessionlog/pkg/agentlog/pi"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// readerDir is clients/pi-reader: pi's own SessionManager in Node.
const readerDir = "../../../clients/pi-reader"

// piContext is what clients/pi-reader/read.mjs prints of a file.
type piContext struct {
	Version  int `json:"version"`
	Messages []struct {
		Role               string          `json:"role"`
		Content            json.RawMessage `json:"content"`
		ToolCallID         string          `json:"toolCallId"`
		ExcludeFromContext bool            `json:"excludeFromContext"`
	} `json:"messages"`
	Model *struct {
		Provider string `json:"provider"`
		ModelID  string `json:"modelId"`
	} `json:"model"`
}

// readAsPi opens the file at path with pi's SessionManager and gives the
// messages of its buildSessionContext as agentlogtest.Steps gives a
// session's: what convertToLlm gives the model as a user message is
// "user", an assistant message "assistant" and its toolCall blocks
// "call <id>", a toolResult "result <id>", the compaction summary
// "summary".
func readAsPi(t *testing.T, path string) ([]string, piContext) {
	t.Helper()
	node := testbin.Node(t, readerDir, "node_modules/@mariozechner/pi-coding-agent/package.json")
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	var c piContext
	if err := json.Unmarshal(testbin.RunNode(t, node, readerDir, nil, "read.mjs", abs), &c); err != nil {
		t.Fatalf("read.mjs %s: %v", path, err)
	}
	var steps []string
	for _, m := range c.Messages {
		switch m.Role {
		case "bashExecution":
			if !m.ExcludeFromContext {
				steps = append(steps, "user")
			}
		case "user", "custom", "branchSummary":
			steps = append(steps, "user")
		case "compactionSummary":
			steps = append(steps, "summary")
		case "assistant":
			steps = append(steps, "assistant")
			var blocks []struct{ Type, ID string }
			_ = json.Unmarshal(m.Content, &blocks)
			for _, b := range blocks {
				if b.Type == "toolCall" {
					steps = append(steps, "call "+b.ID)
				}
			}
		case "toolResult":
			steps = append(steps, "result "+m.ToolCallID)
		default:
			t.Errorf("%s: pi gives a message of role %q, which this test does not know", filepath.Base(path), m.Role)
		}
	}
	return steps, c
}

// checkReadAsPi: the main session of the file at path has the messages,
// tool calls and results of pi's own reading of the file, in its order.
func checkReadAsPi(t *testing.T, path string) []string {
	t.Helper()
	want, _ := readAsPi(t, path)
	c, _, _ := agentlogtest.Read(t, pi.Format{}, path)
	got := agentlogtest.Steps(c.Sessions[0].Events)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: sessionlog's session differs from pi's buildSessionContext at step %d of %d/%d:\n got %v\nwant %v",
			filepath.Base(path), firstDiff(got, want), len(got), len(want), around(got, firstDiff(got, want)), around(want, firstDiff(got, want)))
	}
	return got
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func around(s []string, i int) []string { return s[max(i-3, 0):min(i+4, len(s))] }

// TestReadAsPiDoes: the real format version 1 file (no ids: pi migrates
// it when it opens it) and the fixtures give the messages, calls and
// results pi's own reader gives.
func TestReadAsPiDoes(t *testing.T) {
	files := append(agentlogtest.Files(t, "../testdata/real/pi/*.jsonl"), agentlogtest.Files(t, "testdata/sessions/*/*.jsonl")...)
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			steps := checkReadAsPi(t, path)
			n := map[string]int{}
			for _, s := range steps {
				k, _, _ := strings.Cut(s, " ")
				n[k]++
			}
			t.Logf("%s: %d messages (%d user, %d assistant), %d tool calls, %d results", filepath.Base(path),
				n["user"]+n["assistant"], n["user"], n["assistant"], n["call"], n["result"])
		})
	}
}

// TestOlderVersionsReadAsPiDoes: a version 1 file with a compaction that
// keeps its last entries (firstKeptEntryIndex) and a version 2 file with
// a hookMessage give what pi's reader gives after its migration.
func TestOlderVersionsReadAsPiDoes(t *testing.T) {
	const (
		user1 = `{"role":"user","content":[{"type":"text","text":"%s"}],"timestamp":1763681581544}`
		asst1 = `{"role":"assistant","content":[{"type":"text","text":"%s"}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1763681581545}`
	)
	msg := func(at, format, text string) string {
		return `{"type":"message","timestamp":"2025-11-20T23:33:0` + at + `.000Z","message":` + fmt.Sprintf(format, text) + `}`
	}
	v1 := []string{
		`{"type":"session","id":"d703a1a9-0000-4fb1-b512-c9738b1fe617","timestamp":"2025-11-20T23:33:00.000Z","cwd":"/tmp","provider":"anthropic","modelId":"claude-sonnet-4-5","thinkingLevel":"off"}`,
		msg("1", user1, "first"),
		msg("2", asst1, "one"),
		`{"type":"thinking_level_change","timestamp":"2025-11-20T23:33:03.000Z","thinkingLevel":"minimal"}`,
		msg("4", user1, "second"),
		msg("5", asst1, "two"),
		`{"type":"compaction","timestamp":"2025-11-20T23:33:06.000Z","summary":"we said one","firstKeptEntryIndex":4,"tokensBefore":100}`,
		msg("7", user1, "third"),
		msg("8", asst1, "three"),
	}
	v2 := []string{
		`{"type":"session","version":2,"id":"d703a1a9-0000-4fb1-b512-c9738b1fe618","timestamp":"2025-11-20T23:33:00.000Z","cwd":"/tmp"}`,
		`{"type":"message","id":"e1","parentId":null,"timestamp":"2025-11-20T23:33:01.000Z","message":` + fmt.Sprintf(user1, "first") + `}`,
		`{"type":"message","id":"e2","parentId":"e1","timestamp":"2025-11-20T23:33:02.000Z","message":{"role":"hookMessage","customType":"hook","content":"from a hook","display":true,"timestamp":1763681581546}}`,
		`{"type":"message","id":"e3","parentId":"e2","timestamp":"2025-11-20T23:33:03.000Z","message":` + fmt.Sprintf(asst1, "one") + `}`,
	}
	for name, lines := range map[string][]string{"v1.jsonl": v1, "v2.jsonl": v2} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "2025-11-20T23-33-00-000Z_"+name)
			if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			c, res, _ := agentlogtest.Read(t, pi.Format{}, path)
			if res.Damaged != 0 {
				t.Errorf("%d damaged lines, want none", res.Damaged)
			}
			checkReadAsPi(t, path)
			if name == "v1.jsonl" {
				want := []agentlogtest.Entry{{Role: "summary", Text: "we said one"}, {Role: "user", Text: "second"},
					{Role: "assistant", Text: "two"}, {Role: "user", Text: "third"}, {Role: "assistant", Text: "three"}}
				if got := agentlogtest.Context(c.Sessions[0].Events); !reflect.DeepEqual(got, want) {
					t.Errorf("context %+v, want %+v", got, want)
				}
			}
		})
	}
}

// TestVersion1MapsInPrefixes: the events of the first k lines of the real
// version 1 file are the first events of the whole file's, for k from the
// first prompt on (a file of the header alone gives a session/created
// without the title the prompt brings): the migration's chain depends on
// the lines before a line only.
func TestVersion1MapsInPrefixes(t *testing.T) {
	const path = "../testdata/real/pi/large-session.jsonl"
	whole, _, _ := agentlogtest.Read(t, pi.Format{}, path)
	all := whole.Sessions[0].Events
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	dir := t.TempDir()
	for _, k := range []int{2, 3, 4, 5, 6, 50, 216, 500, 1000, len(lines) - 1} {
		part := filepath.Join(dir, filepath.Base(path))
		if err := os.WriteFile(part, []byte(strings.Join(lines[:k], "")), 0o644); err != nil {
			t.Fatal(err)
		}
		var c agentlogtest.Collect
		var cont *agentlog.Continuation
		if _, err := agentlog.ReadFile(pi.Format{}, part, agentlog.Options{Continue: func(x *agentlog.Continuation) { cont = x }}, &c); err != nil {
			t.Fatal(err)
		}
		got := c.Sessions[0].Events
		if len(got) > len(all) || !reflect.DeepEqual(got, all[:len(got)]) {
			t.Errorf("the first %d lines give %d events, not a prefix of the file's %d", k, len(got), len(all))
			continue
		}
		// Continued with the rest of the file line by line, as the SDK
		// store and a follower do: the whole file's events.
		emit := func(e schema.Envelope) error { got = append(got, e); return nil }
		for _, l := range lines[k:] {
			if l == "" {
				continue
			}
			if err := cont.Add([]byte(strings.TrimSuffix(l, "\n")), emit); err != nil {
				t.Fatalf("k=%d: %v", k, err)
			}
		}
		if err := cont.End(emit); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, all) {
			t.Errorf("the first %d lines continued with the rest give %d events, not the file's %d", k, len(got), len(all))
		}
	}
}

// TestExportsOpenInPi: the real transcripts of every format, exported to
// pi from their events, open in pi's own SessionManager, and its
// buildSessionContext gives the session's messages, tool calls and
// results (then the error results the export gives calls left open), with
// the model and provider the session recorded.
func TestExportsOpenInPi(t *testing.T) {
	sources := []struct {
		f        agentlog.Format
		glob     string
		provider string
	}{
		{claudecode.Format{}, "../testdata/real/cc/*.jsonl", "anthropic"},
		{codex.Format{}, "../testdata/real/codex/*.jsonl", "openai"},
		{pi.Format{}, "../testdata/real/pi/*.jsonl", "anthropic"},
	}
	for _, s := range sources {
		for _, path := range agentlogtest.Files(t, s.glob) {
			t.Run(s.f.Name()+"/"+filepath.Base(path), func(t *testing.T) {
				c, _, _ := agentlogtest.Read(t, s.f, path)
				want := agentlogtest.Steps(c.Sessions[0].Events)
				file := filepath.Join(t.TempDir(), "2026-01-01T00-00-00-000Z_export.jsonl")
				if err := os.WriteFile(file, agentlogtest.Export(t, pi.Format{}, agentlogtest.FromElsewhere(c.Sessions[0].Events)), 0o644); err != nil {
					t.Fatal(err)
				}
				got, ctx := readAsPi(t, file)
				i := firstDiff(got, want)
				if i < len(want) {
					t.Fatalf("pi reads the export differently at step %d of %d/%d:\n got %v\nwant %v", i, len(got), len(want), around(got, i), around(want, i))
				}
				for _, g := range got[len(want):] {
					if !strings.HasPrefix(g, "result ") {
						t.Errorf("after the session's steps pi reads %q, want only the results of open calls", g)
					}
				}
				if ctx.Model == nil || ctx.Model.Provider != s.provider || ctx.Model.ModelID == "" {
					t.Errorf("pi resumes with model %+v, want the session's, from %s", ctx.Model, s.provider)
				}
			})
		}
	}
}

// TestRepairedVersion1ExportOpensInPi: the real version 1 file, repaired
// (its 18 open calls closed as outcome_unknown) and exported to pi, is the
// file's lines followed by entries of version 3 shape; pi migrates it as
// one chain and reads what sessionlog reads of it, every call answered.
func TestRepairedVersion1ExportOpensInPi(t *testing.T) {
	c, _, _ := agentlogtest.Read(t, pi.Format{}, "../testdata/real/pi/large-session.jsonl")
	events := c.Sessions[0].Events
	st := session.New(events[0].SessionID)
	for i := range events {
		if err := st.Apply(&events[i]); err != nil {
			t.Fatal(err)
		}
	}
	events = append(events, session.PlanRepair(st, session.RepairOptions{Now: st.LastTime})...)
	file := filepath.Join(t.TempDir(), "2025-11-20T23-33-50-805Z_d703a1a9-1b7b-4fb1-b512-c9738b1fe617.jsonl")
	if err := os.WriteFile(file, agentlogtest.Export(t, pi.Format{}, events), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := checkReadAsPi(t, file)
	calls, results := 0, 0
	for _, s := range steps {
		calls += boolInt(strings.HasPrefix(s, "call "))
		results += boolInt(strings.HasPrefix(s, "result "))
	}
	if calls != results || calls != 391 {
		t.Errorf("%d calls, %d results, want the file's 391 calls all answered", calls, results)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

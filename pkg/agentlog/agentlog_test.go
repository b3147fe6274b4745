package agentlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// toy is a minimal format for the core's tests: one JSON object a line,
// {"id","parent","kind","text","call","error"}.
type toy struct{}

type toyLine struct {
	ID     string          `json:"id"`
	Parent string          `json:"parent"`
	Kind   string          `json:"kind"`
	Msg    string          `json:"msg"`
	Text   string          `json:"text"`
	Call   string          `json:"call"`
	Error  bool            `json:"error"`
	Stop   string          `json:"stop"`
	Input  json.RawMessage `json:"input"`
}

func (toy) Name() string                   { return "toy" }
func (toy) IsSessionFile(path string) bool { return strings.HasSuffix(path, ".jsonl") }
func (toy) SessionID(path string, _ []byte) (string, error) {
	return SessionID("toy", strings.TrimSuffix(filepath.Base(path), ".jsonl")), nil
}
func (toy) NewMapper(string) Mapper         { return toyMapper{} }
func (toy) Export(io.Writer, *Export) error { return errors.New("not used") }

type toyMapper struct{}

func (toyMapper) Decode(raw []byte) (Line, error) {
	var l toyLine
	if err := json.Unmarshal(raw, &l); err != nil {
		return Line{}, err
	}
	return Line{Key: l.ID, ID: l.ID, Parent: l.Parent, Value: l}, nil
}

func (toyMapper) Map(b *Builder, line Line) {
	l := line.Value.(toyLine)
	text, _ := json.Marshal(l.Text)
	switch l.Kind {
	case "user":
		b.Prompt(text)
	case "assistant":
		a := Assistant{ID: l.Msg, Stop: l.Stop}
		if l.Text != "" {
			a.Content = []json.RawMessage{json.RawMessage(`{"type":"text","text":` + string(text) + `}`)}
		}
		if l.Call != "" {
			a.Calls = []ToolCall{{ID: l.Call, Name: "bash", Input: l.Input}}
		}
		b.Assistant(a)
	case "result":
		b.ToolResult(l.Call, l.Error, text)
	case "interrupt":
		b.Interrupt()
	case "compact":
		b.Compaction(l.Text)
	default:
		b.Skip("unknown kind " + l.Kind)
	}
}

// collect is a Sink that keeps everything.
type collect struct {
	plans  []Plan
	events map[string][]schema.Envelope
}

func (c *collect) Session(p Plan) error {
	c.plans = append(c.plans, p)
	if c.events == nil {
		c.events = map[string][]schema.Envelope{}
	}
	return nil
}
func (c *collect) Event(e schema.Envelope) error {
	c.events[e.SessionID] = append(c.events[e.SessionID], e)
	return nil
}
func (c *collect) Done() error { return nil }

func render(events []schema.Envelope) string {
	var sb strings.Builder
	for _, e := range events {
		var idl []string
		for _, id := range []string{e.TurnID, e.AttemptID, e.ToolCallID} {
			if id != "" {
				idl = append(idl, id)
			}
		}
		ids := strings.Join(idl, " ")
		fmt.Fprintf(&sb, "%d %s %s [%s] %s\n", e.Seq, e.EventID, e.Type, ids, e.Data)
	}
	return sb.String()
}

func write(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s1.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadFileMapsTurnsToolsAndTornLine(t *testing.T) {
	p := write(t,
		`{"id":"u1","kind":"user","text":"hello"}`+"\n",
		`{"id":"a1","parent":"u1","kind":"assistant","msg":"m1","text":"let me look"}`+"\n",
		`{"id":"a2","parent":"a1","kind":"assistant","msg":"m1","call":"c1","input":{"cmd":"ls"}}`+"\n",
		`{"id":"a3","parent":"a2","kind":"assistant","msg":"m1","call":"c2","input":{"cmd":"pwd"},"stop":"tool_use"}`+"\n",
		`garbled {`+"\n",
		`{"id":"r1","parent":"a3","kind":"result","call":"c1","text":"a b"}`+"\n",
		`{"id":"r2","parent":"r1","kind":"result","call":"c2","error":true,"text":"denied"}`+"\n",
		`{"id":"x1","parent":"r2","kind":"mystery"}`+"\n",
		`{"id":"a4","parent":"x1","kind":"assistant","msg":"m2","text":"done","stop":"end_turn"}`+"\n",
		`{"id":"u2","parent":"a4","kind":"us`,
	)
	var warned []string
	var c collect
	res, err := ReadFile(toy{}, p, Options{Warn: func(path string, line int, msg string) {
		warned = append(warned, fmt.Sprintf("%s:%d: %s", filepath.Base(path), line, msg))
	}}, &c)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Torn || res.Damaged != 1 || res.Lines != 8 || res.Skipped != 1 {
		t.Errorf("result = %+v", res)
	}
	if len(warned) != 1 || !strings.HasPrefix(warned[0], "s1.jsonl:5: ") {
		t.Errorf("warnings = %q", warned)
	}
	got := render(c.events["toy-s1"])
	for _, want := range []string{
		"1 created session/created [] {\"title\":\"hello\",\"agent\":\"toy\"}",
		"2 u1.0 turn/started [t.u1]",
		"3 u1.1 message/user [t.u1] {\"content\":\"hello\"}",
		"4 u1.2 source/line",
		"5 a1.0 attempt/started [t.u1 a.a1]",
		"message/assistant [t.u1 a.a1] {\"content\":[{\"type\":\"text\",\"text\":\"let me look\"}]}",
		"tool/requested [t.u1 c1] {\"name\":\"bash\",\"input\":{\"cmd\":\"ls\"}}",
		"tool/result [t.u1 c2] {\"status\":\"error\",\"output\":\"denied\"}",
		"turn/ended [t.u1] {\"reason\":\"completed\"}",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	// Mapping again gives the same events: ids come from the source.
	var again collect
	if _, err := ReadFile(toy{}, p, Options{}, &again); err != nil {
		t.Fatal(err)
	}
	if render(again.events["toy-s1"]) != got {
		t.Error("a second mapping differs")
	}
}

func TestReadFileBranchForksAtSafeCut(t *testing.T) {
	p := write(t,
		`{"id":"u1","kind":"user","text":"one"}`+"\n",
		`{"id":"a1","parent":"u1","kind":"assistant","text":"first","stop":"end_turn"}`+"\n",
		`{"id":"u2","parent":"a1","kind":"user","text":"two"}`+"\n",
		`{"id":"a2","parent":"u2","kind":"assistant","text":"second","stop":"end_turn"}`+"\n",
		`{"id":"u3","parent":"a1","kind":"user","text":"two, rewritten"}`+"\n",
		`{"id":"a3","parent":"u3","kind":"assistant","text":"other","stop":"end_turn"}`+"\n",
	)
	var c collect
	res, err := ReadFile(toy{}, p, Options{}, &c)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.plans) != 2 || c.plans[1].ID != "toy-s1-b1" || c.plans[1].Fork == nil {
		t.Fatalf("plans = %+v", c.plans)
	}
	main := c.events["toy-s1"]
	// The main path is u1 a1 u3 a3; u2 and a2 are kept as source lines only.
	if s := render(main); !strings.Contains(s, "two, rewritten") || strings.Contains(s, `"content":"two"`) {
		t.Errorf("main:\n%s", s)
	}
	fork := c.plans[1].Fork
	if fork.ParentID != "toy-s1" || main[fork.Seq-1].EventID != "a1.3" {
		t.Errorf("fork at %+v, main:\n%s", fork, render(main))
	}
	child := c.events["toy-s1-b1"]
	if len(child) == 0 || child[0].Seq != fork.Seq+2 || child[0].Type != schema.TypeTurnStarted {
		t.Errorf("child:\n%s", render(child))
	}
	if res.Lines != 6 || len(res.Sessions) != 2 {
		t.Errorf("result %+v", res)
	}
	x, err := NewExport("toy", main)
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Lines) != 6 || len(x.Events) != 0 {
		t.Errorf("export: %d lines, %d events", len(x.Lines), len(x.Events))
	}
}

func TestSourceLineOverLimitSplitsIntoParts(t *testing.T) {
	big := strings.Repeat("é<\"x", 3000)
	p := write(t,
		`{"id":"u1","kind":"user","text":"`+strings.ReplaceAll(big, `"`, `\"`)+`"}`+"\n",
	)
	var c collect
	if _, err := ReadFile(toy{}, p, Options{MaxEventBytes: 16 << 10}, &c); err != nil {
		t.Fatal(err)
	}
	events := c.events["toy-s1"]
	parts := 0
	for _, e := range events {
		if len(e.Data) > 16<<10 {
			t.Errorf("seq %d is %d bytes", e.Seq, len(e.Data))
		}
		if e.Type == TypeSourceLine {
			parts++
		}
	}
	if parts < 2 {
		t.Fatalf("%d parts:\n%s", parts, render(events))
	}
	x, err := NewExport("toy", events)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(p)
	if len(x.Lines) != 1 || string(x.Lines[0]) != strings.TrimSuffix(string(raw), "\n") {
		t.Errorf("the parts do not give the line back")
	}
}

func TestSessionIDRules(t *testing.T) {
	if got := SessionID("cc", "55604662-cf2a-4331-851a-ec234028f8ca"); got != "cc-55604662-cf2a-4331-851a-ec234028f8ca" {
		t.Errorf("a valid id changed: %q", got)
	}
	got := SessionID("cc", "a b/c.d")
	if !strings.HasPrefix(got, "cc-a-b-c-d-") || len(got) != len("cc-a-b-c-d-")+16 || !schema.ValidSessionID(got) {
		t.Errorf("got %q", got)
	}
	if dot, dash := SessionID("cc", "a.b"), SessionID("cc", "a-b"); dot == dash {
		t.Errorf("a.b and a-b are both %s", dot)
	}
	long := SessionID("cc", strings.Repeat("x", 200))
	if len(long) != 128 || !schema.ValidSessionID(long) || long[111] != '-' {
		t.Errorf("long id %q (%d)", long, len(long))
	}
	if other := SessionID("cc", strings.Repeat("x", 199)+"y"); other == long {
		t.Error("two long ids collide")
	}
	if a, b := FileSessionID("cc-dup", "proj-a/dup.jsonl"), FileSessionID("cc-dup", "proj-b/dup.jsonl"); a == b || !schema.ValidSessionID(a) {
		t.Errorf("file ids %q, %q", a, b)
	}
	if g := GenerationID("cc-x", 2); g != "cc-x-r2" {
		t.Errorf("generation 2 of cc-x is %q", g)
	}
}

// A line key met twice (a line copied in the file) still gives unique
// event ids.
func TestDuplicateKeysGiveUniqueEventIDs(t *testing.T) {
	p := write(t,
		`{"id":"u1","kind":"user","text":"one"}`+"\n",
		`{"id":"u1","kind":"user","text":"one"}`+"\n",
	)
	var c collect
	if _, err := ReadFile(toy{}, p, Options{}, &c); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range c.events["toy-s1"] {
		if seen[e.EventID] {
			t.Errorf("event id %s twice:\n%s", e.EventID, render(c.events["toy-s1"]))
		}
		seen[e.EventID] = true
	}
}

// A branch whose branch point is not a safe cut (a call is open there)
// is a session of its own, the whole path root to leaf, labelled branchOf.
func TestBranchAtUnsafeCutIsOwnSession(t *testing.T) {
	p := write(t,
		`{"id":"u1","kind":"user","text":"one"}`+"\n",
		`{"id":"a1","parent":"u1","kind":"assistant","call":"c1","stop":"tool_use"}`+"\n",
		`{"id":"r1","parent":"a1","kind":"result","call":"c1","text":"ok"}`+"\n",
		`{"id":"r2","parent":"a1","kind":"result","call":"c1","text":"other"}`+"\n",
	)
	var c collect
	if _, err := ReadFile(toy{}, p, Options{}, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.plans) != 2 || c.plans[1].Fork != nil || c.plans[1].FirstSeq != 1 {
		t.Fatalf("plans %+v", c.plans)
	}
	b := render(c.events["toy-s1-b1"])
	// The main path ends at the last line (r2); r1 is the branch.
	for _, want := range []string{`"labels":{"branchOf":"toy-s1"}`, `message/user [t.u1] {"content":"one"}`, `"output":"ok"`} {
		if !strings.Contains(b, want) {
			t.Errorf("no %q in\n%s", want, b)
		}
	}
	if strings.Contains(b, `"output":"other"`) {
		t.Errorf("the branch holds the main path's result:\n%s", b)
	}
	if m := render(c.events["toy-s1"]); !strings.Contains(m, `"output":"other"`) || strings.Contains(m, `"output":"ok"`) {
		t.Errorf("main:\n%s", m)
	}
}

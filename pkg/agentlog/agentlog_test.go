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
	"time"

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
	Time   time.Time       `json:"time"`
}

func (toy) Name() string                   { return "toy" }
func (toy) IsSessionFile(path string) bool { return strings.HasSuffix(path, ".jsonl") }
func (toy) SessionID(path string, _ []byte) (string, error) {
	return SessionID("toy", strings.TrimSuffix(filepath.Base(path), ".jsonl")), nil
}
func (toy) NewMapper(string) Mapper         { return &toyMapper{} }
func (toy) Export(io.Writer, *Export) error { return errors.New("not used") }

// toyMapper rewinds as pi does: a prompt whose parent is not the line
// before it goes back to where its parent's events end.
type toyMapper struct {
	last string
}

func (*toyMapper) Decode(raw []byte) (Line, error) {
	var l toyLine
	if err := json.Unmarshal(raw, &l); err != nil {
		return Line{}, err
	}
	return Line{Key: l.ID, Time: l.Time, Value: l}, nil
}

func (m *toyMapper) Map(b *Builder, line Line) {
	l := line.Value.(toyLine)
	prev := m.last
	m.last = l.ID
	text, _ := json.Marshal(l.Text)
	switch l.Kind {
	case "user":
		if prev != "" && l.Parent != prev {
			b.Rewind(l.Parent)
		}
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

// A prompt that goes back to an earlier line is a rewind in the same
// session: every line is mapped where it stands, and the model's context
// continues from the earlier line.
func TestReadFileRewindStaysInTheSession(t *testing.T) {
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
	if len(c.plans) != 1 || len(res.Sessions) != 1 || res.Lines != 6 {
		t.Fatalf("plans = %+v, result %+v", c.plans, res)
	}
	main := c.events["toy-s1"]
	s := render(main)
	for _, want := range []string{`"content":"two"`, "two, rewritten", `context/rewound [] {"toEventId":"a1.3","toSeq":`} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in\n%s", want, s)
		}
	}
	var rw schema.ContextRewound
	var abandoned []string
	for _, e := range main {
		if e.Type == schema.TypeContextRewound {
			_ = json.Unmarshal(e.Data, &rw)
		}
	}
	if main[rw.ToSeq-1].EventID != "a1.3" {
		t.Errorf("rewound to seq %d:\n%s", rw.ToSeq, s)
	}
	for _, e := range VisibleEvents(main) {
		abandoned = append(abandoned, string(e.Data))
	}
	if got := strings.Join(abandoned, " "); strings.Contains(got, `"two"`) || strings.Contains(got, "second") || !strings.Contains(got, "other") {
		t.Errorf("model-visible: %s", got)
	}
	x, err := NewExport("toy", SliceEvents(main))
	if err != nil {
		t.Fatal(err)
	}
	if lines, events := exportParts(t, x); x.Lines != 6 || len(lines) != 6 || len(events) != 0 {
		t.Errorf("export: %d lines, %d events", len(lines), len(events))
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
	lines, err := SourceLines("toy", events)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(p)
	if len(lines) != 1 || string(lines[0]) != strings.TrimSuffix(string(raw), "\n") {
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

// A second result for a call (a line the agent wrote twice, on two
// branches) is kept as its source line, mapped to nothing: one session,
// one result per call.
func TestSecondResultIsKeptAsLineOnly(t *testing.T) {
	p := write(t,
		`{"id":"u1","kind":"user","text":"one"}`+"\n",
		`{"id":"a1","parent":"u1","kind":"assistant","call":"c1","stop":"tool_use"}`+"\n",
		`{"id":"r1","parent":"a1","kind":"result","call":"c1","text":"ok"}`+"\n",
		`{"id":"r2","parent":"a1","kind":"result","call":"c1","text":"other"}`+"\n",
	)
	var c collect
	res, err := ReadFile(toy{}, p, Options{}, &c)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.plans) != 1 || res.Lines != 4 {
		t.Fatalf("plans %+v, result %+v", c.plans, res)
	}
	m := render(c.events["toy-s1"])
	if !strings.Contains(m, `tool/result [t.u1 c1] {"status":"ok","output":"ok"}`) || strings.Contains(m, `"output":"other"`) {
		t.Errorf("main:\n%s", m)
	}
	lines, err := SourceLines("toy", c.events["toy-s1"])
	if err != nil || len(lines) != 4 {
		t.Errorf("export: %v %d lines", err, len(lines))
	}
}

// An export to another format leaves out what a rewind abandoned, an
// open call included: it is neither written nor answered.
func TestExportLeavesOutAbandonedCall(t *testing.T) {
	p := write(t,
		`{"id":"u1","kind":"user","text":"one"}`+"\n",
		`{"id":"a1","parent":"u1","kind":"assistant","msg":"m1","text":"trying","call":"c1","stop":"tool_use"}`+"\n",
		`{"id":"u2","parent":"u1","kind":"user","text":"no, this"}`+"\n",
	)
	var c collect
	if _, err := ReadFile(toy{}, p, Options{}, &c); err != nil {
		t.Fatal(err)
	}
	x, err := NewExport("other", SliceEvents(c.events["toy-s1"]))
	if err != nil {
		t.Fatal(err)
	}
	_, events := exportParts(t, x)
	for _, e := range events {
		if e.Type == schema.TypeToolRequested || e.Type == schema.TypeMessageAssistant {
			t.Errorf("the export holds abandoned %s %s", e.Type, e.Data)
		}
	}
	if u := x.Unanswered(); len(u) != 0 {
		t.Errorf("unanswered: %v", u)
	}
	if s := render(events); !strings.Contains(s, "no, this") || !strings.Contains(s, "context/rewound") {
		t.Errorf("export events:\n%s", s)
	}
}

// A title known only after session/created (the first prompt after more
// lines than are held) is session/titled; a file's first lines map to
// nothing until the prompt or the held bound, whatever they end with.
func TestLateTitleIsSessionTitled(t *testing.T) {
	var lines []string
	for i := range holdLines {
		lines = append(lines, fmt.Sprintf(`{"id":"x%d","kind":"mystery"}`+"\n", i))
	}
	lines = append(lines, `{"id":"u1","kind":"user","text":"the title\nand more"}`+"\n")
	var c collect
	if _, err := ReadFile(toy{}, write(t, lines[:3]...), Options{}, &c); err != nil {
		t.Fatal(err)
	}
	if n := len(c.events["toy-s1"]); n != 0 {
		t.Fatalf("3 lines without a prompt gave %d events", n)
	}
	c = collect{}
	if _, err := ReadFile(toy{}, write(t, lines...), Options{}, &c); err != nil {
		t.Fatal(err)
	}
	s := render(c.events["toy-s1"])
	if !strings.Contains(s, `1 created session/created [] {"agent":"toy"}`) || !strings.Contains(s, `session/titled [] {"title":"the title"}`) {
		t.Errorf("events:\n%s", s)
	}
}

// A line without a time takes the previous line's; before any line with
// one, the file's modification time (Options.ModTime, else the file's),
// or, for the lines held for the first prompt, the prompt's: never the
// epoch.
func TestLineWithoutTimeTakesFileTime(t *testing.T) {
	p := write(t, `{"id":"u1","kind":"user","text":"one"}`+"\n")
	mtime := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	var c collect
	if _, err := ReadFile(toy{}, p, Options{}, &c); err != nil {
		t.Fatal(err)
	}
	for _, e := range c.events["toy-s1"] {
		if !e.Time.Equal(mtime) {
			t.Errorf("seq %d at %v, want the file's %v", e.Seq, e.Time, mtime)
		}
	}
	given := mtime.Add(time.Hour)
	c = collect{}
	if _, err := ReadFile(toy{}, p, Options{ModTime: given}, &c); err != nil {
		t.Fatal(err)
	}
	if e := c.events["toy-s1"][0]; !e.Time.Equal(given) {
		t.Errorf("seq 1 at %v, want Options.ModTime %v", e.Time, given)
	}
	// Lines held for the first prompt take its time when it has one: the
	// modification time of a file that grows changes.
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p = write(t, `{"id":"x1","kind":"mystery"}`+"\n", `{"id":"u1","kind":"user","text":"one","time":"2026-01-02T03:04:05Z"}`+"\n")
	c = collect{}
	if _, err := ReadFile(toy{}, p, Options{}, &c); err != nil {
		t.Fatal(err)
	}
	for _, e := range c.events["toy-s1"] {
		if !e.Time.Equal(at) {
			t.Errorf("seq %d (%s) at %v, want the prompt's %v", e.Seq, e.EventID, e.Time, at)
		}
	}
}

// exportParts reads what an export of x writes from: its source lines
// and the events after them.
func exportParts(t *testing.T, x *Export) (lines []json.RawMessage, events []schema.Envelope) {
	t.Helper()
	if err := x.EachLine(func(l json.RawMessage) error {
		lines = append(lines, append(json.RawMessage(nil), l...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := x.EachEvent(func(e *schema.Envelope) error {
		events = append(events, *e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if x.After != len(events) {
		t.Errorf("After %d, %d events read", x.After, len(events))
	}
	return lines, events
}

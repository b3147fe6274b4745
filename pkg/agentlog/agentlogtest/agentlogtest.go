// Package agentlogtest holds what the tests of every agentlog format share:
// a sink that collects a file's sessions, golden files of the mapped
// events, the model-visible context of a session (DESIGN.md section 5) and
// the export round trips of section 13.
package agentlogtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

var update = flag.Bool("update", false, "rewrite the golden files of the mapped events")

// Session is one session a file gave.
type Session struct {
	Plan   agentlog.Plan
	Events []schema.Envelope
}

// Collect is a Sink that keeps every session in memory.
type Collect struct{ Sessions []*Session }

func (c *Collect) Session(p agentlog.Plan) error {
	c.Sessions = append(c.Sessions, &Session{Plan: p})
	return nil
}

func (c *Collect) Event(e schema.Envelope) error {
	s := c.Sessions[len(c.Sessions)-1]
	s.Events = append(s.Events, e)
	return nil
}

func (c *Collect) Done() error { return nil }

// Warning is a damaged line ReadFile warned of.
type Warning struct {
	Line int
	Msg  string
}

// Read maps the file at path.
func Read(t testing.TB, f agentlog.Format, path string) (*Collect, agentlog.Result, []Warning) {
	t.Helper()
	var c Collect
	var warns []Warning
	res, err := agentlog.ReadFile(f, path, agentlog.Options{Warn: func(_ string, line int, msg string) {
		warns = append(warns, Warning{line, msg})
	}}, &c)
	if err != nil {
		t.Fatalf("ReadFile %s: %v", path, err)
	}
	return &c, res, warns
}

// Render is a readable listing of events, one a line: seq, type, ids and
// data (long data cut; a source/line shown by its index and size).
func Render(events []schema.Envelope) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "%d %s id=%s", e.Seq, e.Type, e.EventID)
		for _, kv := range [][2]string{{"turn", e.TurnID}, {"attempt", e.AttemptID}, {"call", e.ToolCallID}} {
			if kv[1] != "" {
				fmt.Fprintf(&b, " %s=%s", kv[0], kv[1])
			}
		}
		if e.Type == agentlog.TypeSourceLine {
			var d agentlog.SourceLine
			_ = json.Unmarshal(e.Data, &d)
			fmt.Fprintf(&b, " index=%d bytes=%d", d.Index, len(d.Line)+len(d.Text))
			if d.Parts > 0 {
				fmt.Fprintf(&b, " part=%d/%d", d.Part, d.Parts)
			}
			b.WriteString("\n")
			continue
		}
		d := string(e.Data)
		if r := []rune(d); len(r) > 240 {
			d = string(r[:200]) + fmt.Sprintf("…(%d bytes)", len(e.Data))
		}
		fmt.Fprintf(&b, " %s\n", d)
	}
	return b.String()
}

// Golden compares got with the file at path (rewritten with -update).
func Golden(t testing.TB, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the mapped events (run with -update to rewrite it); got:\n%s", path, got)
	}
}

// Entry is one model-visible entry of a session's context, by content:
// ids and sources left out, so two formats can be compared.
type Entry struct {
	Role string // user, assistant, tool_call, tool_result, summary
	Text string // message text, tool name and input, result status and text
}

// Context is what the model sees of a session (DESIGN.md section 5): the
// summary of the last ended compaction, then the messages, tool calls and
// results after its throughSeq, without what a rewind abandoned. Empty assistant messages (a reply of tool
// calls only) are left out: formats differ in whether they write one.
func Context(events []schema.Envelope) []Entry {
	var out []Entry
	for _, e := range agentlog.VisibleEvents(events) {
		switch e.Type {
		case schema.TypeCompactionEnded:
			var c schema.CompactionEnded
			_ = e.DecodeData(&c)
			out = append(out, Entry{"summary", c.Summary})
		case schema.TypeMessageUser, schema.TypeMessageAssistant:
			var m schema.Message
			_ = e.DecodeData(&m)
			text := agentlog.TextOf(m.Content)
			if e.Type == schema.TypeMessageAssistant {
				if text == "" {
					continue
				}
				out = append(out, Entry{"assistant", text})
			} else {
				out = append(out, Entry{"user", text})
			}
		case schema.TypeToolRequested:
			var r schema.ToolRequested
			_ = e.DecodeData(&r)
			var c bytes.Buffer
			_ = json.Compact(&c, r.Input)
			out = append(out, Entry{"tool_call", r.Name + " " + c.String()})
		case schema.TypeToolResult:
			var r schema.ToolResult
			_ = e.DecodeData(&r)
			out = append(out, Entry{"tool_result", r.Status + " " + agentlog.TextOf(r.Output)})
		}
	}
	return out
}

// CompleteLines are the lines of the file at path that end with a newline
// and parse as JSON, decoded.
func CompleteLines(t testing.TB, path string) []any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		var v any
		if json.Unmarshal(b[:i], &v) == nil {
			out = append(out, v)
		}
		b = b[i+1:]
	}
	return out
}

// Export exports events to f.
func Export(t testing.TB, f agentlog.Format, events []schema.Envelope) []byte {
	t.Helper()
	x, err := agentlog.NewExport(f.Name(), agentlog.SliceEvents(events))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := f.Export(&buf, x); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// FromElsewhere marks the source/line events as lines of another format,
// so an exporter works from the mapped events alone, as for a session
// imported from elsewhere (seqs unchanged).
func FromElsewhere(events []schema.Envelope) []schema.Envelope {
	out := make([]schema.Envelope, len(events))
	for i, e := range events {
		if e.Type == agentlog.TypeSourceLine {
			var d agentlog.SourceLine
			_ = json.Unmarshal(e.Data, &d)
			d.Format = "elsewhere"
			e.Data, _ = json.Marshal(d)
		}
		out[i] = e
	}
	return out
}

// CheckOwnExport: the main session of the file at path exported to its own
// format is the file's complete lines, deep-equal line for line as JSON
// values, and nothing more (a call the file leaves open stays open).
func CheckOwnExport(t *testing.T, f agentlog.Format, path string) {
	t.Helper()
	c, _, _ := Read(t, f, path)
	events := c.Sessions[0].Events
	got := DecodeLines(t, Export(t, f, events))
	want := CompleteLines(t, path)
	for i := range min(len(got), len(want)) {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("export of %s to %s: line %d differs from the file's", filepath.Base(path), f.Name(), i+1)
			return
		}
	}
	if len(got) != len(want) {
		t.Errorf("export of %s to %s: %d lines, want the file's %d complete lines", filepath.Base(path), f.Name(), len(got), len(want))
	}
}

// CheckRoundTrip: the main session of the file at path, exported to
// format to from its mapped events and imported again, has the same
// model-visible context (every call answered: the export adds results
// for open calls, so those are compared as answered).
func CheckRoundTrip(t *testing.T, from agentlog.Format, path string, to agentlog.Format) {
	t.Helper()
	c, _, _ := Read(t, from, path)
	want := Context(c.Sessions[0].Events)
	file := filepath.Join(t.TempDir(), "export.jsonl")
	out := Export(t, to, FromElsewhere(c.Sessions[0].Events))
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	back, _, warns := Read(t, to, file)
	if len(warns) > 0 {
		t.Errorf("the export of %s to %s has damaged lines: %v", filepath.Base(path), to.Name(), warns)
	}
	got := Context(back.Sessions[0].Events)
	got = got[:min(len(got), len(want))] // the export answers open calls
	if !reflect.DeepEqual(got, want) {
		t.Errorf("context after %s -> %s -> import differs:\n got %s\nwant %s", from.Name(), to.Name(), show(got), show(want))
	}
}

func show(es []Entry) string {
	var b strings.Builder
	for _, e := range es {
		t := e.Text
		if r := []rune(t); len(r) > 80 {
			t = string(r[:80]) + "…"
		}
		fmt.Fprintf(&b, "\n  %s: %q", e.Role, t)
	}
	return b.String()
}

func DecodeLines(t testing.TB, b []byte) []any {
	t.Helper()
	var out []any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<30)
	for sc.Scan() {
		var v any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("exported line is not JSON: %v: %.200s", err, sc.Text())
		}
		out = append(out, v)
	}
	return out
}

// CheckRepairedExport: the main session of the file at path, repaired as
// the repairer does (what it left open closed: calls outcome_unknown),
// exported to format to (from its source lines when that is its own
// format, else from its events) and imported again: every tool call has
// exactly one result, and a call that had none has an error result that
// says to check before any retry.
func CheckRepairedExport(t *testing.T, from agentlog.Format, path string, to agentlog.Format) {
	t.Helper()
	c, _, _ := Read(t, from, path)
	events := c.Sessions[0].Events
	st := session.New(events[0].SessionID)
	for i := range events {
		if err := st.Apply(&events[i]); err != nil {
			t.Fatal(err)
		}
	}
	open := 0
	for _, tc := range st.Tools {
		if tc.Open() {
			open++
		}
	}
	repair := session.PlanRepair(st, session.RepairOptions{Now: events[len(events)-1].Time})
	if len(repair) == 0 {
		t.Fatalf("%s leaves nothing open to repair", filepath.Base(path))
	}
	events = append(append([]schema.Envelope(nil), events...), repair...)
	if to.Name() != from.Name() {
		events = FromElsewhere(events)
	}
	file := filepath.Join(t.TempDir(), "export.jsonl")
	if err := os.WriteFile(file, Export(t, to, events), 0o644); err != nil {
		t.Fatal(err)
	}
	back, _, _ := Read(t, to, file)
	results := map[string][]schema.ToolResult{}
	var calls []string
	for _, e := range back.Sessions[0].Events {
		switch e.Type {
		case schema.TypeToolRequested:
			calls = append(calls, e.ToolCallID)
		case schema.TypeToolResult:
			var r schema.ToolResult
			_ = e.DecodeData(&r)
			results[e.ToolCallID] = append(results[e.ToolCallID], r)
		}
	}
	unknown := 0
	for _, id := range calls {
		rs := results[id]
		if len(rs) != 1 {
			t.Errorf("call %s has %d results after %s -> %s, want 1", id, len(rs), from.Name(), to.Name())
			continue
		}
		if strings.Contains(agentlog.TextOf(rs[0].Output), "check before any retry") {
			unknown++
			if rs[0].Status != schema.ToolError {
				t.Errorf("call %s: an unknown outcome imported as %s, want error", id, rs[0].Status)
			}
		}
	}
	if unknown < open {
		t.Errorf("%d calls of %s -> %s say their outcome is unknown, want the %d the repair closed", unknown, from.Name(), to.Name(), open)
	}
}

// Files are the fixtures matching glob; none is a failure.
func Files(t *testing.T, glob string) []string {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures %s: %v", glob, err)
	}
	return files
}

// CheckGolden: the sessions and events the file at path maps to are
// testdata/golden/<file name>.txt.
func CheckGolden(t *testing.T, f agentlog.Format, path string) {
	t.Helper()
	c, res, warns := Read(t, f, path)
	var b strings.Builder
	fmt.Fprintf(&b, "lines=%d skipped=%d damaged=%d torn=%v\n", res.Lines, res.Skipped, res.Damaged, res.Torn)
	for _, w := range warns {
		fmt.Fprintf(&b, "warning line %d: %s\n", w.Line, w.Msg)
	}
	for _, s := range c.Sessions {
		fmt.Fprintf(&b, "\nsession %s first=%d", s.Plan.ID, s.Plan.FirstSeq)
		b.WriteString("\n" + Render(s.Events))
	}
	Golden(t, filepath.Join("testdata", "golden", strings.TrimSuffix(filepath.Base(path), ".jsonl")+".txt"), b.String())
}

// Suite runs the checks every format passes on its fixtures: golden
// mapped events, the export to its own format deep-equal to the file, and
// the round trip through each of formats keeping the model-visible context.
func Suite(t *testing.T, f agentlog.Format, glob string, formats ...agentlog.Format) {
	for _, path := range Files(t, glob) {
		name := filepath.Base(path)
		t.Run("MappedEvents/"+name, func(t *testing.T) { CheckGolden(t, f, path) })
		t.Run("ExportGivesTheFileBack/"+name, func(t *testing.T) { CheckOwnExport(t, f, path) })
		for _, to := range formats {
			t.Run("RoundTripKeepsContext/"+to.Name()+"/"+name, func(t *testing.T) { CheckRoundTrip(t, f, path, to) })
		}
	}
}

// SuiteRepaired: the export of each repaired fixture, to each of formats,
// answers every tool call exactly once.
func SuiteRepaired(t *testing.T, f agentlog.Format, glob string, formats ...agentlog.Format) {
	for _, path := range Files(t, glob) {
		for _, to := range formats {
			t.Run(to.Name()+"/"+filepath.Base(path), func(t *testing.T) { CheckRepairedExport(t, f, path, to) })
		}
	}
}

// CheckLinesOverLimit: a file of lines, one of them over the event size
// limit, is kept in source/line parts and exported to its own format
// deep-equal.
func CheckLinesOverLimit(t *testing.T, f agentlog.Format, name string, lines ...string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, _, _ := Read(t, f, path)
	parts := 0
	for _, e := range c.Sessions[0].Events {
		var d agentlog.SourceLine
		if e.Type == agentlog.TypeSourceLine && json.Unmarshal(e.Data, &d) == nil && d.Parts > 1 {
			parts++
		}
	}
	if parts == 0 {
		t.Fatalf("no line of %s was kept in parts", name)
	}
	CheckOwnExport(t, f, path)
}

// FuzzFile maps data as a file of format f: whatever the bytes, the
// mapping ends without an error (a step that does not fit is skipped,
// never a broken session) and the export of what it gave can be written.
func FuzzFile(t *testing.T, f agentlog.Format, name string, data []byte) {
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var c Collect
	if _, err := agentlog.ReadFile(f, path, agentlog.Options{}, &c); err != nil {
		if strings.Contains(err.Error(), "first line") || strings.Contains(err.Error(), "session header") {
			return // not a session file of f
		}
		t.Fatalf("ReadFile: %v", err)
	}
	for _, s := range c.Sessions {
		if len(s.Events) > 0 {
			Export(t, f, s.Events)
		}
	}
}

// Seed adds the lines of the files matching glob to fz, one file each.
func Seed(fz *testing.F, glob string) {
	files, _ := filepath.Glob(glob)
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			fz.Add(b)
		}
	}
}

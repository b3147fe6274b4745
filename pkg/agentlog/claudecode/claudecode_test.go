package claudecode

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// collect keeps every session a file gives.
type collect struct {
	plans  []agentlog.Plan
	events map[string][]schema.Envelope
}

func (c *collect) Session(p agentlog.Plan) error {
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

func fixtures(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("testdata/projects", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (Format{}).IsSessionFile(p) {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v %v", files, err)
	}
	return files
}

// read maps one fixture and renders what it gives for a reader.
func read(t *testing.T, path string) (*collect, agentlog.Result, string) {
	return readLimit(t, path, 0)
}

func readLimit(t *testing.T, path string, maxEventBytes int) (*collect, agentlog.Result, string) {
	t.Helper()
	var c collect
	var out strings.Builder
	res, err := agentlog.ReadFile(Format{}, path, agentlog.Options{MaxEventBytes: maxEventBytes, Warn: func(p string, line int, msg string) {
		fmt.Fprintf(&out, "warning: %s:%d: %s\n", filepath.Base(p), line, msg)
	}}, &c)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	fmt.Fprintf(&out, "lines %d, skipped %d, damaged %d, torn %v\n", res.Lines, res.Skipped, res.Damaged, res.Torn)
	for _, p := range c.plans {
		fmt.Fprintf(&out, "\nsession %s", p.ID)
		out.WriteString("\n")
		for _, e := range c.events[p.ID] {
			out.WriteString(renderEvent(e))
		}
	}
	return &c, res, out.String()
}

func renderEvent(e schema.Envelope) string {
	var ids []string
	for _, id := range []string{e.TurnID, e.AttemptID, e.ToolCallID} {
		if id != "" {
			ids = append(ids, id)
		}
	}
	data := string(e.Data)
	if e.Type == agentlog.TypeSourceLine {
		var d agentlog.SourceLine
		_ = json.Unmarshal(e.Data, &d)
		data = fmt.Sprintf("line %d (%d bytes)", d.Index, len(d.Line))
		if d.Parts > 0 {
			data = fmt.Sprintf("line %d part %d/%d (%d bytes of text)", d.Index, d.Part, d.Parts, len(d.Text))
		}
	} else if len(data) > 240 {
		data = fmt.Sprintf("%s…(%d bytes)", strings.ToValidUTF8(data[:200], ""), len(data))
	}
	return fmt.Sprintf("%3d %-10s %-18s %-28s %s\n", e.Seq, e.EventID, e.Type, strings.Join(ids, " "), data)
}

func TestGolden(t *testing.T) {
	for _, path := range fixtures(t) {
		_, _, got := read(t, path)
		golden := filepath.Join("testdata", strings.TrimSuffix(filepath.Base(path), ".jsonl")+".golden")
		if *update {
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run with -update)", err)
		}
		if got != string(want) {
			t.Errorf("%s: mapping differs from %s (run with -update and read the diff):\n%s", path, golden, got)
		}
	}
}

// An imported file exported to its own format is deep-equal to its
// complete lines, also when a line is over the event size limit (here
// 32 KiB: the 64 KiB output's line is kept in parts).
func TestExportOwnFormatIsDeepEqual(t *testing.T) {
	for _, limit := range []int{0, 32 << 10} {
		t.Run(fmt.Sprintf("limit%d", limit), func(t *testing.T) { exportDeepEqual(t, limit) })
	}
}

func exportDeepEqual(t *testing.T, limit int) {
	parts := 0
	for _, path := range fixtures(t) {
		c, _, _ := readLimit(t, path, limit)
		for _, e := range c.events[c.plans[0].ID] {
			if e.Type == agentlog.TypeSourceLine && bytes.Contains(e.Data, []byte(`"parts":`)) {
				parts++
			}
		}
		id := c.plans[0].ID
		x, err := agentlog.NewExport(Name, agentlog.SliceEvents(c.events[id]))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := (Format{}).Export(&buf, x); err != nil {
			t.Fatal(err)
		}
		want := completeLines(t, path)
		got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
		if len(got) != len(want) {
			t.Fatalf("%s: %d lines exported, %d complete in the file", path, len(got), len(want))
		}
		for i := range want {
			var a, b any
			if err := json.Unmarshal([]byte(got[i]), &a); err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			_ = json.Unmarshal([]byte(want[i]), &b)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s: exported line %d differs", path, i+1)
			}
		}
	}
	if limit > 0 && parts == 0 {
		t.Error("no line was over the limit")
	}
}

// completeLines are the file's lines that parse as JSON.
func completeLines(t *testing.T, path string) []string {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(raw), "\n") {
		if json.Valid([]byte(l)) {
			out = append(out, l)
		}
	}
	return out
}

// A file cut off inside an assistant message (its calls never reached
// sessionlog's events) exports as it is; repaired, it exports with every
// tool_use answered, right after the file's lines.
func TestExportAnswersCallsOfAnUnfinishedMessage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "88888888-8888-4888-8888-888888888888.jsonl")
	lines := `{"type":"user","uuid":"p1","parentUuid":null,"sessionId":"88888888-8888-4888-8888-888888888888","message":{"role":"user","content":"go"}}` + "\n" +
		`{"type":"assistant","uuid":"p2","parentUuid":"p1","sessionId":"88888888-8888-4888-8888-888888888888","message":{"id":"msg_p","role":"assistant","content":[{"type":"tool_use","id":"toolu_p1","name":"Bash","input":{}}],"stop_reason":null}}` + "\n" +
		`{"type":"assistant","uuid":"p3","parentUuid":"p2","sessionId":"88888888-8888-4888-8888-888888888888","message":{"id":"msg_p","role":"assistant","content":[{"type":"tool_use","id":"toolu_p2","name":"Bash","input":{}}],"stop_reason":null}}` + "\n"
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _, _ := read(t, path)
	events := c.events[c.plans[0].ID]
	export := func(events []schema.Envelope) []string {
		x, err := agentlog.NewExport(Name, agentlog.SliceEvents(events))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := (Format{}).Export(&buf, x); err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	}
	if out := export(events); strings.Join(out, "\n")+"\n" != lines {
		t.Errorf("not repaired: the export is not the file:\n%s", strings.Join(out, "\n"))
	}
	st := session.New(c.plans[0].ID)
	for i := range events {
		if err := st.Apply(&events[i]); err != nil {
			t.Fatal(err)
		}
	}
	out := export(append(events, session.PlanRepair(st, session.RepairOptions{Now: time.Now()})...))
	if len(out) < 5 {
		t.Fatalf("repaired: %d lines:\n%s", len(out), strings.Join(out, "\n"))
	}
	uuids := map[string]bool{}
	for i, id := range []string{"toolu_p1", "toolu_p2"} {
		l := out[3+i]
		if !strings.Contains(l, `"tool_use_id":"`+id+`"`) || !strings.Contains(l, `"is_error":true`) || !strings.Contains(l, "check before any retry") {
			t.Errorf("line %d: %s", 4+i, l)
		}
		var h struct {
			UUID string `json:"uuid"`
		}
		_ = json.Unmarshal([]byte(l), &h)
		uuids[h.UUID] = true
	}
	if len(uuids) != 2 {
		t.Errorf("the answers share a uuid")
	}
}

func TestSessionFilesAndIDs(t *testing.T) {
	for _, c := range []struct {
		path string
		id   string // "" = not a session file
	}{
		{"p/-home-x/0b5c.jsonl", "cc-0b5c"},
		{"p/-home-x/0b5c/subagents/agent-a1.jsonl", "cc-0b5c-a1"},
		{"p/-home-x/0b5c/subagents/workflows/wf1/agent-a2.jsonl", "cc-0b5c-a2"},
		{"p/-home-x/0b5c/subagents/workflows/wf1/journal.jsonl", ""},
		{"p/-home-x/notes.txt", ""},
	} {
		f := Format{}
		if got := f.IsSessionFile(c.path); got != (c.id != "") {
			t.Errorf("%s: IsSessionFile %v", c.path, got)
			continue
		}
		if c.id == "" {
			continue
		}
		if got, err := f.SessionID(c.path, nil); err != nil || got != c.id {
			t.Errorf("%s: id %q %v, want %q", c.path, got, err, c.id)
		}
	}
}

// BenchmarkReadFile maps a file of 40 turns in the shape `sessionlog
// bench import` generates (a prompt, a tool call, its 1.5 KB result and
// a reply per turn), reporting the time per event.
func BenchmarkReadFile(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "-bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	sid := "bbbbbbbb-bbbb-4bbb-8bbb-000000000001"
	path := filepath.Join(dir, sid+".jsonl")
	var text strings.Builder
	parent, k := any(nil), 0
	put := func(typ string, msg any) {
		k++
		uuid := fmt.Sprintf("%s-%06d", sid[:8], k)
		l, _ := json.Marshal(map[string]any{"parentUuid": parent, "isSidechain": false, "userType": "external", "cwd": "/bench",
			"sessionId": sid, "version": "2.1.3", "gitBranch": "main", "type": typ, "message": msg, "uuid": uuid,
			"timestamp": "2026-11-30T10:00:00.000Z"})
		text.Write(l)
		text.WriteByte('\n')
		parent = uuid
	}
	output := strings.Repeat("result line of a typical tool output\n", 40)
	for t := range 40 {
		call := fmt.Sprintf("toolu_%d", t)
		put("user", map[string]any{"role": "user", "content": fmt.Sprintf("step %d: run the tests", t)})
		put("assistant", map[string]any{"id": fmt.Sprintf("msg_a%d", t), "type": "message", "role": "assistant", "model": "m",
			"content":     []any{map[string]any{"type": "tool_use", "id": call, "name": "Bash", "input": map[string]string{"command": "go test ./..."}}},
			"stop_reason": "tool_use", "usage": map[string]int{"input_tokens": 100, "output_tokens": 20}})
		put("user", map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": call, "content": output}}})
		put("assistant", map[string]any{"id": fmt.Sprintf("msg_b%d", t), "type": "message", "role": "assistant", "model": "m",
			"content": []any{map[string]any{"type": "text", "text": "All tests pass."}}, "stop_reason": "end_turn"})
	}
	if err := os.WriteFile(path, []byte(text.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	events := 0
	b.ReportAllocs()
	for b.Loop() {
		var c collect
		if _, err := agentlog.ReadFile(Format{}, path, agentlog.Options{}, &c); err != nil {
			b.Fatal(err)
		}
		for _, evs := range c.events {
			events += len(evs)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
}

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// imStack is an embedded server with the writer, the forker and the
// repairer: what import, export and repair talk to.
type imStack struct {
	url  string
	st   *logstore.Store
	cl   *client.Client
	http string // the projector's HTTP API
}

type service interface {
	Run(ctx context.Context) error
	Ready() error
}

func imStart(t *testing.T) *imStack { return imStartTTL(t, 0) }

// imStartTTL starts the stack with leases of ttl (0: the default) and
// the repairer's grace and sweep to match.
func imStartTTL(t *testing.T, ttl time.Duration) *imStack {
	t.Helper()
	s := natstest.RunServer(t)
	nc := natstest.Connect(t, s)
	st, err := logstore.Open(context.Background(), nc, logstore.Config{LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	d := assemble.Deps{Conn: nc}
	wcfg, rcfg := assemble.DefaultWriter(), assemble.DefaultRepairer()
	if ttl > 0 {
		wcfg.LeaseTTL, rcfg.LeaseTTL, rcfg.Grace, rcfg.SweepInterval = ttl, ttl, ttl/4, ttl
	}
	w, err := assemble.NewWriter(wcfg, st, d)
	if err != nil {
		t.Fatal(err)
	}
	f, err := assemble.NewForker(assemble.DefaultForker(), st, d)
	if err != nil {
		t.Fatal(err)
	}
	r, err := assemble.NewRepairer(rcfg, st, d)
	if err != nil {
		t.Fatal(err)
	}
	src, err := assemble.NewSource(assemble.DefaultSource(), st, d)
	if err != nil {
		t.Fatal(err)
	}
	er, err := assemble.NewEraser(assemble.DefaultEraser(), st, d)
	if err != nil {
		t.Fatal(err)
	}
	p, err := assemble.NewProjector(assemble.DefaultProjector(t.TempDir()), st, d)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(p.Handler())
	t.Cleanup(hs.Close)
	for _, svc := range []service{w, src, f, r, er, p} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- svc.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("service: %v", err)
			}
		})
		natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, svc.Ready)
	}
	return &imStack{url: s.ClientURL(), st: st, cl: client.New(natstest.Connect(t, s)), http: hs.URL}
}

// run runs the sessionlog binary against the stack.
func (s *imStack) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(sessionlogBin(t), append(args, "--nats-url", s.url)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errb.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

// sameData says whether a stored event has the data the mapping gives
// it; session/created's, but for the label sourceFile import adds (the
// file's name, DESIGN.md section 13).
func sameData(stored, mapped schema.Envelope) bool {
	if stored.Type != schema.TypeSessionCreated {
		return bytes.Equal(stored.Data, mapped.Data)
	}
	var a, b schema.SessionCreated
	if json.Unmarshal(stored.Data, &a) != nil || json.Unmarshal(mapped.Data, &b) != nil {
		return false
	}
	if a.Labels[agentlog.LabelSourceFile] == "" {
		return false
	}
	delete(a.Labels, agentlog.LabelSourceFile)
	if len(a.Labels) == 0 {
		a.Labels = nil
	}
	return reflect.DeepEqual(a, b)
}

// events reads a session's stored events.
func (s *imStack) events(t *testing.T, id string) []schema.Envelope {
	t.Helper()
	evs, _, err := s.st.ReadEvents(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]schema.Envelope, len(evs))
	for i, e := range evs {
		out[i] = e.Envelope
	}
	return out
}

// ccFixtures copies the Claude Code fixtures into a new directory.
func ccFixtures(t *testing.T) string {
	t.Helper()
	return copyTree(t, filepath.Join("..", "pkg", "agentlog", "claudecode", "testdata", "projects"))
}

// copyTree copies the files under src into a new directory.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

const (
	ccMain     = "cc-11111111-1111-4111-8111-111111111111"
	ccRewind   = "cc-22222222-2222-4222-8222-222222222222"
	ccSubagent = ccRewind + "-a1b2c3d"
)

var ccSessions = []string{ccMain, ccRewind, ccSubagent}

// snapshot renders every event of the sessions (seq, id, type, ids, data).
func (s *imStack) snapshot(t *testing.T, ids ...string) string {
	t.Helper()
	var b strings.Builder
	for _, id := range ids {
		for _, e := range s.events(t, id) {
			fmt.Fprintf(&b, "%s %d %s %s %s %s %s %v %s\n", e.SessionID, e.Seq, e.EventID, e.Type, e.TurnID, e.AttemptID, e.ToolCallID, e.Synthetic, e.Data)
		}
	}
	return b.String()
}

// Import of the fixtures stores what the mapping gives; a second import
// appends nothing and says every session is unchanged.
func TestImportClaudeCodeTwiceAppendsNothing(t *testing.T) {
	s := imStart(t)
	dir := ccFixtures(t)
	code, out, errs := s.run(t, "import", "--from", "claude-code", dir)
	if code != 0 {
		t.Fatalf("import: exit %d\n%s\n%s", code, out, errs)
	}
	for _, id := range ccSessions {
		if !strings.Contains(out, "imported "+id+" ") {
			t.Errorf("no `imported %s` in\n%s", id, out)
		}
	}
	if !strings.Contains(errs, "11111111-1111-4111-8111-111111111111.jsonl:15: skipped") {
		t.Errorf("the garbled line is not named: %s", errs)
	}
	if !strings.Contains(out, "1 damaged lines skipped, 1 torn last lines left for later") {
		t.Errorf("summary: %s", out)
	}
	// What is stored is what the mapping gives, seq for seq.
	var c collectSink
	if _, err := agentlog.ReadFile(claudecode.Format{}, filepath.Join(dir, "-home-ann-shop", "11111111-1111-4111-8111-111111111111.jsonl"), agentlog.Options{}, &c); err != nil {
		t.Fatal(err)
	}
	stored := s.events(t, ccMain)
	if len(stored) != len(c.events) {
		t.Fatalf("%d events stored, the mapping gives %d", len(stored), len(c.events))
	}
	for i, e := range stored {
		if m := c.events[i]; e.EventID != m.EventID || e.Seq != m.Seq || !sameData(e, m) {
			t.Errorf("seq %d: stored %s %s, mapped %s %s", e.Seq, e.EventID, e.Data, m.EventID, m.Data)
		}
	}
	// The prompt that goes back is a rewind in the same session.
	rewound := false
	for _, e := range s.events(t, ccRewind) {
		rewound = rewound || e.Type == schema.TypeContextRewound
	}
	if !rewound {
		t.Errorf("no context/rewound in %s", ccRewind)
	}
	before := s.snapshot(t, ccSessions...)
	code, out, errs = s.run(t, "import", "--from", "claude-code", dir)
	if code != 0 {
		t.Fatalf("second import: exit %d\n%s\n%s", code, out, errs)
	}
	for _, id := range ccSessions {
		if !strings.Contains(out, "unchanged "+id+"\n") {
			t.Errorf("no `unchanged %s` in\n%s", id, out)
		}
	}
	if !strings.Contains(out, " 0 events appended") {
		t.Errorf("summary: %s", out)
	}
	if after := s.snapshot(t, ccSessions...); after != before {
		t.Errorf("the second import changed the log")
	}

	// The file grows: its torn last line is completed and a reply follows.
	path := filepath.Join(dir, "-home-ann-shop", "11111111-1111-4111-8111-111111111111.jsonl")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(`ease notes"},"uuid":"u1-21","timestamp":"2026-11-30T09:04:00.000Z"}` + "\n")
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs = s.run(t, "import", "--from", "claude-code", path)
	if code != 0 || !strings.Contains(out, "imported "+ccMain+" 3 events") {
		t.Fatalf("import of the grown file: exit %d\n%s\n%s", code, out, errs)
	}
}

type collectSink struct{ events []schema.Envelope }

func (c *collectSink) Session(p agentlog.Plan) error { return nil }
func (c *collectSink) Event(e schema.Envelope) error {
	if e.SessionID == ccMain {
		c.events = append(c.events, e)
	}
	return nil
}
func (c *collectSink) Done() error { return nil }

// An import killed with SIGKILL half-way and run again gives the same log
// as one clean run.
func TestImportKilledHalfwayThenRerunEqualsCleanRun(t *testing.T) {
	dir := ccFixtures(t)
	// Twenty more sessions, so the kill lands in the middle.
	src, err := os.ReadFile(filepath.Join(dir, "-home-ann-shop", "11111111-1111-4111-8111-111111111111.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("33333333-3333-4333-8333-%012d", i)
		ids = append(ids, "cc-"+name)
		if err := os.WriteFile(filepath.Join(dir, "-home-ann-shop", name+".jsonl"), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ids = append(ids, ccSessions...)

	clean := imStart(t)
	if code, out, errs := clean.run(t, "import", "--from", "claude-code", "--batch", "3", dir); code != 0 {
		t.Fatalf("clean import: exit %d\n%s\n%s", code, out, errs)
	}
	want := clean.snapshot(t, ids...)

	s := imStart(t)
	cmd := exec.Command(sessionlogBin(t), "import", "--from", "claude-code", "--batch", "3", dir, "--nats-url", s.url)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it once some sessions are in and before all are.
	natstest.CheckFor(t, 60*time.Second, 5*time.Millisecond, func() error {
		n := 0
		for _, id := range ids[:10] {
			if _, tail, err := s.st.ReadEvents(context.Background(), id, 0); err == nil && tail.Exists() {
				n++
			}
		}
		if n < 3 {
			return fmt.Errorf("%d sessions started", n)
		}
		return nil
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if got := s.snapshot(t, ids...); got == want {
		t.Fatal("the import finished before it was killed: nothing was tested")
	}
	if code, out, errs := s.run(t, "import", "--from", "claude-code", "--batch", "3", dir); code != 0 {
		t.Fatalf("import after the kill: exit %d\n%s\n%s", code, out, errs)
	}
	if got := s.snapshot(t, ids...); got != want {
		t.Errorf("the log after a kill and a rerun differs from a clean run")
	}
}

// An imported file exported to its own format is deep-equal to its
// complete lines, a file that ends with open calls too (the agent's file
// as it left it); once repaired, the export answers every tool call
// exactly once.
func TestExportClaudeCode(t *testing.T) {
	s := imStart(t)
	dir := ccFixtures(t)
	// A session whose agent died inside a tool call.
	open := filepath.Join(dir, "-home-ann-shop", "44444444-4444-4444-8444-444444444444.jsonl")
	lines := []string{
		`{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/w","sessionId":"44444444-4444-4444-8444-444444444444","version":"2.0.76","type":"user","message":{"role":"user","content":"deploy"},"uuid":"o-1","timestamp":"2026-11-30T10:00:00.000Z"}`,
		`{"parentUuid":"o-1","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"44444444-4444-4444-8444-444444444444","version":"2.0.76","type":"assistant","message":{"id":"msg_o1","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"toolu_o1","name":"Bash","input":{"command":"make deploy"}},{"type":"tool_use","id":"toolu_o2","name":"Bash","input":{"command":"make notify"}}],"stop_reason":"tool_use"},"uuid":"o-2","timestamp":"2026-11-30T10:00:01.000Z"}`,
	}
	if err := os.WriteFile(open, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := s.run(t, "import", "--from", "claude-code", dir); code != 0 {
		t.Fatalf("import: exit %d\n%s\n%s", code, out, errs)
	}
	out := filepath.Join(t.TempDir(), "out.jsonl")

	t.Run("DeepEqual", func(t *testing.T) {
		for _, id := range []string{ccMain, ccRewind, ccSubagent} {
			code, _, errs := s.run(t, "export", "--to", "claude-code", "--session", id, "-o", out)
			if code != 0 {
				t.Fatalf("export %s: exit %d: %s", id, code, errs)
			}
			src := sourceFile(dir, id)
			if got, want := jsonLines(t, out), jsonLines(t, src); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: the export is not the file's complete lines (%d lines, %d in the file)", id, len(got), len(want))
			}
			// The same file from the HTTP API, once the projector knows the session.
			var body []byte
			natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
				resp, err := http.Get(s.http + "/v1/sessions/" + id + "/export?format=claude-code")
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				body, _ = io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("%d %s", resp.StatusCode, body)
				}
				return nil
			})
			file, _ := os.ReadFile(out)
			if !bytes.Equal(body, file) {
				t.Errorf("%s: the HTTP export differs from the command's", id)
			}
		}
		resp, err := http.Get(s.http + "/v1/sessions/" + ccMain + "/export?format=nope")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("unknown format: %d", resp.StatusCode)
		}
	})
	id := "cc-44444444-4444-4444-8444-444444444444"
	t.Run("OpenCallsAsTheFileHasThem", func(t *testing.T) {
		if code, _, errs := s.run(t, "export", "--to", "claude-code", "--session", id, "-o", out); code != 0 {
			t.Fatalf("export: exit %d: %s", code, errs)
		}
		if got, want := jsonLines(t, out), jsonLines(t, open); !reflect.DeepEqual(got, want) {
			t.Errorf("the export of a file ending with open calls is not the file (%d lines, %d in the file)", len(got), len(want))
		}
	})
	t.Run("RepairedCallsAnswered", func(t *testing.T) {
		if code, o, errs := s.run(t, "repair", id, "--force"); code != 0 {
			t.Fatalf("repair: exit %d\n%s\n%s", code, o, errs)
		}
		if code, _, errs := s.run(t, "export", "--to", "claude-code", "--session", id, "-o", out); code != 0 {
			t.Fatalf("export: exit %d: %s", code, errs)
		}
		checkAnswered(t, jsonLines(t, out), "outcome_unknown")
	})
}

func sourceFile(dir, id string) string {
	switch id {
	case ccSubagent:
		return filepath.Join(dir, "-home-ann-shop", "22222222-2222-4222-8222-222222222222", "subagents", "agent-a1b2c3d.jsonl")
	}
	return filepath.Join(dir, "-home-ann-shop", strings.TrimPrefix(id, "cc-")+".jsonl")
}

// jsonLines decodes the lines of a file that parse as JSON.
func jsonLines(t *testing.T, path string) []any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	for _, l := range strings.Split(string(b), "\n") {
		var v any
		if json.Unmarshal([]byte(l), &v) == nil {
			out = append(out, v)
		}
	}
	return out
}

// checkAnswered: every tool_use has exactly one tool_result, and the ones
// sessionlog answered say why and that the call must be checked.
func checkAnswered(t *testing.T, lines []any, note string) {
	t.Helper()
	uses, results := map[string]int{}, map[string]int{}
	notes := 0
	for _, l := range lines {
		m, _ := l.(map[string]any)["message"].(map[string]any)
		blocks, _ := m["content"].([]any)
		for _, b := range blocks {
			bl, _ := b.(map[string]any)
			switch bl["type"] {
			case "tool_use":
				uses[bl["id"].(string)]++
			case "tool_result":
				results[bl["tool_use_id"].(string)]++
				if text, _ := bl["content"].(string); strings.Contains(text, note) && strings.Contains(text, "check") && bl["is_error"] == true {
					notes++
				}
			}
		}
	}
	if len(uses) != 2 || !reflect.DeepEqual(uses, results) {
		t.Errorf("tool_use %v, tool_result %v", uses, results)
	}
	if notes != 2 {
		t.Errorf("%d results explain the unknown outcome (%q), want 2", notes, note)
	}
}

// A session written by a native agent, exported to Claude Code's format
// and imported again, has the same model-visible context (DESIGN.md
// section 5: the last compaction's summary, then what the model sees
// after it).
func TestExportImportRoundTripKeepsContext(t *testing.T) {
	s := imStart(t)
	ctx := context.Background()
	const id = "native-1"
	ss, err := s.cl.Create(ctx, id, "agent-1", schema.SessionCreated{Title: "native"})
	if err != nil {
		t.Fatal(err)
	}
	j := func(v string) json.RawMessage { return json.RawMessage(v) }
	reply := func(content string, calls ...client.ToolCall) []string {
		a, err := ss.StartAttempt(ctx, "claude-x")
		must(t, err)
		must(t, ss.FinishAttempt(ctx, a, j(content), j(`{"input_tokens":3,"output_tokens":5}`)))
		var ids []string
		for _, c := range calls {
			id, err := ss.RequestTool(ctx, c)
			must(t, err)
			must(t, ss.StartTool(ctx, id))
			ids = append(ids, id)
		}
		return ids
	}
	// Turn 1: two parallel calls, one fails.
	_, err = ss.StartTurn(ctx, nil)
	must(t, err)
	must(t, ss.UserMessage(ctx, j(`"list the files, ünïcödé 🚀"`)))
	calls := reply(`[{"type":"text","text":"Looking."}]`,
		client.ToolCall{ID: "call_1", Name: "Bash", Input: j(`{"command":"ls"}`)},
		client.ToolCall{ID: "call_2", Name: "Read", Input: j(`{"file_path":"/etc/shadow"}`)})
	must(t, ss.ToolResult(ctx, calls[0], schema.ToolOK, j(`"a.go\nb.go"`)))
	must(t, ss.ToolResult(ctx, calls[1], schema.ToolError, j(`[{"type":"text","text":"permission denied"}]`)))
	reply(`[{"type":"text","text":"Two files."}]`)
	must(t, ss.EndTurn(ctx, schema.TurnCompleted))
	// Turn 2: interrupted.
	_, err = ss.StartTurn(ctx, nil)
	must(t, err)
	must(t, ss.UserMessage(ctx, j(`"now delete them"`)))
	must(t, ss.EndTurn(ctx, schema.TurnInterrupted))
	// A compaction, then turn 3.
	through := ss.LastSeq()
	_, err = ss.Append(ctx,
		schema.Envelope{Type: schema.TypeCompactionStarted, EventID: "cs", Data: j(fmt.Sprintf(`{"compactionId":"k1","throughSeq":%d}`, through))},
		schema.Envelope{Type: schema.TypeCompactionEnded, EventID: "ce", Data: j(fmt.Sprintf(`{"compactionId":"k1","summary":"Listed two files; deletion refused.","throughSeq":%d}`, through))})
	must(t, err)
	_, err = ss.StartTurn(ctx, nil)
	must(t, err)
	must(t, ss.UserMessage(ctx, j(`"what is left?"`)))
	reply(`[{"type":"text","text":"a.go and b.go."}]`)
	must(t, ss.EndTurn(ctx, schema.TurnCompleted))

	dir := t.TempDir()
	file := filepath.Join(dir, "55555555-5555-4555-8555-555555555555.jsonl")
	if code, _, errs := s.run(t, "export", "--to", "claude-code", "--session", id, "-o", file); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	if code, out, errs := s.run(t, "import", "--from", "claude-code", file); code != 0 {
		t.Fatalf("import: exit %d\n%s\n%s", code, out, errs)
	}
	orig, back := s.events(t, id), s.events(t, "cc-55555555-5555-4555-8555-555555555555")
	for _, compacted := range []bool{true, false} {
		want, got := modelContext(orig, compacted), modelContext(back, compacted)
		if len(want) < 3 || !reflect.DeepEqual(got, want) {
			t.Errorf("context (compaction applied: %v) after the round trip:\n%s\nwant:\n%s", compacted, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// modelContext is what the model sees (DESIGN.md section 5, as the
// projector's /context serves it): the last compaction's summary, then
// the user and assistant messages, tool calls and results after its
// throughSeq, each as its type and data (as a JSON value: the order of
// an object's keys is no part of it; a message's usage, which the model
// does not read and an export to another format gives in that format's
// own shape, left out). Without compacted: the whole transcript, every
// message and call.
func modelContext(events []schema.Envelope, compacted bool) []string {
	var from uint64
	var out []string
	for _, e := range events {
		if e.Type == schema.TypeCompactionEnded && compacted {
			var d schema.CompactionEnded
			_ = json.Unmarshal(e.Data, &d)
			from, out = d.ThroughSeq, []string{"summary " + d.Summary}
		}
	}
	for _, e := range events {
		switch e.Type {
		case schema.TypeMessageUser, schema.TypeMessageAssistant, schema.TypeToolRequested, schema.TypeToolResult:
			if e.Seq > from {
				var d map[string]any
				_ = json.Unmarshal(e.Data, &d)
				delete(d, "usage")
				b, _ := json.Marshal(d)
				out = append(out, e.Type+" "+e.ToolCallID+" "+string(b))
			}
		}
	}
	return out
}

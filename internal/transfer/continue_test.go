package transfer_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/transcripttest"
	"github.com/sessionlog/sessionlog/internal/transfer"
	"github.com/sessionlog/sessionlog/internal/writertest"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/agentlog/codex"
	"github.com/sessionlog/sessionlog/pkg/agentlog/pi"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/services/repairer"
)

// importHarness is an embedded server with the writer (its leases
// lasting cfg.LeaseTTL, or the default).
type importHarness struct{ *writertest.Stack }

func newImportHarness(t *testing.T, cfg logstore.Config) *importHarness {
	t.Helper()
	return &importHarness{writertest.New(t, cfg)}
}

// contStack is importStack's server and writer with a repairer.
type contStack struct {
	*importHarness
	rep *repairer.Service
}

func newContStack(t *testing.T) *contStack {
	h := newImportHarness(t, logstore.Config{})
	svc, err := repairer.New(repairer.Config{Store: h.St, Conn: h.NC})
	if err != nil {
		t.Fatal(err)
	}
	writertest.Run(t, svc)
	return &contStack{importHarness: h, rep: svc}
}

// importRun is what one import of files did.
type importRun struct {
	n        transfer.Counts
	notices  []string
	failures []string
}

// importPaths imports files as `import --from claude-code` does.
func (h *importHarness) importPaths(t *testing.T, files ...string) importRun {
	t.Helper()
	return h.importFormat(t, claudecode.Format{}, files...)
}

// importFormat imports files as `import --from FORMAT` does.
func (h *importHarness) importFormat(t *testing.T, f agentlog.Format, files ...string) importRun {
	t.Helper()
	var (
		mu  sync.Mutex
		run importRun
	)
	n, err := transfer.ImportFiles(context.Background(), h.Cl, f, files, transfer.Options{Batch: transfer.DefaultBatch, Jobs: transfer.DefaultJobs,
		Notice: func(msg string) { mu.Lock(); run.notices = append(run.notices, msg); mu.Unlock() },
		Failed: func(p string, err error) {
			mu.Lock()
			run.failures = append(run.failures, p+": "+err.Error())
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	run.n = n
	return run
}

// stored reads a session's stored events.
func (h *importHarness) stored(t *testing.T, id string) []schema.Envelope {
	t.Helper()
	return transcripttest.Stored(t, h.Cl, id)
}

// withoutSourceFile is an event's data, with session/created's
// sourceFile label left out (it names the file).
func withoutSourceFile(t *testing.T, e schema.Envelope) string {
	if e.Type != schema.TypeSessionCreated {
		return string(e.Data)
	}
	var d schema.SessionCreated
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatal(err)
	}
	delete(d.Labels, agentlog.LabelSourceFile)
	b, _ := json.Marshal(d)
	return string(b)
}

// sameEvents fails unless two sessions hold the same events.
func sameEvents(t *testing.T, what string, got, want []schema.Envelope) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, the one-shot import stored %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.EventID != w.EventID || g.Type != w.Type || g.TurnID != w.TurnID || g.ToolCallID != w.ToolCallID ||
			withoutSourceFile(t, g) != withoutSourceFile(t, w) {
			t.Fatalf("%s: seq %d is %s %s %s, the one-shot import has %s %s %s", what, g.Seq, g.Type, g.EventID, g.Data, w.Type, w.EventID, w.Data)
		}
	}
}

// Importing a real transcript again appends nothing, and importing it in
// torn pieces (cut every k lines, each piece ending in half a line) stores
// what one import of the whole file stores, event for event.
func TestImportTornPiecesEqualOneShot(t *testing.T) {
	// The pieces go to a server of their own, from a file of the same
	// name: the same session, the same sourceFile.
	h, ht := newImportHarness(t, logstore.Config{}), newImportHarness(t, logstore.Config{})
	dir, tornDir := t.TempDir(), t.TempDir()
	for _, c := range []struct {
		f   agentlog.Format
		dir string
	}{{claudecode.Format{}, transcripttest.RealCC}, {codex.Format{}, filepath.Join(transcripttest.RealCC, "../codex")}, {pi.Format{}, filepath.Join(transcripttest.RealCC, "../pi")}} {
		names, err := os.ReadDir(c.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range names {
			name := d.Name()
			t.Run(c.f.Name()+"/"+name, func(t *testing.T) {
				raw, err := os.ReadFile(filepath.Join(c.dir, name))
				if err != nil {
					t.Fatal(err)
				}
				lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
				whole := filepath.Join(dir, c.f.Name(), "proj", name)
				transcripttest.WriteLines(t, whole, lines, nil)
				if run := h.importFormat(t, c.f, whole); run.n.Failed > 0 {
					t.Fatalf("%+v", run)
				}
				if run := h.importFormat(t, c.f, whole); run.n.Events != 0 || run.n.Unchanged != run.n.Sessions {
					t.Fatalf("again: %+v, want nothing appended", run.n)
				}
				torn := filepath.Join(tornDir, c.f.Name(), "proj", name)
				k := max(1, len(lines)/9)
				for cut := k; cut < len(lines); cut += k {
					transcripttest.WriteLines(t, torn, lines[:cut], lines[cut][:len(lines[cut])/2])
					if run := ht.importFormat(t, c.f, torn); run.n.Failed > 0 || len(run.notices) > 0 {
						t.Fatalf("cut at line %d: %+v", cut, run)
					}
				}
				transcripttest.WriteLines(t, torn, lines, nil)
				if run := ht.importFormat(t, c.f, torn); run.n.Failed > 0 || len(run.notices) > 0 {
					t.Fatalf("whole after pieces: %+v", run)
				}
				id := transcripttest.MainOf(t, c.f, whole).ID
				want := h.stored(t, id)
				if len(want) == 0 {
					t.Fatalf("%s: nothing stored", id)
				}
				sameEvents(t, fmt.Sprintf("in pieces of %d lines", k), ht.stored(t, id), want)
			})
		}
	}
}

// noticed says whether a notice of run names both words.
func noticed(run importRun, a, b string) bool {
	for _, msg := range run.notices {
		if strings.Contains(msg, a) && strings.Contains(msg, b) {
			return true
		}
	}
	return false
}

// openCallCut is the first number of lines of a transcript whose mapping
// leaves a tool call started without the result the whole file gives it,
// and is the start of what the whole file maps to (the file grows as its
// agent writes it); 0: none.
func openCallCut(t *testing.T, f agentlog.Format, dir string, lines [][]byte) int {
	t.Helper()
	p := filepath.Join(dir, "probe", "probe.jsonl")
	transcripttest.WriteLines(t, p, lines, nil)
	whole := transcripttest.MainOf(t, f, p)
	answered := map[string]bool{}
	for _, e := range whole.Events {
		if e.Type == schema.TypeToolResult {
			answered[e.ToolCallID] = true
		}
	}
	for cut := 1; cut < len(lines); cut++ {
		transcripttest.WriteLines(t, p, lines[:cut], nil)
		m := transcripttest.MainOf(t, f, p)
		st := session.New(m.ID)
		prefix := len(m.Events) <= len(whole.Events)
		for i := range m.Events {
			if err := st.Apply(&m.Events[i]); err != nil {
				t.Fatal(err)
			}
			prefix = prefix && m.Events[i].EventID == whole.Events[i].EventID
		}
		for id, tc := range st.Tools {
			if tc.Phase == session.PhaseStarted && prefix && answered[id] {
				return cut
			}
		}
	}
	return 0
}

// A session repaired while its agent was quiet (a call open, the session
// paused) continues when the file grows again: the import resumes it, the
// call's real result is kept as tool/late-result beside the repair's
// outcome_unknown, the turn the repair ended goes on in a turn that
// continues it, and every later event of the file is stored (as itself, or
// as source/unfit under its id). Importing again appends nothing.
func TestImportContinuesAfterRepair(t *testing.T) {
	h := newContStack(t)
	ctx := context.Background()
	dir := t.TempDir()
	var (
		f     agentlog.Format
		path  string
		lines [][]byte
		cut   int
	)
	// The first real transcript with such a prefix: Claude Code's, else
	// codex's.
	for _, c := range []struct {
		f    agentlog.Format
		path string
	}{
		{claudecode.Format{}, filepath.Join(transcripttest.RealCC, "d6e0bada-1959-4eec-a9d2-0bfade768d8f.jsonl")},
		{codex.Format{}, filepath.Join(transcripttest.RealCC, "../codex/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl")},
	} {
		raw, err := os.ReadFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		lines = bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
		if cut = openCallCut(t, c.f, dir, lines); cut > 0 {
			f, path = c.f, filepath.Join(dir, "proj", filepath.Base(c.path))
			break
		}
	}
	if cut == 0 {
		t.Fatal("no real transcript has a prefix that leaves a call open")
	}
	t.Logf("%s cut after line %d of %d", filepath.Base(path), cut, len(lines))
	transcripttest.WriteLines(t, path, lines[:cut], nil)
	if run := h.importFormat(t, f, path); run.n.Failed > 0 {
		t.Fatalf("prefix: %+v", run)
	}
	id := transcripttest.MainOf(t, f, path).ID
	out, err := h.rep.Repair(ctx, id, true)
	if err != nil || !out.Repaired {
		t.Fatalf("repair: %+v, %v", out, err)
	}
	var open []string
	for _, c := range out.Closed {
		if c.Kind == "tool_started" {
			open = append(open, c.ID)
		}
	}
	if len(open) == 0 {
		t.Fatalf("the repair closed no started call: %+v", out.Closed)
	}

	transcripttest.WriteLines(t, path, lines, nil)
	run := h.importFormat(t, f, path)
	if run.n.Failed > 0 || run.n.Events == 0 {
		t.Fatalf("after the repair: %+v", run)
	}
	for _, msg := range run.notices {
		t.Logf("notice: %s", msg)
	}
	stored := h.stored(t, id)
	st := session.New(id)
	results := map[string]int{}
	late := map[string]bool{}
	ids := map[string]bool{}
	resumed := 0
	for i := range stored {
		e := &stored[i]
		if err := st.Apply(e); err != nil {
			t.Fatalf("seq %d: %v", e.Seq, err)
		}
		ids[e.EventID] = true
		switch e.Type {
		case schema.TypeToolResult:
			results[e.ToolCallID]++
		case schema.TypeToolLateResult:
			var d schema.ToolLateResult
			_ = json.Unmarshal(e.Data, &d)
			late[d.ToolCallID] = true
			if !e.Ignorable {
				t.Errorf("seq %d: tool/late-result not ignorable", e.Seq)
			}
		case schema.TypeSessionResumed:
			resumed++
		}
	}
	if resumed != 1 || st.Paused {
		t.Errorf("%d session/resumed, paused %v; want one, not paused", resumed, st.Paused)
	}
	for call, n := range results {
		if n != 1 {
			t.Errorf("call %s has %d tool/result events", call, n)
		}
	}
	whole := transcripttest.MainOf(t, f, path).Events
	gives := map[string]bool{}
	for _, e := range whole {
		if !ids[e.EventID] {
			t.Errorf("source event %s %s is not stored", e.Type, e.EventID)
		}
		if e.Type == schema.TypeToolResult {
			gives[e.ToolCallID] = true
		}
	}
	nlate := 0
	for _, c := range open {
		if gives[c] {
			nlate++
			if !late[c] {
				t.Errorf("the result of call %s, closed by the repair, is not kept as tool/late-result", c)
			}
		}
	}
	if nlate == 0 {
		t.Errorf("the file gives no result for the calls the repair closed (%v): no late result tested", open)
	}
	if run := h.importFormat(t, f, path); run.n.Events != 0 || run.n.Failed > 0 {
		t.Fatalf("again: %+v, want nothing appended", run)
	}
}

// A file that is no longer a continuation of its session goes to a
// session of its own, <id>-r2, then -r3, with a warning naming the file;
// the stored sessions are left as they are, and importing again appends
// nothing (the generation is found again).
func TestImportRewrittenFileGoesToNextGeneration(t *testing.T) {
	h := newImportHarness(t, logstore.Config{})
	path, id, lines, other := transcripttest.RewriteCase(t)
	h.importPaths(t, path)
	first := len(h.stored(t, id))

	// Shrunk by 20 lines, then continued with other lines.
	transcripttest.WriteLines(t, path, append(append([][]byte{}, lines[:len(lines)-20]...), other[3:12]...), nil)
	run := h.importPaths(t, path)
	r2 := agentlog.GenerationID(id, 2)
	if run.n.Failed > 0 || !noticed(run, path, r2) {
		t.Fatalf("shrunk and continued: %+v", run)
	}
	if n := len(h.stored(t, id)); n != first {
		t.Fatalf("%s holds %d events, had %d", id, n, first)
	}
	if len(h.stored(t, r2)) == 0 {
		t.Fatalf("%s holds nothing", r2)
	}
	if run := h.importPaths(t, path); run.n.Events != 0 || len(run.notices) > 0 {
		t.Fatalf("again: %+v", run)
	}

	// Replaced by a file with another root.
	transcripttest.WriteLines(t, path, other, nil)
	run = h.importPaths(t, path)
	r3 := agentlog.GenerationID(id, 3)
	if run.n.Failed > 0 || !noticed(run, path, r3) {
		t.Fatalf("rewritten: %+v", run)
	}
	if got, m := h.stored(t, r3), transcripttest.MainOnly(t, path); len(got) != len(m.Events) {
		t.Fatalf("%s holds %d events, the file maps to %d", r3, len(got), len(m.Events))
	}
	if run := h.importPaths(t, path); run.n.Events != 0 || len(run.notices) > 0 {
		t.Fatalf("again: %+v", run)
	}
}

// Two files that map to one session id both import: dup.jsonl in two
// projects (the second goes to the id made from its own name), a.b.jsonl
// and a-b.jsonl (their ids differ).
func TestImportFilesWithOneIDStayApart(t *testing.T) {
	h := newImportHarness(t, logstore.Config{})
	dir := t.TempDir()
	x := transcripttest.RealLines(t, "491e126e-1e71-469c-ade2-fcc8af567c74.jsonl")
	y := transcripttest.RealLines(t, "d6e0bada-1959-4eec-a9d2-0bfade768d8f.jsonl")
	a, b := filepath.Join(dir, "proj-a", "dup.jsonl"), filepath.Join(dir, "proj-b", "dup.jsonl")
	dot, dash := filepath.Join(dir, "proj-a", "a.b.jsonl"), filepath.Join(dir, "proj-a", "a-b.jsonl")
	transcripttest.WriteLines(t, a, x, nil)
	transcripttest.WriteLines(t, b, y, nil)
	transcripttest.WriteLines(t, dot, y, nil)
	transcripttest.WriteLines(t, dash, x, nil)
	run := h.importPaths(t, a, b, dot, dash)
	if run.n.Failed > 0 {
		t.Fatalf("%+v", run)
	}
	// The file imported second goes to the id made from its name.
	moved := agentlog.FileSessionID("cc-dup", "proj-b/dup.jsonl")
	if !noticed(run, b, moved) {
		moved = agentlog.FileSessionID("cc-dup", "proj-a/dup.jsonl")
		if !noticed(run, a, moved) {
			t.Fatalf("notices %q, want one naming a file and the id made from its name", run.notices)
		}
	}
	for _, c := range []struct{ id, file string }{{"cc-dup", "proj-a/dup.jsonl"}, {moved, "proj-b/dup.jsonl"},
		{agentlog.SessionID("cc", "a.b"), "proj-a/a.b.jsonl"}, {"cc-a-b", "proj-a/a-b.jsonl"}} {
		if moved == agentlog.FileSessionID("cc-dup", "proj-a/dup.jsonl") && strings.HasSuffix(c.file, "dup.jsonl") {
			c.file = strings.NewReplacer("proj-a", "proj-b", "proj-b", "proj-a").Replace(c.file)
		}
		evs := h.stored(t, c.id)
		var d schema.SessionCreated
		if len(evs) == 0 || json.Unmarshal(evs[0].Data, &d) != nil || d.Labels[agentlog.LabelSourceFile] != c.file {
			t.Errorf("%s is not the session of %s: %d events, labels %v", c.id, c.file, len(evs), d.Labels)
		}
	}
	if run := h.importPaths(t, a, b, dot, dash); run.n.Events != 0 || run.n.Failed > 0 || len(run.notices) > 0 {
		t.Fatalf("again: %+v, want nothing appended and nothing said", run)
	}

	// A third dup.jsonl, whose own id a file named after it holds: the
	// import of it fails, naming both files.
	c := filepath.Join(dir, "proj-c", "dup.jsonl")
	own := agentlog.FileSessionID("cc-dup", "proj-c/dup.jsonl")
	squatter := filepath.Join(dir, "proj-x", strings.TrimPrefix(own, "cc-")+".jsonl")
	transcripttest.WriteLines(t, squatter, x, nil)
	if run := h.importPaths(t, squatter); run.n.Failed > 0 {
		t.Fatalf("%+v", run)
	}
	transcripttest.WriteLines(t, c, transcripttest.RealLines(t, "55604662-cf2a-4331-851a-ec234028f8ca.jsonl"), nil)
	run = h.importPaths(t, c)
	if run.n.Failed != 1 || len(run.failures) != 1 || !strings.Contains(run.failures[0], "proj-c/dup.jsonl") ||
		!strings.Contains(run.failures[0], "proj-x/"+strings.TrimPrefix(own, "cc-")+".jsonl") || !strings.Contains(run.failures[0], "collides") {
		t.Fatalf("a collision of the file's own id: %+v", run)
	}
}

// genTranscript writes a Claude Code transcript of at least size bytes in
// the shape of the real 2.1.38 lines (a prompt, an assistant line with a
// Bash tool_use, its tool_result line with toolUseResult), each tool
// output outBytes long.
func genTranscript(t *testing.T, path string, size, outBytes int) int {
	t.Helper()
	real := transcripttest.RealLines(t, "d6e0bada-1959-4eec-a9d2-0bfade768d8f.jsonl")
	var prompt, call, result map[string]any
	for _, l := range [][]byte{real[3], real[4], real[10]} {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		switch {
		case prompt == nil:
			prompt = m
		case call == nil:
			call = m
		default:
			result = m
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	out := strings.Repeat("ok  \tgithub.com/example/pkg\t0.012s <tests> & more\n", outBytes/48+1)[:outBytes]
	written, n, parent := 0, 0, any(nil)
	put := func(m map[string]any) {
		n++
		uuid := fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
		m["uuid"], m["parentUuid"] = uuid, parent
		parent = uuid
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
		w.WriteByte('\n')
		written += len(b) + 1
	}
	for turn := 0; written < size; turn++ {
		id := fmt.Sprintf("toolu_gen%06d", turn)
		p := clone(prompt)
		p["message"] = map[string]any{"role": "user", "content": fmt.Sprintf("step %d: run the tests", turn)}
		put(p)
		c := clone(call)
		msg := clone(c["message"].(map[string]any))
		msg["id"] = fmt.Sprintf("msg_gen%06d", turn)
		msg["content"] = []any{map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{"command": "go test ./..."}}}
		c["message"] = msg
		put(c)
		r := clone(result)
		r["message"] = map[string]any{"role": "user", "content": []any{map[string]any{"tool_use_id": id, "type": "tool_result", "content": out, "is_error": false}}}
		r["toolUseResult"] = map[string]any{"stdout": out, "stderr": "", "interrupted": false, "isImage": false}
		r["sourceToolAssistantUUID"] = parent
		put(r)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return written
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// A 10 MB transcript with 64 KB tool outputs imports with the default
// options (the import verb's default flags) under the server's default
// max_payload (1 MB): appends are sized in bytes, not only in events.
func TestImportTenMegabyteTranscriptDefaultFlags(t *testing.T) {
	h := newImportHarness(t, logstore.Config{})
	dir := filepath.Join(t.TempDir(), "proj")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "10000000-0000-4000-8000-000000000001.jsonl")
	size := genTranscript(t, path, 10<<20, 64<<10)
	if mp := h.NC.MaxPayload(); mp != 1<<20 {
		t.Fatalf("max_payload %d, want the default 1 MiB", mp)
	}
	files, err := transfer.SessionFiles(claudecode.Format{}, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	start := time.Now()
	if err := transfer.ImportFrom(context.Background(), h.Cl, claudecode.Format{}, files, transfer.DefaultBatch, transfer.DefaultJobs, &stdout, &stderr); err != nil {
		t.Fatalf("import of a %d-byte transcript: %v\n%s\n%s", size, err, stdout.String(), stderr.String())
	}
	t.Logf("imported %d bytes in %v: %s", size, time.Since(start), stdout.String())
	if m, got := transcripttest.MainOnly(t, path), h.stored(t, "cc-10000000-0000-4000-8000-000000000001"); len(got) != len(m.Events) {
		t.Fatalf("%d events stored, the file maps to %d", len(got), len(m.Events))
	}
}

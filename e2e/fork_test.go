package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/services/forker"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/writer"
)

// Fork end to end (DESIGN.md section 8): the real `sessionlog forker`
// and `sessionlog fork` binaries against embedded JetStream, the forker
// killed with SIGKILL in the middle of a copy.

var (
	fkBuildOnce sync.Once
	fkBin       string
	fkBuildErr  error
)

// fkSessionlog builds cmd/sessionlog once per test binary.
func fkSessionlog(t *testing.T) string {
	t.Helper()
	fkBuildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sessionlog-fork-e2e-")
		if err != nil {
			fkBuildErr = err
			return
		}
		fkBin = filepath.Join(dir, "sessionlog")
		out, err := exec.Command("go", "build", "-o", fkBin, "../cmd/sessionlog").CombinedOutput()
		if err != nil {
			fkBuildErr = fmt.Errorf("go build ../cmd/sessionlog: %v\n%s", err, out)
		}
	})
	if fkBuildErr != nil {
		t.Fatal(fkBuildErr)
	}
	return fkBin
}

// fkForker is a `sessionlog forker` child process.
type fkForker struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan struct{}
}

// fkStartForker starts the forker binary and waits for its /readyz.
func fkStartForker(t *testing.T, natsURL string, args ...string) *fkForker {
	t.Helper()
	port, err := natstest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(fkSessionlog(t), append([]string{"forker", "--nats-url", natsURL, "--http-listen", addr, "--log-level", "warn"}, args...)...)
	f := &fkForker{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = f.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(f.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-f.done
		if t.Failed() {
			t.Logf("forker stderr:\n%s", f.stderr.String())
		}
	})
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		select {
		case <-f.done:
			t.Fatalf("forker exited: %s", f.stderr.String())
		default:
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})
	return f
}

func (f *fkForker) kill(t *testing.T) {
	t.Helper()
	if err := f.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-f.done
}

type fkEnv struct {
	t     *testing.T
	url   string
	store *logstore.Store
	nc    *nats.Conn // the store's
	cl    *client.Client
	// layout is where the store lives, on the servers of deploy.
	layout natstest.Layout
	deploy *natstest.Deployment
}

func fkStart(t *testing.T) *fkEnv {
	t.Helper()
	return fkStartLayout(t, natstest.Layout{Partitions: 1, Nodes: 1})
}

// fkStartLayout is fkStart on the servers of layout l, every stream led
// and current; forker processes are then started with fkForkerArgs.
func fkStartLayout(t *testing.T, l natstest.Layout) *fkEnv {
	t.Helper()
	d := natstest.RunLayout(t, l)
	nc := d.Connect()
	st, err := logstore.Open(context.Background(), nc, logstore.Config{Partitions: l.Partitions, Replicas: l.Replicas()})
	if err != nil {
		t.Fatal(err)
	}
	d.WaitLeaders(nc)
	w, err := writer.New(writer.Config{Store: st, Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("writer: %v", err)
		}
	})
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, w.Ready)
	return &fkEnv{t: t, url: d.URL, store: st, nc: nc, cl: client.New(d.Connect()), layout: l, deploy: d}
}

// forkerArgs are the flags a forker process needs for the env's store.
func (e *fkEnv) forkerArgs(args ...string) []string {
	return append([]string{"--partitions", strconv.Itoa(e.layout.Partitions), "--replicas", strconv.Itoa(e.layout.Replicas())}, args...)
}

func (e *fkEnv) snapshot(id string) string {
	e.t.Helper()
	evs, _, err := e.store.ReadEvents(context.Background(), id, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	var b strings.Builder
	for _, x := range evs {
		fmt.Fprintf(&b, "%d %d %s %s\n", x.StreamSeq, x.Seq, x.EventID, x.Data)
	}
	return b.String()
}

// fold folds a session from the log: every event must fold.
func (e *fkEnv) fold(id string) (*session.State, []logstore.Event) {
	e.t.Helper()
	evs, _, err := e.store.ReadEvents(context.Background(), id, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	st := session.New(id)
	for i := range evs {
		if err := st.Apply(&evs[i].Envelope); err != nil {
			e.t.Fatalf("%s seq %d does not fold: %v", id, evs[i].Seq, err)
		}
	}
	return st, evs
}

func (e *fkEnv) appendUser(id, text string) error {
	_, err := e.cl.Append(context.Background(), client.AppendRequest{SessionID: id,
		Events: []schema.Envelope{{Type: schema.TypeMessageUser, Data: []byte(`{"content":"` + text + `"}`)}}})
	return err
}

// The forker killed with SIGKILL in the middle of a 10,000-event copy and
// started again: the child ends complete with fork/committed (or closed
// as abandoned), is never usable half-copied, and the parent is
// unchanged. Afterwards parent and child take appends independently. On
// one stream on one node, and on three partitions of an R3 cluster, where
// every child lands in another partition than the parent's.
func TestForkForkerKilledMidCopy(t *testing.T) {
	natstest.ForEachLayout(t, testForkForkerKilledMidCopy,
		natstest.Layout{Partitions: 1, Nodes: 1}, natstest.Layout{Partitions: 3, Nodes: 3})
}

func testForkForkerKilledMidCopy(t *testing.T, l natstest.Layout) {
	e := fkStartLayout(t, l)
	const n = 10_000
	if _, err := gen.Seed(context.Background(), e.store, "parent", n, 1000); err != nil {
		t.Fatal(err)
	}
	before := e.snapshot("parent")
	// Small batches and a short staleness, so the copy takes long enough
	// to be caught in the middle and the restarted forker takes it over
	// at once.
	args := e.forkerArgs("--batch-size", "100", "--stale-after", "1s", "--sweep-interval", "200ms")
	var child string
	var killedAt uint64
	for try := 0; try < 5 && killedAt == 0; try++ {
		fk := fkStartForker(t, e.url, args...)
		child = fmt.Sprintf("child-%d", try)
		if l.Partitions > 1 {
			// Every try's child in another partition than the parent.
			ploc, _ := e.store.Locate("parent")
			for {
				if cloc, _ := e.store.Locate(child); cloc.Stream != ploc.Stream {
					break
				}
				child += "x"
			}
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, _ = e.cl.Fork(ctx, api.ForkRequest{ParentID: "parent", ChildID: child})
		}()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			tail, err := e.store.Tail(context.Background(), child)
			if err != nil {
				t.Fatal(err)
			}
			if tail.Seq >= 2000 {
				if tail.Seq <= n {
					fk.kill(t)
					killedAt = tail.Seq
				}
				break
			}
			time.Sleep(time.Millisecond)
		}
		if killedAt == 0 {
			fk.kill(t)
		}
	}
	if killedAt == 0 {
		t.Fatal("never caught the forker in the middle of a copy")
	}
	st, _ := e.fold(child)
	if !st.Forking || st.ForkCommittedSeq != 0 || st.LastSeq > n {
		t.Fatalf("after the kill at seq %d: forking=%v committed@%d last=%d", killedAt, st.Forking, st.ForkCommittedSeq, st.LastSeq)
	}
	t.Logf("killed the forker with the child at seq %d of %d", st.LastSeq, n+1)
	// The half-copied child refuses the agent.
	if err := e.appendUser(child, "too early"); client.CodeOf(err) != schema.CodeForking {
		t.Fatalf("append to the half-copied child: %v", err)
	}

	fkStartForker(t, e.url, args...)
	natstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		st, _ := e.fold(child)
		if st.Forking {
			return fmt.Errorf("child still forking at seq %d", st.LastSeq)
		}
		return nil
	})
	st, evs := e.fold(child)
	switch {
	case st.Closed:
		if st.CloseReason != forker.AbandonReason || st.ForkCommittedSeq != 0 {
			t.Fatalf("child closed (%s) committed@%d", st.CloseReason, st.ForkCommittedSeq)
		}
		t.Log("the copy was abandoned")
	default:
		if st.ForkCommittedSeq != n+1 || len(evs) != n+1 {
			t.Fatalf("child committed@%d with %d events, want the whole prefix then fork/committed at %d", st.ForkCommittedSeq, len(evs), n+1)
		}
		var d schema.SessionCreated
		if err := evs[0].DecodeData(&d); err != nil || d.Parent == nil || d.Parent.SessionID != "parent" || d.Parent.SeedLength != n {
			t.Fatalf("child created %s", evs[0].Data)
		}
		pevs, _, err := e.store.ReadEvents(context.Background(), "parent", 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < n; i++ {
			if evs[i].Seq != pevs[i].Seq || evs[i].Type != pevs[i].Type || string(evs[i].Data) != string(pevs[i].Data) || !evs[i].Synthetic {
				t.Fatalf("child seq %d is not a copy of the parent's", i+1)
			}
		}
		t.Log("the restarted forker finished the copy")
	}
	if got := e.snapshot("parent"); got != before {
		t.Fatal("the parent changed")
	}
	if st.Closed {
		return
	}
	// Independent after the fork: each takes its own seq n+... .
	if err := e.appendUser("parent", "parent-only"); err != nil {
		t.Fatal(err)
	}
	if err := e.appendUser(child, "child-only"); err != nil {
		t.Fatal(err)
	}
	pst, pevs := e.fold("parent")
	cst, cevs := e.fold(child)
	if pst.LastSeq != n+1 || cst.LastSeq != n+2 {
		t.Fatalf("parent at %d, child at %d", pst.LastSeq, cst.LastSeq)
	}
	if !strings.Contains(string(pevs[n].Data), "parent-only") || !strings.Contains(string(cevs[n+1].Data), "child-only") {
		t.Fatal("appends crossed over")
	}
}

// `sessionlog fork` prints the child id; a refusal exits non-zero with
// the code and the nearest safe seqs.
func TestForkCommand(t *testing.T) {
	e := fkStart(t)
	fkStartForker(t, e.url)
	if _, err := gen.Seed(context.Background(), e.store, "p", 4001, 1000); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, error) {
		cmd := exec.Command(fkSessionlog(t), append([]string{"fork", "--nats-url", e.url}, args...)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}
	out, errOut, err := run("p", "--child", "c1", "--at-seq", "4001", "--progress", "always")
	if err != nil || out != "c1\n" {
		t.Fatalf("fork: %v\nstdout %q\nstderr %s", err, out, errOut)
	}
	if st, _ := e.fold("c1"); st.ForkCommittedSeq != 4002 || st.Meta.Parent.SeedLength != 4001 {
		t.Fatalf("child committed@%d", st.ForkCommittedSeq)
	}
	// Turn t3 of the generated session ends at seq 1+3*8.
	out, errOut, err = run("p", "--at-turn", "t3")
	if err != nil || !schema.ValidSessionID(strings.TrimSpace(out)) {
		t.Fatalf("fork --at-turn: %v %q %s", err, out, errOut)
	}
	if st, _ := e.fold(strings.TrimSpace(out)); st.Meta.Parent.SeedLength != 1+3*gen.TurnEvents {
		t.Fatalf("seedLength %d", st.Meta.Parent.SeedLength)
	}
	_, errOut, err = run("p", "--child", "c3", "--at-seq", "5")
	var xe *exec.ExitError
	if !errors.As(err, &xe) || xe.ExitCode() != 1 || !strings.Contains(errOut, "unsafe_cut") || !strings.Contains(errOut, "(nearest safe: before 1 after 9)") || strings.Count(errOut, "nearest safe") != 1 {
		t.Fatalf("unsafe cut: %v %s", err, errOut)
	}
	out, errOut, err = run("p", "--child", "c4", "--at-seq", "4001", "--json", "--progress", "never")
	var reply struct {
		ChildID    string `json:"childId"`
		ParentID   string `json:"parentId"`
		SeedLength uint64 `json:"seedLength"`
	}
	if err != nil || json.Unmarshal([]byte(out), &reply) != nil || reply.ChildID != "c4" || reply.ParentID != "p" || reply.SeedLength != 4001 {
		t.Fatalf("fork --json: %v %q %s", err, out, errOut)
	}
	_, errOut, err = run("missing")
	if !errors.As(err, &xe) || !strings.Contains(errOut, "not_found") {
		t.Fatalf("missing parent: %v %s", err, errOut)
	}
}

// The projector shows the fork's lineage (the child's parent, the parent's
// children) and the child's model-visible context at the cut equals the
// parent's: compaction summary and the transcript after it.
func TestForkLineageAndContextInProjector(t *testing.T) {
	e := fkStart(t)
	fk, err := forker.New(forker.Config{Store: e.store, Conn: e.nc})
	if err != nil {
		t.Fatal(err)
	}
	fkRun(t, fk.Run, fk.Ready)
	pj, err := projector.New(projector.Config{Store: e.store, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	fkRun(t, pj.Run, pj.Ready)
	srv := httptest.NewServer(pj.Handler())
	t.Cleanup(srv.Close)

	ctx := context.Background()
	app := func(id string, evs ...schema.Envelope) {
		t.Helper()
		if _, err := e.cl.Append(ctx, client.AppendRequest{SessionID: id, Events: evs}); err != nil {
			t.Fatal(err)
		}
	}
	data := func(s string) json.RawMessage { return json.RawMessage(s) }
	app("p", schema.Envelope{Type: schema.TypeSessionCreated, Data: data(`{"title":"parent"}`)})
	app("p",
		schema.Envelope{Type: schema.TypeMessageUser, Data: data(`{"content":"one"}`)},
		schema.Envelope{Type: schema.TypeTurnStarted, TurnID: "t1"},
		schema.Envelope{Type: schema.TypeAttemptStarted, TurnID: "t1", AttemptID: "a1"},
		schema.Envelope{Type: schema.TypeMessageAssistant, TurnID: "t1", AttemptID: "a1", Data: data(`{"content":"two"}`)},
		schema.Envelope{Type: schema.TypeTurnEnded, TurnID: "t1", Data: data(`{"reason":"completed"}`)},
		schema.Envelope{Type: schema.TypeCompactionStarted, Data: data(`{"compactionId":"k1","throughSeq":5}`)},
		schema.Envelope{Type: schema.TypeCompactionEnded, Data: data(`{"compactionId":"k1","throughSeq":5,"summary":"one, two"}`)},
		schema.Envelope{Type: schema.TypeMessageUser, Data: data(`{"content":"three"}`)},
		schema.Envelope{Type: schema.TypeTurnStarted, TurnID: "t2"},
		schema.Envelope{Type: schema.TypeToolRequested, TurnID: "t2", ToolCallID: "c1", Data: data(`{"name":"sh","input":{"cmd":"ls"}}`)},
		schema.Envelope{Type: schema.TypeToolStarted, TurnID: "t2", ToolCallID: "c1"},
		schema.Envelope{Type: schema.TypeToolResult, TurnID: "t2", ToolCallID: "c1", Data: data(`{"status":"ok","output":"a b"}`)},
		schema.Envelope{Type: schema.TypeTurnEnded, TurnID: "t2", Data: data(`{"reason":"completed"}`)},
	)
	r, err := e.cl.Fork(ctx, api.ForkRequest{ParentID: "p", ChildID: "c"})
	if err != nil || r.SeedLength != 14 {
		t.Fatalf("fork: %+v %v", r, err)
	}
	get := func(path string, v any) error {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %d", path, resp.StatusCode)
		}
		return json.NewDecoder(resp.Body).Decode(v)
	}
	var child, parent httpapi.Detail
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		// Each poll decodes into empty details: decoded into the last
		// poll's, a field the answer leaves out (forking false, no open
		// turn) would keep the value of a poll made mid-copy.
		child, parent = httpapi.Detail{}, httpapi.Detail{}
		if err := get("/v1/sessions/c", &child); err != nil {
			return err
		}
		if err := get("/v1/sessions/p", &parent); err != nil {
			return err
		}
		if child.LastSeq != 15 {
			return fmt.Errorf("projector has the child at seq %d", child.LastSeq)
		}
		return nil
	})
	if child.Parent == nil || child.Parent.SessionID != "p" || child.Parent.SeedLength != 14 || child.Parent.Depth != 1 || child.Forking {
		t.Fatalf("child lineage: parent %+v forking %v", child.Parent, child.Forking)
	}
	if len(parent.Children) != 1 || parent.Children[0] != "c" {
		t.Fatalf("parent's children %v", parent.Children)
	}
	var pc, cc httpapi.Context
	if err := get("/v1/sessions/p/context", &pc); err != nil {
		t.Fatal(err)
	}
	if err := get("/v1/sessions/c/context", &cc); err != nil {
		t.Fatal(err)
	}
	if pc.Compaction == nil || cc.Compaction == nil || *pc.Compaction != *cc.Compaction || pc.Compaction.Summary != "one, two" {
		t.Fatalf("compaction: parent %+v child %+v", pc.Compaction, cc.Compaction)
	}
	render := func(c httpapi.Context) string {
		var b strings.Builder
		for _, x := range c.Entries {
			if x.Role == "" {
				continue
			}
			fmt.Fprintf(&b, "%d %s %s %s %s\n", x.Seq, x.Type, x.Role, x.ToolCallID, x.Data)
		}
		return b.String()
	}
	if render(pc) != render(cc) || !strings.Contains(render(pc), "three") || strings.Contains(render(pc), `"one"`) {
		t.Fatalf("context:\nparent\n%s\nchild\n%s", render(pc), render(cc))
	}
}

func fkRun(t *testing.T, run func(context.Context) error, ready func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("service: %v", err)
		}
	})
	natstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, ready)
}

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
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

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/services/repairer"
	"github.com/sessionlog/sessionlog/services/writer"
)

// Repair end to end (DESIGN.md section 6): real embedded JetStream, the
// real writer and repairer, and child processes (e2e/testagent) killed
// with SIGKILL.

const (
	rpTTL   = 1500 * time.Millisecond
	rpGrace = 500 * time.Millisecond
)

var (
	rpBuildOnce sync.Once
	rpBin       string
	rpBuildErr  error
)

// rpTestagent builds e2e/testagent once per test binary.
func rpTestagent(t *testing.T) string {
	t.Helper()
	rpBuildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sessionlog-testagent-")
		if err != nil {
			rpBuildErr = err
			return
		}
		rpBin = filepath.Join(dir, "testagent")
		out, err := exec.Command("go", "build", "-o", rpBin, "./testagent").CombinedOutput()
		if err != nil {
			rpBuildErr = fmt.Errorf("go build ./testagent: %v\n%s", err, out)
		}
	})
	if rpBuildErr != nil {
		t.Fatal(rpBuildErr)
	}
	return rpBin
}

type rpEnv struct {
	t     *testing.T
	url   string
	nc    *nats.Conn
	store *logstore.Store
	// replicas of the store's streams, for the repairer processes.
	replicas int
}

func rpStart(t *testing.T) *rpEnv {
	t.Helper()
	return rpStartLayout(t, natstest.Layout{Partitions: 1, Nodes: 1})
}

// rpStartLayout is rpStart on the servers of layout l, every stream led
// and current.
func rpStartLayout(t *testing.T, l natstest.Layout) *rpEnv {
	t.Helper()
	d := natstest.RunLayout(t, l)
	nc := d.Connect()
	st, err := logstore.Open(context.Background(), nc, logstore.Config{LeaseTTL: rpTTL, Partitions: l.Partitions, Replicas: l.Replicas()})
	if err != nil {
		t.Fatal(err)
	}
	d.WaitLeaders(nc)
	return &rpEnv{t: t, url: d.URL, nc: nc, store: st, replicas: l.Replicas()}
}

// rpLayouts: one stream on one node, three partitions on an R3 cluster.
var rpLayouts = []natstest.Layout{{Partitions: 1, Nodes: 1}, {Partitions: 3, Nodes: 3}}

// rpRun runs a service's Run until the test ends.
func rpRun(t *testing.T, run func(context.Context) error, ready func() error) {
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
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, ready)
}

func (e *rpEnv) writer() {
	e.t.Helper()
	w, err := writer.New(writer.Config{Store: e.store, Conn: e.nc})
	if err != nil {
		e.t.Fatal(err)
	}
	rpRun(e.t, w.Run, w.Ready)
}

func (e *rpEnv) repairer(cfg repairer.Config) *repairer.Service {
	e.t.Helper()
	cfg.Store = e.store
	if cfg.Conn == nil {
		cfg.Conn = e.nc
	}
	r, err := repairer.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	rpRun(e.t, r.Run, r.Ready)
	return r
}

func (e *rpEnv) state(id string) *session.State {
	e.t.Helper()
	st, err := client.ReaderLoader{Reader: writer.StoreReader{Store: e.store}}.LoadState(context.Background(), id)
	if err != nil {
		e.t.Fatalf("%s does not fold: %v", id, err)
	}
	return st
}

// repairs counts a session's repair/applied events (the log must fold).
func (e *rpEnv) repairs(id string) (int, *session.State, error) {
	evs, _, err := e.store.ReadEvents(context.Background(), id, 0)
	if err != nil {
		return 0, nil, err
	}
	st := session.New(id)
	n := 0
	for i := range evs {
		if evs[i].Type == schema.TypeRepairApplied {
			n++
		}
		if err := st.Apply(&evs[i].Envelope); err != nil {
			return n, st, fmt.Errorf("%s seq %d does not fold: %w", id, evs[i].Seq, err)
		}
	}
	return n, st, nil
}

// appendVia sends one event through the writer and returns the error code
// ("" on success).
func (e *rpEnv) appendVia(id string, ev string) string {
	e.t.Helper()
	body := fmt.Sprintf(`{"sessionId":%q,"events":[%s]}`, id, ev)
	m, err := e.nc.Request(logstore.SubjectAppend, []byte(body), 10*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	var r struct {
		Error *struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		e.t.Fatal(err)
	}
	if r.Error != nil {
		return r.Error.Code
	}
	return ""
}

// seedOrphans stores n sessions with a tool call started and claims their
// leases once, as holders that then die.
func (e *rpEnv) seedOrphans(prefix string, n int) []string {
	e.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	rpParallel(e.t, ids, func(id string) error {
		now := time.Now().UTC()
		mk := func(seq uint64, typ, data string) schema.Envelope {
			ev := schema.Envelope{SchemaVersion: 1, SessionID: id, Seq: seq, EventID: fmt.Sprintf("a%d", seq), Time: now, Type: typ}
			if typ != schema.TypeSessionCreated {
				ev.TurnID = "t1"
			}
			if strings.HasPrefix(typ, "tool/") {
				ev.ToolCallID = "c1"
			}
			if data != "" {
				ev.Data = json.RawMessage(data)
			}
			return ev
		}
		if _, err := e.store.Append(context.Background(), logstore.AppendRequest{SessionID: id, Events: []schema.Envelope{
			mk(1, schema.TypeSessionCreated, ""), mk(2, schema.TypeTurnStarted, ""),
			mk(3, schema.TypeToolRequested, `{"name":"sh","input":{}}`), mk(4, schema.TypeToolStarted, ""),
		}}); err != nil {
			return err
		}
		return e.store.RenewLease(context.Background(), id, "dead-holder", time.Now())
	})
	return ids
}

func rpParallel(t *testing.T, ids []string, f func(id string) error) {
	t.Helper()
	var wg sync.WaitGroup
	ch := make(chan string)
	var mu sync.Mutex
	var first error
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ch {
				if err := f(id); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, id := range ids {
		ch <- id
	}
	close(ch)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

// child is a testagent process.
type child struct {
	cmd   *exec.Cmd
	lines chan string
}

func rpSpawn(t *testing.T, args ...string) *child {
	t.Helper()
	cmd := exec.Command(rpTestagent(t), args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		_, _ = io.Copy(io.Discard, out)
	}()
	t.Cleanup(c.kill)
	return c
}

func (c *child) waitLine(t *testing.T, prefix string, d time.Duration) string {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited before printing %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("child did not print %q within %v", prefix, d)
		}
	}
}

// kill sends SIGKILL and reaps the process.
func (c *child) kill() {
	if c.cmd.ProcessState != nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	_ = c.cmd.Wait()
}

// TestRepairKilledAgent: an agent process appends tool/started through the
// writer and is killed with SIGKILL before the result. While it lives and
// heartbeats (several TTLs, turn open) nothing is repaired; after the kill
// the session is repaired within TTL + grace + 1 s, the call is
// outcome_unknown and the session paused: turn/started is refused with
// paused until session/resumed. On one stream, and on three partitions of
// an R3 cluster.
func TestRepairKilledAgent(t *testing.T) {
	natstest.ForEachLayout(t, testRepairKilledAgent, rpLayouts...)
}

func testRepairKilledAgent(t *testing.T, l natstest.Layout) {
	e := rpStartLayout(t, l)
	e.writer()
	e.repairer(repairer.Config{Grace: rpGrace, SweepInterval: 200 * time.Millisecond})

	agent := rpSpawn(t, "agent", "-nats-url", e.url, "-session", "s-agent", "-holder", "agent-7", "-ttl", rpTTL.String())
	agent.waitLine(t, "STARTED", 30*time.Second)
	alive := time.Now().Add(3 * rpTTL)
	for time.Now().Before(alive) {
		if st := e.state("s-agent"); st.Paused || st.Repairs > 0 {
			t.Fatal("a live, heartbeating holder's session was repaired")
		}
		time.Sleep(100 * time.Millisecond)
	}
	agent.kill()
	killed := time.Now()
	natstest.CheckFor(t, rpTTL+rpGrace+time.Second, 10*time.Millisecond, func() error {
		if !e.state("s-agent").Paused {
			return fmt.Errorf("not repaired %v after the kill", time.Since(killed))
		}
		return nil
	})
	t.Logf("repaired %v after SIGKILL (TTL %v, grace %v)", time.Since(killed), rpTTL, rpGrace)
	st := e.state("s-agent")
	if c := st.Tools["c1"]; c == nil || c.Status != schema.ToolOutcomeUnknown {
		t.Fatalf("c1: %+v", st.Tools["c1"])
	}
	if st.Turn != nil || st.LastTurn.Reason != schema.TurnInterrupted || st.Repairs != 1 {
		t.Fatalf("turn %+v last %+v repairs %d", st.Turn, st.LastTurn, st.Repairs)
	}

	rec, err := client.Recover(context.Background(), client.ReaderLoader{Reader: writer.StoreReader{Store: e.store}}, "s-agent")
	if err != nil {
		t.Fatal(err)
	}
	if !rec.MustResume || len(rec.CheckWorld) != 1 || rec.CheckWorld[0].ToolCallID != "c1" || len(rec.Retry)+len(rec.Reschedule) != 0 {
		t.Fatalf("recovery %+v", rec)
	}

	if code := e.appendVia("s-agent", `{"type":"turn/started","turnId":"t2"}`); code != string(schema.CodePaused) {
		t.Fatalf("turn/started after repair: %q, want paused", code)
	}
	if code := e.appendVia("s-agent", `{"type":"session/resumed","data":{"by":"operator"}}`); code != "" {
		t.Fatalf("session/resumed: %s", code)
	}
	if code := e.appendVia("s-agent", `{"type":"turn/started","turnId":"t2"}`); code != "" {
		t.Fatalf("turn/started after resume: %s", code)
	}
	if n, _, err := e.repairs("s-agent"); err != nil || n != 1 {
		t.Fatalf("%d repairs, %v", n, err)
	}
}

// TestRepairerKilledMidRun: a repairer process is killed with SIGKILL while
// it works through a backlog of orphans. No session holds half a repair
// (each batch is atomic), and a restarted repairer finishes the rest:
// every session repaired exactly once.
func TestRepairerKilledMidRun(t *testing.T) {
	e := rpStart(t)
	const n = 200
	ids := e.seedOrphans("crash", n)
	// Let every lease expire and the grace pass with no repairer running,
	// so the first one meets the whole backlog at once.
	time.Sleep(rpTTL + rpGrace + 300*time.Millisecond)

	args := []string{"repairer", "-nats-url", e.url, "-ttl", rpTTL.String(), "-grace", rpGrace.String(), "-concurrency", "2"}
	r1 := rpSpawn(t, args...)
	r1.waitLine(t, "READY", 30*time.Second)
	done := func() int {
		c := 0
		for _, id := range ids {
			if tail, err := e.store.Tail(context.Background(), id); err == nil && tail.Seq > 4 {
				c++
			}
		}
		return c
	}
	natstest.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if done() < 10 {
			return fmt.Errorf("fewer than 10 repairs")
		}
		return nil
	})
	r1.kill()
	before := done()
	if before >= n {
		t.Fatalf("the repairer finished all %d before it was killed: the kill was not mid-run", n)
	}
	// No half repair: a session either has its whole plan or none of it.
	rpParallel(t, ids, func(id string) error {
		cnt, st, err := e.repairs(id)
		if err != nil {
			return err
		}
		switch {
		case cnt == 0 && st.LastSeq == 4:
		case cnt == 1 && st.Paused && !st.HasOpenWork() && st.LastSeq == 8:
		default:
			return fmt.Errorf("%s after the kill: %d repairs, seq %d, paused %v, open %v", id, cnt, st.LastSeq, st.Paused, st.OpenWork())
		}
		return nil
	})
	t.Logf("killed after %d of %d repairs", before, n)

	r2 := rpSpawn(t, append(args[:len(args)-2], "-concurrency", "32")...)
	r2.waitLine(t, "READY", 30*time.Second)
	natstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		if c := done(); c < n {
			return fmt.Errorf("%d of %d repaired", c, n)
		}
		return nil
	})
	rpParallel(t, ids, func(id string) error {
		cnt, st, err := e.repairs(id)
		if err != nil {
			return err
		}
		if cnt != 1 || !st.Paused || st.HasOpenWork() {
			return fmt.Errorf("%s: %d repairs, paused %v", id, cnt, st.Paused)
		}
		return nil
	})
}

// TestRepairReplicaProcesses: three repairer processes race over 200
// orphans; every session is repaired exactly once. On one stream, and on
// three partitions of an R3 cluster.
func TestRepairReplicaProcesses(t *testing.T) {
	natstest.ForEachLayout(t, testRepairReplicaProcesses, rpLayouts...)
}

func testRepairReplicaProcesses(t *testing.T, l natstest.Layout) {
	e := rpStartLayout(t, l)
	for i := 0; i < 3; i++ {
		r := rpSpawn(t, "repairer", "-nats-url", e.url, "-replicas", strconv.Itoa(e.replicas), "-ttl", rpTTL.String(), "-grace", rpGrace.String(), "-sweep", "300ms")
		r.waitLine(t, "READY", 30*time.Second)
	}
	const n = 200
	ids := e.seedOrphans("race", n)
	natstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		for _, id := range ids {
			tail, err := e.store.Tail(context.Background(), id)
			if err != nil {
				return err
			}
			if tail.Seq <= 4 {
				return fmt.Errorf("%s not repaired", id)
			}
		}
		return nil
	})
	// Let late sweeps and retries of every replica run out.
	time.Sleep(time.Second)
	rpParallel(t, ids, func(id string) error {
		cnt, st, err := e.repairs(id)
		if err != nil {
			return err
		}
		if cnt != 1 || st.LastSeq != 8 {
			return fmt.Errorf("%s: %d repairs, last seq %d", id, cnt, st.LastSeq)
		}
		return nil
	})
}

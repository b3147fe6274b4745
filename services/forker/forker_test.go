package forker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// basic is a parent whose safe points are 1 2 7 9 and that ends inside an
// open turn.
var basic = []string{
	"session/created title=parent agent=a1 labels={\"team\":\"x\"}", // 1
	"message/user content=\"hello\"",                                // 2
	"turn/started turn=t1",                                          // 3
	"attempt/started turn=t1 attempt=a1",                            // 4
	"message/assistant turn=t1 attempt=a1 content=\"hi-there\"",     // 5
	"message/user turn=t1 content=\"more\"",                         // 6
	"turn/ended turn=t1",                                            // 7
	"turn/started turn=t2",                                          // 8
	"turn/ended turn=t2 reason=interrupted",                         // 9
	"turn/started turn=t3",                                          // 10
	"tool/requested turn=t3 call=c1",                                // 11
}

// TestForkCuts forks at each kind of cut, on one stream and on three
// partitions (one node and an R3 cluster), where parent p (partition 2)
// and its children c-default and c-one (partition 1) live in different
// streams, led by different nodes on the cluster.
func TestForkCuts(t *testing.T) { natstest.ForEachLayout(t, testForkCuts) }

func testForkCuts(t *testing.T, l natstest.Layout) {
	e := newEnvLayout(t, l, nil)
	e.appendLines("p", basic...)
	parent, _ := e.st.Locate("p")
	elsewhere := 0
	before := e.snapshot("p")
	for _, tc := range []struct {
		name  string
		at    *At
		child string
		want  uint64
	}{
		{"Default", nil, "c-default", 9},
		{"Seq", &At{Seq: seqp(7)}, "c-seq", 7},
		{"SeqOne", &At{Seq: seqp(1)}, "c-one", 1},
		{"Turn", &At{TurnID: "t1"}, "c-turn", 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.mustFork(Request{ParentID: "p", At: tc.at, ChildID: tc.child})
			if r != (Reply{ChildID: tc.child, ParentID: "p", SeedLength: tc.want, Depth: 1}) {
				t.Fatalf("reply %+v", r)
			}
			cev := e.checkChild(tc.child, "p", tc.want, 1)
			var d schema.SessionCreated
			_ = cev[0].DecodeData(&d)
			if d.Title != "parent" || d.Agent != "a1" || d.Labels["team"] != "x" || d.Workspace != schema.WorkspaceShared {
				t.Fatalf("child created data %s", cev[0].Data)
			}
			e.noRecord(tc.child)
			if loc, _ := e.st.Locate(tc.child); loc.Stream != parent.Stream {
				elsewhere++
			}
		})
	}
	if l.Partitions > 1 && elsewhere == 0 {
		t.Fatalf("no child landed in another partition than its parent's %s", parent.Stream)
	}
	if l.Nodes > 1 {
		// The copy crossed nodes: the streams of parent and children had
		// different leaders (the store spreads them when it provisions).
		leaders, err := e.st.PartitionLeaders(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		child, _ := e.st.Locate("c-default")
		if leaders[child.Stream] == leaders[parent.Stream] {
			t.Fatalf("parent's %s and child's %s both led by %q: %v", parent.Stream, child.Stream, leaders[parent.Stream], leaders)
		}
	}
	if after := e.snapshot("p"); after != before {
		t.Fatalf("the parent changed:\n%s\nwant\n%s", after, before)
	}
}

func TestForkDefaultChildIDAndWorkspace(t *testing.T) {
	e := newEnv(t, nil)
	e.appendLines("p", basic[:3]...)
	r := e.mustFork(Request{ParentID: "p", Workspace: schema.WorkspaceIsolated})
	if !schema.ValidSessionID(r.ChildID) || r.ChildID == "p" || r.SeedLength != 2 {
		t.Fatalf("reply %+v", r)
	}
	cev := e.checkChild(r.ChildID, "p", 2, 1)
	var d schema.SessionCreated
	_ = cev[0].DecodeData(&d)
	if d.Workspace != schema.WorkspaceIsolated {
		t.Fatalf("workspace %q", d.Workspace)
	}
}

// Every kind of open item makes the seqs inside it unsafe; the refusal
// names the nearest safe seqs, and nothing is written.
func TestForkUnsafeCuts(t *testing.T) {
	e := newEnv(t, nil)
	e.appendLines("p",
		"session/created",                                  // 1 safe
		"turn/started turn=t1",                             // 2 turn
		"step/started turn=t1 step=s1",                     // 3 step
		"attempt/started turn=t1 attempt=a1",               // 4 attempt
		"message/assistant turn=t1 attempt=a1",             // 5 step
		"tool/requested turn=t1 call=c1",                   // 6 tool requested
		"tool/started turn=t1 call=c1",                     // 7 tool started
		"tool/result turn=t1 call=c1",                      // 8 step
		"approval/requested turn=t1 approvalId=p1",         // 9 approval
		"approval/decided turn=t1 approvalId=p1",           // 10 step
		"step/ended turn=t1 step=s1",                       // 11 turn
		"turn/ended turn=t1",                               // 12 safe
		"compaction/started compactionId=k1 throughSeq=11", // 13 compaction
		"compaction/ended compactionId=k1 throughSeq=11",   // 14 safe
		"job/started jobId=j1",                             // 15 job
		"job/ended jobId=j1",                               // 16 safe
		"turn/started turn=t2",                             // 17 open turn
	)
	for _, tc := range []struct {
		what          string
		seq           uint64
		before, after uint64 // 0: none
	}{
		{"OpenTurn", 2, 1, 12},
		{"Step", 3, 1, 12},
		{"Attempt", 4, 1, 12},
		{"ToolRequested", 6, 1, 12},
		{"ToolStarted", 7, 1, 12},
		{"Approval", 9, 1, 12},
		{"Compaction", 13, 12, 14},
		{"Job", 15, 14, 16},
		{"OpenTurnAtTail", 17, 16, 0},
	} {
		t.Run(tc.what, func(t *testing.T) {
			child := "c-" + strings.ToLower(tc.what)
			_, err := e.fork(Request{ParentID: "p", At: &At{Seq: seqp(tc.seq)}, ChildID: child})
			se := wantCode(t, err, schema.CodeUnsafeCut)
			if se.NearestSafeBefore == nil || *se.NearestSafeBefore != tc.before {
				t.Fatalf("nearestSafeBefore %s, want %d", seqOrNone(se.NearestSafeBefore), tc.before)
			}
			if tc.after == 0 && se.NearestSafeAfter != nil || tc.after != 0 && (se.NearestSafeAfter == nil || *se.NearestSafeAfter != tc.after) {
				t.Fatalf("nearestSafeAfter %s, want %d", seqOrNone(se.NearestSafeAfter), tc.after)
			}
			e.noChild(child)
		})
	}
	t.Run("OpenTurnByID", func(t *testing.T) {
		_, err := e.fork(Request{ParentID: "p", At: &At{TurnID: "t2"}, ChildID: "c-t2"})
		se := wantCode(t, err, schema.CodeUnsafeCut)
		if se.NearestSafeBefore == nil || *se.NearestSafeBefore != 16 || se.NearestSafeAfter != nil {
			t.Fatalf("nearest %s/%s", seqOrNone(se.NearestSafeBefore), seqOrNone(se.NearestSafeAfter))
		}
		e.noChild("c-t2")
	})
	// The error body on the wire carries the nearest seqs and the micro
	// error headers carry the code.
	t.Run("Wire", func(t *testing.T) {
		b, _ := json.Marshal(Request{ParentID: "p", At: &At{Seq: seqp(7)}, ChildID: "c-wire"})
		m, err := e.nc.Request(logstore.SubjectFork, b, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(micro.ErrorCodeHeader) != "unsafe_cut" || m.Header.Get(micro.ErrorHeader) == "" {
			t.Fatalf("headers %v", m.Header)
		}
		var body map[string]map[string]any
		if err := json.Unmarshal(m.Data, &body); err != nil {
			t.Fatal(err)
		}
		if body["error"]["code"] != "unsafe_cut" || body["error"]["nearestSafeBefore"] != 1.0 || body["error"]["nearestSafeAfter"] != 12.0 {
			t.Fatalf("body %s", m.Data)
		}
	})
}

func seqOrNone(p *uint64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

func TestForkRefusals(t *testing.T) {
	e := newEnv(t, nil)
	e.appendLines("p", basic...)
	e.appendLines("taken", "session/created", "message/user")
	before := e.snapshot("taken")
	t.Run("NotFound", func(t *testing.T) {
		_, err := e.fork(Request{ParentID: "nobody", ChildID: "c-nf"})
		wantCode(t, err, schema.CodeNotFound)
		e.noChild("c-nf")
	})
	t.Run("ChildTaken", func(t *testing.T) {
		_, err := e.fork(Request{ParentID: "p", ChildID: "taken"})
		se := wantCode(t, err, schema.CodeConflict)
		if se.CurrentSeq == nil || *se.CurrentSeq != 2 {
			t.Fatalf("currentSeq %v", se.CurrentSeq)
		}
		if e.snapshot("taken") != before {
			t.Fatal("the taken session changed")
		}
		e.noRecord("taken")
	})
	for _, tc := range []struct {
		name string
		body string
	}{
		{"NotJSON", `{"parentId":`},
		{"UnknownField", `{"parentId":"p","bogus":1}`},
		{"NoParent", `{}`},
		{"BadParentID", `{"parentId":"a.b"}`},
		{"BadChildID", `{"parentId":"p","childId":"x y"}`},
		{"ChildIsParent", `{"parentId":"p","childId":"p"}`},
		{"BadWorkspace", `{"parentId":"p","childId":"c-bw","workspace":"copied"}`},
		{"SeqAndTurn", `{"parentId":"p","childId":"c-st","at":{"seq":7,"turnId":"t1"}}`},
		{"SeqZero", `{"parentId":"p","childId":"c-sz","at":{"seq":0}}`},
		{"SeqBeyondTail", `{"parentId":"p","childId":"c-sb","at":{"seq":12}}`},
		{"UnknownTurn", `{"parentId":"p","childId":"c-ut","at":{"turnId":"t9"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := e.nc.Request(logstore.SubjectFork, []byte(tc.body), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var eb api.ErrorBody
			if err := json.Unmarshal(m.Data, &eb); err != nil {
				t.Fatalf("reply %s: %v", m.Data, err)
			}
			if eb.Error.Code != schema.CodeBadRequest {
				t.Fatalf("got %s, want code %s", m.Data, schema.CodeBadRequest)
			}
			if m.Header.Get(micro.ErrorCodeHeader) != "bad_request" {
				t.Fatalf("headers %v", m.Header)
			}
		})
	}
	for _, c := range []string{"c-bw", "c-st", "c-sz", "c-sb", "c-ut"} {
		e.noChild(c)
	}
}

// A child being copied refuses to be forked, and so does a closed session
// at its close; a closed session forks before it.
func TestForkForkingAndClosedParents(t *testing.T) {
	e := newEnv(t, nil)
	e.appendLines("half",
		`session/created synthetic parent={"sessionId":"x","seedLength":5,"depth":1}`,
		"message/user synthetic")
	_, err := e.fork(Request{ParentID: "half", ChildID: "c-half"})
	wantCode(t, err, schema.CodeForking)
	e.noChild("c-half")

	e.appendLines("done", "session/created", "message/user", "session/closed reason=finished")
	_, err = e.fork(Request{ParentID: "done", ChildID: "c-done", At: &At{Seq: seqp(3)}})
	se := wantCode(t, err, schema.CodeUnsafeCut)
	if se.NearestSafeBefore == nil || *se.NearestSafeBefore != 2 || !strings.Contains(se.Message, "closed") {
		t.Fatalf("%v", se)
	}
	r := e.mustFork(Request{ParentID: "done", ChildID: "c-done"})
	if r.SeedLength != 2 {
		t.Fatalf("reply %+v", r)
	}
	e.checkChild("c-done", "done", 2, 1)
}

// A fork of a fork: the grandchild's prefix holds the child's own
// fork/committed, which does not end the grandchild's copy; only its own
// does. Lineage depth counts up.
func TestForkOfFork(t *testing.T) {
	e := newEnv(t, nil)
	e.appendLines("p", basic...)
	e.mustFork(Request{ParentID: "p", ChildID: "c", At: &At{Seq: seqp(7)}})
	// The child goes on: its own turn after the fork.
	e.appendLines("c", "message/user", "turn/started turn=t9", "turn/ended turn=t9")
	r := e.mustFork(Request{ParentID: "c", ChildID: "g"})
	if r != (Reply{ChildID: "g", ParentID: "c", SeedLength: 11, Depth: 2}) {
		t.Fatalf("reply %+v", r)
	}
	gev := e.checkChild("g", "c", 11, 2)
	if gev[7].Type != schema.TypeForkCommitted || !gev[7].Synthetic {
		t.Fatalf("grandchild seq 8 = %s, want the child's fork/committed", gev[7].Type)
	}
	// Folding the grandchild up to the copied fork/committed leaves it forking.
	s := session.New("g")
	for _, x := range gev[:11] {
		if err := s.Apply(&x.Envelope); err != nil {
			t.Fatal(err)
		}
	}
	if !s.Forking {
		t.Fatal("the copied fork/committed ended the grandchild's copy")
	}
	// Its children are at depth 3.
	r = e.mustFork(Request{ParentID: "g", ChildID: "gg"})
	if r.Depth != 3 || r.SeedLength != 12 {
		t.Fatalf("reply %+v", r)
	}
	e.checkChild("gg", "g", 12, 3)
}

// A fork of a repaired session: the copied prefix ends paused, the child
// still commits, and stays paused until resumed.
func TestForkOfRepairedSession(t *testing.T) {
	e := newEnv(t, nil)
	e.appendLines("p",
		"session/created",
		"turn/started turn=t1",
		"attempt/started turn=t1 attempt=a1",
		"tool/requested turn=t1 call=c1",
		"tool/started turn=t1 call=c1",
		"approval/requested turn=t1 approvalId=ap1",
		"job/started jobId=j1",
	)
	st := e.state("p")
	plan := session.PlanRepair(st, session.RepairOptions{Now: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)})
	if len(plan) == 0 {
		t.Fatal("no repair plan")
	}
	e.appendEvents("p", plan)
	if ps := e.state("p"); !ps.Paused || ps.HasOpenWork() {
		t.Fatalf("repaired parent paused=%v open=%v", ps.Paused, ps.HasOpenWork())
	}
	r := e.mustFork(Request{ParentID: "p", ChildID: "c"})
	k := uint64(7 + len(plan))
	if r.SeedLength != k {
		t.Fatalf("seedLength %d, want %d", r.SeedLength, k)
	}
	e.checkChild("c", "p", k, 1)
	cs := e.state("c")
	if !cs.Paused || cs.Forking {
		t.Fatalf("child paused=%v forking=%v", cs.Paused, cs.Forking)
	}
	// The child's agent resumes it like any paused session.
	if err := cs.Check(&schema.Envelope{Type: schema.TypeTurnStarted, TurnID: "t2"}); schema.CodeOf(err) != schema.CodePaused {
		t.Fatalf("turn on the paused child: %v", err)
	}
	e.appendLines("c", "session/resumed by=alice", "turn/started turn=t2")
}

// modelContext is the model-visible transcript at the end of evs:
// compaction applied (the last ended compaction's summary, then the
// conversation events after its throughSeq).
func modelContext(evs []logstore.Event) []string {
	var summary string
	var through uint64
	for _, x := range evs {
		if x.Type == schema.TypeCompactionEnded {
			var d schema.CompactionEnded
			_ = x.DecodeData(&d)
			summary, through = d.Summary, d.ThroughSeq
		}
	}
	var out []string
	if summary != "" {
		out = append(out, "summary: "+summary)
	}
	for _, x := range evs {
		if x.Seq <= through {
			continue
		}
		switch x.Type {
		case schema.TypeMessageUser, schema.TypeMessageAssistant, schema.TypeToolRequested, schema.TypeToolResult:
			out = append(out, fmt.Sprintf("%s %s", x.Type, x.Data))
		}
	}
	return out
}

func TestForkWithCompaction(t *testing.T) {
	e := newEnv(t, nil)
	e.appendLines("p",
		"session/created",
		"message/user content=\"one\"",
		"turn/started turn=t1",
		"attempt/started turn=t1 attempt=a1",
		"message/assistant turn=t1 attempt=a1 content=\"two\"",
		"turn/ended turn=t1",
		"compaction/started compactionId=k1 throughSeq=5",
		"compaction/ended compactionId=k1 throughSeq=5 summary=\"one-two\"",
		"message/user content=\"three\"",
		"compaction/started compactionId=k2 throughSeq=9",
		"compaction/aborted compactionId=k2",
		"message/user content=\"four\"",
		"compaction/started compactionId=k3 throughSeq=12",
	)
	// The default cut stops before the open compaction.
	r := e.mustFork(Request{ParentID: "p", ChildID: "c"})
	if r.SeedLength != 12 {
		t.Fatalf("seedLength %d", r.SeedLength)
	}
	cev := e.checkChild("c", "p", 12, 1)
	pev := e.events("p")[:12]
	want, got := modelContext(pev), modelContext(cev[:12])
	if fmt.Sprint(want) != fmt.Sprint(got) || len(want) != 3 || want[0] != "summary: one-two" {
		t.Fatalf("child context %q, parent's at the cut %q", got, want)
	}
	if cs := e.state("c"); cs.Compacted == nil || cs.Compacted.ID != "k1" || cs.Compacted.ThroughSeq != 5 {
		t.Fatalf("child compacted %+v", cs.Compacted)
	}
	_, err := e.fork(Request{ParentID: "p", ChildID: "c2", At: &At{Seq: seqp(13)}})
	wantCode(t, err, schema.CodeUnsafeCut)
}

// After the fork, parent and child are separate sessions: each takes its
// own next seq, and neither sees the other's events.
func TestForkIndependentAppends(t *testing.T) {
	e := newEnv(t, nil)
	e.appendLines("p", basic[:9]...)
	e.mustFork(Request{ParentID: "p", ChildID: "c"})
	pBefore := e.events("p")
	e.appendLines("p", "turn/started turn=t4", "turn/ended turn=t4")
	e.appendLines("c", "turn/started turn=t4", "message/user turn=t4 content=\"child-only\"", "turn/ended turn=t4")
	pev, cev := e.events("p"), e.events("c")
	if len(pev) != 11 || len(cev) != 13 {
		t.Fatalf("parent %d events, child %d", len(pev), len(cev))
	}
	for i := range pBefore {
		if pev[i].StreamSeq != pBefore[i].StreamSeq || pev[i].EventID != pBefore[i].EventID {
			t.Fatalf("parent seq %d changed", i+1)
		}
	}
	if cev[11].Data == nil || !strings.Contains(string(cev[11].Data), "child-only") || strings.Contains(e.snapshot("p"), "child-only") {
		t.Fatal("appends crossed over")
	}
}

// Asking for the same fork again answers it again without writing; a
// different fork into the same child id is a conflict. Two forks racing for
// one child id: exactly one wins. On every layout.
func TestForkRetryAndRace(t *testing.T) { natstest.ForEachLayout(t, testForkRetryAndRace) }

func testForkRetryAndRace(t *testing.T, l natstest.Layout) {
	e := newEnvLayout(t, l, nil)
	e.appendLines("p", basic...)
	e.appendLines("q", basic[:7]...)
	r1 := e.mustFork(Request{ParentID: "p", ChildID: "c", At: &At{Seq: seqp(7)}})
	snap := e.snapshot("c")
	r2 := e.mustFork(Request{ParentID: "p", ChildID: "c", At: &At{Seq: seqp(7)}})
	if r1 != r2 || e.snapshot("c") != snap {
		t.Fatalf("retry %+v vs %+v, or the child changed", r2, r1)
	}
	_, err := e.fork(Request{ParentID: "p", ChildID: "c", At: &At{Seq: seqp(2)}})
	wantCode(t, err, schema.CodeConflict)
	if e.snapshot("c") != snap {
		t.Fatal("the child changed")
	}

	for round := range 5 {
		child := fmt.Sprintf("race%d", round)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, parent := range []string{"p", "q"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = e.fork(Request{ParentID: parent, ChildID: child, At: &At{Seq: seqp(7)}})
			}()
		}
		wg.Wait()
		wins := 0
		for _, err := range errs {
			if err == nil {
				wins++
			} else if schema.CodeOf(err) != schema.CodeConflict {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d forks won (%v)", round, wins, errs)
		}
		s := e.state(child)
		if s.Forking || s.Meta.Parent == nil {
			t.Fatalf("round %d: child forking=%v", round, s.Forking)
		}
		e.checkChild(child, s.Meta.Parent.SessionID, 7, 1)
		e.noRecord(child)
	}
}

// A long prefix goes in batches, copied from the bodies the scan kept, or,
// past the budget for them, read again: the same child either way.
func TestForkLongPrefix(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget int
	}{{"kept", 0}, {"none-kept", -1}, {"budget-exceeded", 100_000}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.BatchSize = 300; c.ScanBodyBudget = tc.budget })
			if _, err := gen.Seed(e.ctx, e.st, "long", 1500, 1000); err != nil {
				t.Fatal(err)
			}
			r := e.mustFork(Request{ParentID: "long", ChildID: "c"})
			if r.SeedLength != 1500 {
				t.Fatalf("reply %+v", r)
			}
			e.checkChild("c", "long", 1500, 1)
		})
	}
}

// partialCopy writes what a forker that crashed after n copied events
// leaves: the record (renewed long ago) and seqs 1..n of the child.
func (e *env) partialCopy(parent, child string, k uint64, n int) *plan {
	e.t.Helper()
	p, err := leaveCopy(e.ctx, e.svc, e.st, parent, child, k, n, time.Now().Add(-time.Hour))
	if err != nil {
		e.t.Fatal(err)
	}
	if s := e.state(child); !s.Forking {
		e.t.Fatal("partial child is not forking")
	}
	return p
}

// leaveCopy writes to l what a forker that crashed after n copied events
// of a fork of parent's k leaves: its record, last renewed at heartbeat,
// and seqs 1..n of the child (none: only the record).
func leaveCopy(ctx context.Context, svc *Service, l Log, parent, child string, k uint64, n int, heartbeat time.Time) (*plan, error) {
	at := heartbeat.UTC()
	p := &plan{ChildID: child, ParentID: parent, SeedLength: k, Depth: 1, Workspace: schema.WorkspaceShared,
		OpID: opID(child, parent, k, schema.WorkspaceShared), StartedAt: at, HeartbeatAt: at, Owner: "dead"}
	b, _ := json.Marshal(p)
	if err := svc.bucket().Create(ctx, child, b); err != nil {
		return nil, err
	}
	if n == 0 {
		return p, nil
	}
	var pev []schema.Envelope
	if _, err := l.ReadJudged(ctx, &logstore.Judge{SessionID: parent}, func(_ *logstore.Msg, ev *schema.Envelope) error {
		pev = append(pev, *ev)
		return nil
	}); err != nil {
		return nil, err
	}
	created, err := svc.created(p, &pev[0])
	if err != nil {
		return nil, err
	}
	evs := []schema.Envelope{created}
	for _, c := range pev[1:n] {
		c.SessionID, c.EventID, c.Synthetic = child, p.eventID(c.Seq), true
		evs = append(evs, c)
	}
	_, err = l.Append(ctx, logstore.AppendRequest{SessionID: child, Events: evs})
	return p, err
}

// A sweep finishes a copy whose forker is gone, reading the parent again
// from where the child ends; a copy someone else wrote into is abandoned,
// never made usable.
func TestSweepFinishesOrAbandons(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SweepEvery = time.Hour })
	e.appendLines("p", basic...)
	before := e.snapshot("p")

	e.partialCopy("p", "half", 9, 4)
	// A fresh record is a copy in flight elsewhere: left alone.
	e.partialCopy("p", "fresh", 9, 3)
	fresh, _, _ := e.svc.bucket().Get(e.ctx, "fresh")
	var fp plan
	_ = json.Unmarshal(fresh.Value, &fp)
	fp.HeartbeatAt = time.Now().UTC()
	b, _ := json.Marshal(fp)
	if err := e.svc.bucket().Put(e.ctx, "fresh", b); err != nil {
		t.Fatal(err)
	}
	// A copy with an event the forker did not write (say, a repair).
	e.partialCopy("p", "spoiled", 9, 3)
	e.appendLines("spoiled", `repair/applied synthetic reason=x closed=[]`)
	// A record whose child was never written, and one whose child id
	// holds another session.
	p := &plan{ChildID: "unwritten", ParentID: "p", SeedLength: 7, Depth: 1, Workspace: "shared", OpID: opID("unwritten", "p", 7, "shared")}
	b, _ = json.Marshal(p)
	if err := e.svc.bucket().Create(e.ctx, "unwritten", b); err != nil {
		t.Fatal(err)
	}
	e.appendLines("other", "session/created")
	p = &plan{ChildID: "other", ParentID: "p", SeedLength: 7, Depth: 1, Workspace: "shared", OpID: opID("other", "p", 7, "shared")}
	b, _ = json.Marshal(p)
	if err := e.svc.bucket().Create(e.ctx, "other", b); err != nil {
		t.Fatal(err)
	}
	otherBefore := e.snapshot("other")

	// The child being copied refuses agent appends meanwhile.
	if err := e.state("half").Check(&schema.Envelope{Type: schema.TypeMessageUser, Data: []byte(`{"content":"x"}`)}); schema.CodeOf(err) != schema.CodeForking {
		t.Fatalf("append to a half-copied child: %v", err)
	}
	if err := e.svc.Sweep(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.checkChild("half", "p", 9, 1)
	e.noRecord("half")
	// The never-written child is written whole: the request that made the
	// record may have been answered outcome unknown.
	e.checkChild("unwritten", "p", 7, 1)
	e.noRecord("unwritten")
	if s := e.state("spoiled"); !s.Closed || s.CloseReason != AbandonReason || s.ForkCommittedSeq != 0 {
		t.Fatalf("spoiled child closed=%v (%s) committed@%d", s.Closed, s.CloseReason, s.ForkCommittedSeq)
	}
	e.noRecord("spoiled")
	if s := e.state("fresh"); !s.Forking || s.LastSeq != 3 {
		t.Fatalf("fresh copy touched: forking=%v last=%d", s.Forking, s.LastSeq)
	}
	if _, ok, err := e.svc.bucket().Get(e.ctx, "fresh"); err != nil || !ok {
		t.Fatal("fresh record dropped")
	}
	if e.snapshot("other") != otherBefore {
		t.Fatal("a session that was not the fork's was written to")
	}
	e.noRecord("other")
	if e.snapshot("p") != before {
		t.Fatal("the parent changed")
	}
}

// A forker that stops in the middle of a copy leaves it to the next one:
// the record stays, and a forker started later finishes the child.
func TestForkerStopMidCopyThenRestart(t *testing.T) {
	// This forker only sweeps when the test says so.
	e := newEnv(t, func(c *Config) { c.BatchSize = 50; c.StaleAfter = 300 * time.Millisecond; c.SweepEvery = time.Hour })
	if _, err := gen.Seed(e.ctx, e.st, "long", 3000, 1000); err != nil {
		t.Fatal(err)
	}
	// A forker of its own that stops as soon as its first batches landed.
	nc2 := natstest.Connect(t, e.srv)
	st2, err := logstore.Open(e.ctx, nc2, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	svc2, err := New(Config{Store: st2, Conn: nc2, BatchSize: 50, StaleAfter: 300 * time.Millisecond, SweepEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, stop2 := context.WithCancel(e.ctx)
	done2 := make(chan error, 1)
	go func() { done2 <- svc2.Run(ctx2) }()
	natstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, svc2.Ready)
	forkErr := make(chan error, 1)
	go func() {
		_, err := svc2.Fork(ctx2, Request{ParentID: "long", ChildID: "c"})
		forkErr <- err
	}()
	natstest.CheckFor(t, 30*time.Second, time.Millisecond, func() error {
		tail, err := e.st.Tail(e.ctx, "c")
		if err != nil || tail.Seq < 200 {
			return fmt.Errorf("child at %d (%v)", tail.Seq, err)
		}
		return nil
	})
	stop2()
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
	if err := <-forkErr; err == nil {
		t.Fatal("the copy finished before the forker stopped; the test proves nothing")
	}
	if s := e.state("c"); !s.Forking {
		t.Fatal("half-copied child is usable")
	}
	// The first forker's sweep takes over once the record is stale.
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if err := e.svc.Sweep(e.ctx); err != nil {
			return err
		}
		if s := e.state("c"); s.Forking {
			return fmt.Errorf("child still forking at %d", s.LastSeq)
		}
		return nil
	})
	e.checkChild("c", "long", 3000, 1)
	e.noRecord("c")
}

// benchForker runs a forker on an embedded server for a benchmark, with
// a parent "parent" of n events.
func benchForker(b *testing.B, n int) (context.Context, *nats.Conn, *logstore.Store, *Service) {
	srv := natstest.RunServer(b)
	nc := natstest.Connect(b, srv)
	ctx := context.Background()
	st, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := New(Config{Store: st, Conn: nc})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
	b.Cleanup(func() { cancel(); <-done })
	natstest.CheckFor(b, 10*time.Second, 10*time.Millisecond, svc.Ready)
	if _, err := gen.Seed(ctx, st, "parent", n, 1000); err != nil {
		b.Fatal(err)
	}
	return ctx, nc, st, svc
}

// BenchmarkFork1000 forks a 1,000-event parent per iteration through the
// endpoint (the bench command compares against the raw floor).
func BenchmarkFork1000(b *testing.B) {
	ctx, nc, _, _ := benchForker(b, 1000)
	cl := client.New(nc)
	b.ResetTimer()
	for i := range b.N {
		if _, err := cl.Fork(ctx, Request{ParentID: "parent", ChildID: fmt.Sprintf("c%d", i)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "µs/event")
}

// BenchmarkScan10000 splits a fork's scan of a 10,000-event parent into
// its parts: the read alone, the read with the bodies decoded (in
// chunks, as a scan does, and one message at a time), and the whole scan
// (judged, folded into the safe points).
func BenchmarkScan10000(b *testing.B) {
	const n = 10_000
	ctx, _, st, svc := benchForker(b, n)
	perEvent := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/n, "µs/event")
	}
	b.Run("read", func(b *testing.B) {
		for range b.N {
			if _, err := st.ReadSession(ctx, "parent", 0, func(*logstore.Msg) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
		perEvent(b)
	})
	b.Run("decoded", func(b *testing.B) {
		for range b.N {
			if _, err := readDecoded(ctx, st, "parent", logstore.Tail{}, func(*logstore.Msg, schema.Envelope, bool, error) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
		perEvent(b)
	})
	b.Run("decoded-per-message", func(b *testing.B) {
		for range b.N {
			if _, err := readDecodedBy(ctx, st, "parent", logstore.Tail{}, nil, 1, func(*logstore.Msg, schema.Envelope, bool, error) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
		perEvent(b)
	})
	b.Run("scan", func(b *testing.B) {
		for range b.N {
			if _, err := svc.scanFrom(ctx, api.Caller{}, "parent", session.Cut{}, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
		perEvent(b)
	})
}

// The forker serves on the connection it is given, never one taken from
// the store: without it, New refuses.
func TestNewNeedsConn(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := New(Config{Store: e.st}); err == nil {
		t.Fatal("New without Conn succeeded")
	}
	if _, err := New(Config{Store: e.st, Conn: e.nc}); err != nil {
		t.Fatal(err)
	}
}

// A sweep taking over a copy whose child or parent was erased since its
// forker stopped copies nothing more and securely deletes the record
// (ADR 009, "Forks in flight"): the eraser, which did not wait for a stale
// record, deletes what the copy wrote.
func TestSweepDropsCopiesOfErasedSessions(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SweepEvery = time.Hour })
	e.appendLines("p", basic...)
	e.appendLines("q", basic...)
	e.partialCopy("p", "erased-child", 9, 3)
	e.partialCopy("q", "erased-parent", 9, 3)
	for _, id := range []string{"erased-child", "q"} {
		if _, _, err := e.st.MarkErased(e.ctx, logstore.Erasure{SessionID: id, By: "b", Reason: "r", Phase: logstore.ErasePhaseDeleting}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.svc.Sweep(e.ctx); err != nil {
		t.Fatal(err)
	}
	for _, child := range []string{"erased-child", "erased-parent"} {
		e.noRecord(child)
		if tail, err := e.st.Tail(e.ctx, child); err != nil || tail.Seq != 3 {
			t.Errorf("%s: tail %+v, %v; want the 3 events the copy had written", child, tail, err)
		}
		if f, ok, err := e.st.ForkInFlightOf(e.ctx, child); err != nil || ok {
			t.Errorf("%s: record left %+v, %v", child, f, err)
		}
	}
}

// A sealed fork record (DESIGN.md section 2) whose child's key an erase
// destroyed reads as erased: a sweep drops it and goes on, where it
// failed on it at every sweep until the eraser dropped it.
func TestSweepDropsSealedRecordWithoutKey(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SweepEvery = time.Hour })
	sealing, err := logstore.Open(e.ctx, e.nc, logstore.Config{SealBodies: true})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := sealing.OpenForkRecords(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(plan{ChildID: "gone", ParentID: "p", OpID: "op", HeartbeatAt: time.Now().Add(-time.Hour)})
	if err := recs.Create(e.ctx, "gone", b); err != nil {
		t.Fatal(err)
	}
	js := natstest.JetStream(t, e.nc)
	keys, err := js.KeyValue(e.ctx, logstore.KeysBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Purge(e.ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Sweep(e.ctx); err != nil {
		t.Fatal(err)
	}
	forks, err := js.KeyValue(e.ctx, logstore.ForkBucket)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := forks.Get(e.ctx, "gone"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the record is left: %q %v", v, err)
	}
}

// A session stored under the child id after the fork found it empty and
// wrote its record (here: once the erasure records are read, just before
// the copy) is not written over: the copy's first batch, expecting no
// message on the child's subject, is refused, and the fork answers the id
// taken, as it does for a session found there before.
func TestForkChildTakenAfterClaim(t *testing.T) {
	var e *env
	e = newEnv(t, func(c *Config) {
		c.Step = func(step string) {
			if step == StepChecked {
				e.appendLines("late", "session/created", "message/user")
			}
		}
	})
	e.appendLines("p", basic...)
	_, err := e.fork(Request{ParentID: "p", ChildID: "late"})
	wantCode(t, err, schema.CodeConflict)
	evs := e.events("late")
	if len(evs) != 2 || evs[0].Synthetic || evs[1].Synthetic {
		t.Fatalf("child id holds %d events, want the 2 of the session stored there: %+v", len(evs), evs)
	}
	e.noRecord("late")
}

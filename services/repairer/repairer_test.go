package repairer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

const (
	testTTL   = time.Second
	testGrace = 300 * time.Millisecond
	// liveness bounds a wait for something that must happen: long enough
	// for a loaded machine, so a failure means it did not happen.
	liveness = 30 * time.Second
)

type env struct {
	t     *testing.T
	nc    *nats.Conn
	store *logstore.Store
	url   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvLayout(t, natstest.Layout{Partitions: 1, Nodes: 1})
}

// newEnvLayout is newEnv on the servers of layout l: a store of its
// partitions with a replica on each of its nodes, every stream led and
// current before the test starts.
func newEnvLayout(t *testing.T, l natstest.Layout) *env {
	t.Helper()
	d := natstest.RunLayout(t, l)
	nc := d.Connect()
	st, err := logstore.Open(context.Background(), nc, logstore.Config{LeaseTTL: testTTL, Partitions: l.Partitions, Replicas: l.Replicas()})
	if err != nil {
		t.Fatal(err)
	}
	d.WaitLeaders(nc)
	return &env{t: t, nc: nc, store: st, url: d.URL}
}

type running struct {
	svc    *Service
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
}

func (e *env) start(cfg Config) *running {
	e.t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Store, cfg.Registerer = e.store, reg
	if cfg.Conn == nil {
		cfg.Conn = e.nc
	}
	if cfg.Logger == nil && testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	svc, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{svc: svc, reg: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- svc.Run(ctx) }()
	e.t.Cleanup(r.stop)
	natstest.CheckFor(e.t, 10*time.Second, 10*time.Millisecond, svc.Ready)
	return r
}

func (r *running) stop() {
	r.cancel()
	<-r.done
	r.done <- nil // idempotent for Cleanup
}

// appendEvents stores agent events after the session's tail, as the
// writer would.
func (e *env) appendEvents(id string, lines ...string) logstore.AppendResult {
	e.t.Helper()
	res, err := e.tryAppend(id, lines...)
	if err != nil {
		e.t.Fatalf("append %s: %v", id, err)
	}
	return res
}

var evCounter sync.Map

func (e *env) tryAppend(id string, lines ...string) (logstore.AppendResult, error) {
	ctx := context.Background()
	tail, err := e.store.Tail(ctx, id)
	if err != nil {
		return logstore.AppendResult{}, err
	}
	evs := make([]schema.Envelope, len(lines))
	for i, l := range lines {
		var ev schema.Envelope
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			e.t.Fatalf("event %q: %v", l, err)
		}
		n, _ := evCounter.LoadOrStore(id, new(int))
		*(n.(*int))++
		ev.SchemaVersion, ev.SessionID, ev.Seq = schema.Version, id, tail.Seq+1+uint64(i)
		ev.EventID = fmt.Sprintf("ev-%d-%d", tail.Seq+1+uint64(i), time.Now().UnixNano())
		ev.Time = time.Now().UTC()
		evs[i] = ev
	}
	return e.store.Append(ctx, logstore.AppendRequest{SessionID: id, ExpectedStreamSeq: tail.StreamSeq, Events: evs})
}

func (e *env) claim(id, holder string) {
	e.t.Helper()
	if err := e.store.RenewLease(context.Background(), id, holder, time.Now()); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) fold(id string) *session.State {
	e.t.Helper()
	evs, _, err := e.store.ReadEvents(context.Background(), id, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	st := session.New(id)
	for i := range evs {
		if err := st.Apply(&evs[i].Envelope); err != nil {
			e.t.Fatalf("%s: seq %d %s does not fold: %v", id, evs[i].Seq, evs[i].Type, err)
		}
	}
	return st
}

// repairs counts the session's repair/applied events; the log must fold.
func (e *env) repairs(id string) int {
	e.t.Helper()
	evs, _, err := e.store.ReadEvents(context.Background(), id, 0)
	if err != nil {
		e.t.Error(err)
		return -1
	}
	n := 0
	st := session.New(id)
	for i, ev := range evs {
		if ev.Type == schema.TypeRepairApplied {
			n++
		}
		if err := st.Apply(&evs[i].Envelope); err != nil {
			e.t.Errorf("%s: seq %d does not fold: %v", id, ev.Seq, err)
			return -1
		}
	}
	return n
}

const (
	evCreated   = `{"type":"session/created"}`
	evTurn      = `{"type":"turn/started","turnId":"t1"}`
	evRequested = `{"type":"tool/requested","turnId":"t1","toolCallId":"c1","data":{"name":"sh","input":{}}}`
	evStarted   = `{"type":"tool/started","turnId":"t1","toolCallId":"c1"}`
)

// A lapsed lease is repaired after TTL + grace, on every layout.
func TestLeaseExpiryRepairsWithinTTLPlusGrace(t *testing.T) {
	natstest.ForEachLayout(t, testLeaseExpiryRepairs)
}

func testLeaseExpiryRepairs(t *testing.T, l natstest.Layout) {
	e := newEnvLayout(t, l)
	r := e.start(Config{Grace: testGrace})
	e.appendEvents("s-1", evCreated, evTurn, evRequested, evStarted)
	claimed := time.Now()
	e.claim("s-1", "agent-1")
	// The upper bound is liveness, not speed (speed is bench repair's):
	// on a loaded machine a 3-node cluster can take seconds to commit.
	natstest.CheckFor(t, liveness, 20*time.Millisecond, func() error {
		if !e.fold("s-1").Paused {
			return fmt.Errorf("not repaired yet")
		}
		return nil
	})
	took := time.Since(claimed)
	if took < testTTL+testGrace {
		t.Fatalf("repaired %v after the last renewal: before TTL %v + grace %v", took, testTTL, testGrace)
	}
	st := e.fold("s-1")
	if st.HasOpenWork() || st.Tools["c1"].Status != schema.ToolOutcomeUnknown || st.Repairs != 1 {
		t.Fatalf("after repair: open %v, c1 %s, repairs %d", st.OpenWork(), st.Tools["c1"].Status, st.Repairs)
	}
	// A repair is counted after its commit, which the fold may see first.
	natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if got := counter(t, r.svc.m.repaired.WithLabelValues(string(triggerExpiry))); got != 1 {
			return fmt.Errorf("repaired metric %v", got)
		}
		if got := counter(t, r.svc.m.closers.WithLabelValues(string(session.OpenToolStarted))); got != 1 {
			return fmt.Errorf("closers metric %v", got)
		}
		return nil
	})
	// The claim is dropped off the repair's path.
	natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if c, _ := e.store.GetClaim(context.Background(), "s-1"); c != nil {
			return fmt.Errorf("claim kept after repair: %+v", c)
		}
		return nil
	})
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func (e *env) request(body string) (map[string]any, string) {
	e.t.Helper()
	m, err := e.nc.Request(logstore.SubjectRepair, []byte(body), 10*time.Second)
	if err != nil {
		e.t.Fatalf("request %s: %v", body, err)
	}
	var out map[string]any
	if err := json.Unmarshal(m.Data, &out); err != nil {
		e.t.Fatalf("reply %s: %v", m.Data, err)
	}
	return out, m.Header.Get("Nats-Service-Error-Code")
}

func errCode(reply map[string]any) string {
	if e, ok := reply["error"].(map[string]any); ok {
		c, _ := e["code"].(string)
		return c
	}
	return ""
}

// A session whose holder never named itself makes no claim of liveness:
// it is never repaired automatically (a sweep passes it by), only on demand.
// On every layout.
func TestNeverClaimedRepairedOnlyOnDemand(t *testing.T) {
	natstest.ForEachLayout(t, testNeverClaimedRepairedOnlyOnDemand)
}

func testNeverClaimedRepairedOnlyOnDemand(t *testing.T, l natstest.Layout) {
	e := newEnvLayout(t, l)
	r := e.start(Config{Grace: testGrace, SweepInterval: 100 * time.Millisecond})
	e.appendEvents("s-free", evCreated, evTurn, evRequested)
	// Let several sweeps and a full TTL + grace pass.
	deadline := time.Now().Add(testTTL + testGrace + 500*time.Millisecond)
	for time.Now().Before(deadline) {
		if e.fold("s-free").Paused {
			t.Fatal("an unclaimed session was repaired automatically")
		}
		time.Sleep(50 * time.Millisecond)
	}
	reply, hdr := e.request(`{"sessionId":"s-free"}`)
	if reply["repaired"] != true || hdr != "" {
		t.Fatalf("on demand: %v (error header %q)", reply, hdr)
	}
	closed := reply["closed"].([]any)
	if len(closed) != 2 || reply["firstSeq"].(float64) != 4 || reply["lastSeq"].(float64) != 7 {
		t.Fatalf("reply %v", reply)
	}
	st := e.fold("s-free")
	if !st.Paused || st.Tools["c1"].Status != schema.ToolNotStarted {
		t.Fatalf("after demand: paused %v, c1 %s", st.Paused, st.Tools["c1"].Status)
	}
	// Nothing left: a second request repairs nothing.
	reply, _ = e.request(`{"sessionId":"s-free"}`)
	if reply["repaired"] != false || len(reply["closed"].([]any)) != 0 {
		t.Fatalf("second demand: %v", reply)
	}
	if n := e.repairs("s-free"); n != 1 {
		t.Fatalf("%d repairs", n)
	}
	if got := counter(t, r.svc.m.repaired.WithLabelValues(string(triggerDemand))); got != 1 {
		t.Fatalf("demand repairs metric %v", got)
	}
}

func TestDemandErrors(t *testing.T) {
	e := newEnv(t)
	e.start(Config{Grace: testGrace})
	e.appendEvents("s-live", evCreated, evTurn)
	e.claim("s-live", "agent-1")

	for _, tc := range []struct{ name, body, code string }{
		{"BadJSON", `{"sessionId":`, "bad_request"},
		{"UnknownField", `{"sessionId":"s-live","forced":true}`, "bad_request"},
		{"MissingID", `{}`, "bad_request"},
		{"BadID", `{"sessionId":"a.b"}`, "bad_request"},
		{"NotFound", `{"sessionId":"nope"}`, "not_found"},
		{"LiveLease", `{"sessionId":"s-live"}`, "conflict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply, hdr := e.request(tc.body)
			if errCode(reply) != tc.code || hdr != tc.code {
				t.Fatalf("reply %v header %q, want %s", reply, hdr, tc.code)
			}
		})
	}
	if e.fold("s-live").Paused {
		t.Fatal("refused requests changed the session")
	}
	reply, _ := e.request(`{"sessionId":"s-live","force":true}`)
	if reply["repaired"] != true {
		t.Fatalf("force: %v", reply)
	}
	if !e.fold("s-live").Paused {
		t.Fatal("forced repair did not pause")
	}
	// A forced repair of a held session keeps its claim: the holder's
	// later death is still noticed.
	if c, _ := e.store.GetClaim(context.Background(), "s-live"); c == nil {
		t.Fatal("forced repair dropped a live holder's claim")
	}
}

// A holder that keeps renewing with a turn open is never repaired, however
// many TTLs pass.
func TestLiveHolderNeverRepaired(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{Grace: testGrace, SweepInterval: 200 * time.Millisecond})
	e.appendEvents("s-busy", evCreated, evTurn, evRequested, evStarted)
	// The holder renews on its own goroutine, as an agent does, so slow
	// checks below cannot make it miss a renewal.
	stopHB := make(chan struct{})
	hbDone := make(chan error, 1)
	go func() {
		tick := time.NewTicker(testTTL / 5)
		defer tick.Stop()
		for {
			if err := e.store.RenewLease(context.Background(), "s-busy", "agent-1", time.Now()); err != nil {
				hbDone <- err
				return
			}
			select {
			case <-stopHB:
				hbDone <- nil
				return
			case <-tick.C:
			}
		}
	}()
	stop := time.Now().Add(5 * testTTL)
	for time.Now().Before(stop) {
		if e.fold("s-busy").Paused {
			t.Fatal("a live holder's session was repaired")
		}
		time.Sleep(testTTL / 4)
	}
	close(stopHB)
	if err := <-hbDone; err != nil {
		t.Fatal(err)
	}
	if got := counter(t, r.svc.m.checks.WithLabelValues("live")); got == 0 {
		t.Fatal("the sweeps never looked at the session")
	}
	// Once it stops renewing, it is.
	natstest.CheckFor(t, liveness, 20*time.Millisecond, func() error {
		if !e.fold("s-busy").Paused {
			return fmt.Errorf("not repaired")
		}
		return nil
	})
}

// Sessions orphaned while no repairer ran are found by the sweep on start,
// on one stream and spread over three partitions, on one node and on an
// R3 cluster (each repair grouped with others of its stream only).
func TestSweepOnStartFindsOrphans(t *testing.T) {
	natstest.ForEachLayout(t, testSweepOnStartFindsOrphans)
}

func testSweepOnStartFindsOrphans(t *testing.T, l natstest.Layout) {
	e := newEnvLayout(t, l)
	for i := 0; i < 10; i++ {
		id := fmt.Sprintf("s-%d", i)
		e.appendEvents(id, evCreated, evTurn)
		e.claim(id, "agent")
	}
	// Wait until the leases are gone (markers written), then start.
	natstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		l, _, err := e.store.GetLease(context.Background(), "s-9")
		if err != nil || l != nil {
			return fmt.Errorf("lease still live (%v)", err)
		}
		return nil
	})
	time.Sleep(testGrace) // no watcher runs: this only lets the grace pass
	// A queue of 2 makes the sweep wait for room four times over.
	r := e.start(Config{Grace: testGrace, SweepInterval: -1, SweepQueue: 2, Concurrency: 1})
	natstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		for i := 0; i < 10; i++ {
			if !e.fold(fmt.Sprintf("s-%d", i)).Paused {
				return fmt.Errorf("s-%d not repaired", i)
			}
		}
		// A repair is counted after its commit, which the fold above
		// may see first.
		if got := counter(t, r.svc.m.repaired.WithLabelValues(string(triggerSweep))); got != 10 {
			return fmt.Errorf("sweep repairs %v, want 10", got)
		}
		return nil
	})
}

// The sweep honours the grace period when it finds a lease that just went.
func TestSweepWaitsForGrace(t *testing.T) {
	e := newEnv(t)
	e.appendEvents("s-1", evCreated, evTurn)
	e.claim("s-1", "agent")
	var gone time.Time
	natstest.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		l, _, err := e.store.GetLease(context.Background(), "s-1")
		if err != nil || l != nil {
			return fmt.Errorf("lease still live (%v)", err)
		}
		gone = time.Now()
		return nil
	})
	grace := 1500 * time.Millisecond
	e.start(Config{Grace: grace, SweepInterval: -1})
	natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if !e.fold("s-1").Paused {
			return fmt.Errorf("not repaired")
		}
		return nil
	})
	if d := time.Since(gone); d < grace-300*time.Millisecond {
		t.Fatalf("repaired %v after the lease went, grace %v", d, grace)
	}
}

// Every row of the table alone, and all at once, through the service.
func TestEveryRowThroughService(t *testing.T) {
	e := newEnv(t)
	e.start(Config{Grace: testGrace})
	rows := map[string][]string{
		"attempt":    {`{"type":"attempt/started","turnId":"t1","attemptId":"a1"}`},
		"requested":  {evRequested},
		"started":    {evRequested, evStarted},
		"approval":   {`{"type":"approval/requested","turnId":"t1","data":{"approvalId":"p1","prompt":"ok?"}}`},
		"job":        {`{"type":"job/started","turnId":"t1","data":{"jobId":"j1"}}`},
		"compaction": {`{"type":"compaction/started","data":{"compactionId":"k1","throughSeq":1}}`},
		"step":       {`{"type":"step/started","turnId":"t1","stepId":"st1"}`},
	}
	var all []string
	for name, evs := range rows {
		e.appendEvents("row-"+name, append([]string{evCreated, evTurn}, evs...)...)
		e.claim("row-"+name, "agent")
		if name == "started" {
			continue // its request is in "requested" already
		}
		all = append(all, evs...)
	}
	all = append(all, `{"type":"tool/requested","turnId":"t1","toolCallId":"c2","data":{"name":"sh","input":{}}}`,
		`{"type":"tool/started","turnId":"t1","toolCallId":"c2"}`)
	e.appendEvents("row-all", append([]string{evCreated, evTurn}, all...)...)
	e.claim("row-all", "agent")
	// Work outside a turn: a job after the turn ended.
	e.appendEvents("row-outside", evCreated, evTurn, `{"type":"turn/ended","turnId":"t1","data":{"reason":"completed"}}`,
		`{"type":"job/started","data":{"jobId":"bg"}}`)
	e.claim("row-outside", "agent")

	ids := []string{"row-all", "row-outside"}
	for name := range rows {
		ids = append(ids, "row-"+name)
	}
	natstest.CheckFor(t, liveness, 20*time.Millisecond, func() error {
		for _, id := range ids {
			st := e.fold(id)
			if !st.Paused || st.HasOpenWork() {
				return fmt.Errorf("%s: paused %v open %v", id, st.Paused, st.OpenWork())
			}
		}
		return nil
	})
	all2 := e.fold("row-all")
	if all2.Tools["c1"].Status != schema.ToolNotStarted || all2.Tools["c2"].Status != schema.ToolOutcomeUnknown ||
		all2.Approvals["p1"].Decision != schema.DecisionExpired || all2.Compactions["k1"].Outcome != "aborted" {
		t.Fatalf("row-all closers: c1 %s c2 %s p1 %s k1 %s", all2.Tools["c1"].Status, all2.Tools["c2"].Status,
			all2.Approvals["p1"].Decision, all2.Compactions["k1"].Outcome)
	}
	for _, id := range ids {
		if n := e.repairs(id); n != 1 {
			t.Fatalf("%s: %d repairs", id, n)
		}
	}
}

// The holder comes back and appends at the moment the repair does, both
// against the tail it last saw: exactly one of them takes the position,
// the other sees a conflict, and the log folds cleanly.
func TestHolderAndRepairRace(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{Grace: 0, SweepInterval: -1})
	const n = 40
	for i := 0; i < n; i++ {
		e.appendEvents(fmt.Sprintf("race-%d", i), evCreated, evTurn, evRequested, evStarted)
	}
	var holderWon, holderLost int
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("race-%d", i)
		tail, err := e.store.Tail(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		result := schema.Envelope{SchemaVersion: 1, SessionID: id, Seq: tail.Seq + 1, EventID: "holder-result",
			Time: time.Now().UTC(), Type: schema.TypeToolResult, TurnID: "t1", ToolCallID: "c1", Data: json.RawMessage(`{"status":"ok"}`)}
		lostBefore := counter(t, r.svc.m.lost)
		// Release the holder exactly when the repair, planned against the
		// same tail, is about to append: both go for the same position.
		release := make(chan struct{})
		var once sync.Once
		hook := func(string) { once.Do(func() { close(release) }) }
		r.svc.beforeAppend.Store(&hook)
		var wg sync.WaitGroup
		var herr, rerr error
		var out Outcome
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-release
			_, herr = e.store.Append(context.Background(), logstore.AppendRequest{SessionID: id, ExpectedStreamSeq: tail.StreamSeq, Events: []schema.Envelope{result}})
		}()
		go func() {
			defer wg.Done()
			out, rerr = r.svc.Repair(context.Background(), id, true)
		}()
		wg.Wait()
		r.svc.beforeAppend.Store(nil)
		if rerr != nil {
			t.Fatalf("%s: repair: %v", id, rerr)
		}
		st := e.fold(id) // fails the test if the log does not fold
		if !st.Paused || st.HasOpenWork() || st.Repairs != 1 {
			t.Fatalf("%s: paused %v open %v repairs %d", id, st.Paused, st.OpenWork(), st.Repairs)
		}
		lost := counter(t, r.svc.m.lost) > lostBefore
		switch {
		case herr == nil:
			holderWon++
			if !lost {
				t.Fatalf("%s: the holder took the position the repair planned against, but the repair saw no conflict", id)
			}
			// The result is stored right after the tail; the repair was
			// planned after it (directly, or after losing the check).
			if st.Tools["c1"].Status != schema.ToolOK || out.FirstSeq != tail.Seq+2 {
				t.Fatalf("%s: holder won but c1 is %s and the repair starts at %d", id, st.Tools["c1"].Status, out.FirstSeq)
			}
		case schema.CodeOf(herr) == schema.CodeConflict:
			holderLost++
			if lost {
				t.Fatalf("%s: both the holder and the repair lost", id)
			}
			if st.Tools["c1"].Status != schema.ToolOutcomeUnknown || out.FirstSeq != tail.Seq+1 {
				t.Fatalf("%s: repair won but c1 is %s, repair at %d", id, st.Tools["c1"].Status, out.FirstSeq)
			}
		default:
			t.Fatalf("%s: holder append: %v", id, herr)
		}
	}
	t.Logf("holder won %d, repair won %d", holderWon, holderLost)
}

// Several replicas race over the same orphans: every session is repaired
// exactly once, and the replicas' counts add up to one repair each.
func TestReplicasRepairEachSessionOnce(t *testing.T) {
	for _, replicas := range []int{2, 3} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			e := newEnv(t)
			var rs []*running
			for i := 0; i < replicas; i++ {
				rs = append(rs, e.start(Config{Grace: testGrace, SweepInterval: 300 * time.Millisecond}))
			}
			const n = 200
			parallel(n, func(i int) {
				id := fmt.Sprintf("orphan-%d", i)
				// not_committed stored nothing: on a loaded machine the
				// batch slots can stay full past the append's timeout, and
				// the session must still exist for the count below.
				for {
					_, err := e.tryAppend(id, evCreated, evTurn, evRequested, evStarted)
					var se *schema.Error
					if errors.As(err, &se) && se.Code == schema.CodeNotCommitted {
						continue
					}
					if err != nil {
						t.Error(err)
					}
					break
				}
				if err := e.store.RenewLease(context.Background(), id, "agent", time.Now()); err != nil {
					t.Error(err)
				}
			})
			// A liveness bound, not a speed target: on a single-node file
			// stream each repair batch is staged with an fsync, and a loaded
			// CI machine can take minutes for 200 of them from 3 replicas.
			natstest.CheckFor(t, 3*time.Minute, 50*time.Millisecond, func() error {
				total := 0.0
				for _, r := range rs {
					for _, why := range []trigger{triggerExpiry, triggerSweep} {
						total += counter(t, r.svc.m.repaired.WithLabelValues(string(why)))
					}
				}
				if total < n {
					return fmt.Errorf("%v of %d repaired", total, n)
				}
				return nil
			})
			// Let stragglers (queued sweeps) finish, then count in the log.
			time.Sleep(500 * time.Millisecond)
			total := 0.0
			for _, r := range rs {
				for _, why := range []trigger{triggerExpiry, triggerSweep} {
					total += counter(t, r.svc.m.repaired.WithLabelValues(string(why)))
				}
			}
			if total != n {
				t.Fatalf("replicas counted %v repairs of %d sessions", total, n)
			}
			parallel(n, func(i int) {
				id := fmt.Sprintf("orphan-%d", i)
				if got := e.repairs(id); got != 1 {
					t.Errorf("%s repaired %d times", id, got)
				}
			})
		})
	}
}

// parallel runs f(0..n-1) on a few goroutines (test setup and checks).
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// The repairer serves on the connection it is given, never one taken from
// the store: without it, New refuses.
func TestNewNeedsConn(t *testing.T) {
	e := newEnv(t)
	if _, err := New(Config{Store: e.store}); err == nil || !strings.Contains(err.Error(), "Conn") {
		t.Fatalf("New without Conn: %v, want an error naming Conn", err)
	}
	if _, err := New(Config{Store: e.store, Conn: e.nc}); err != nil {
		t.Fatal(err)
	}
}

// A claim whose lease write failed (the lease bucket unavailable) stands
// alone while its holder goes on and takes the lease at its next append
// or heartbeat: the session is repaired only once the lease it could have
// had ran out, a TTL after the claim, and the repair says so. (Repaired at
// once, the fault suite's live agents were paused during a partition.)
func TestClaimWithoutLeaseWaitsATTL(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.appendEvents("s-1", evCreated, evTurn)
	// The state a take leaves when its claim was written and its lease
	// write failed: a claim, no lease record.
	claims, err := natstest.JetStream(t, e.nc).KeyValue(ctx, logstore.ClaimBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := claims.Put(ctx, "s-1", []byte(`{"holder":"agent","claimedAt":"2026-12-04T00:00:00Z"}`)); err != nil {
		t.Fatal(err)
	}
	_, claimedAt, err := e.store.ClaimEntry(ctx, "s-1")
	if err != nil || claimedAt.IsZero() {
		t.Fatalf("claim: %v %v", claimedAt, err)
	}
	e.start(Config{Grace: testGrace, SweepInterval: 100 * time.Millisecond})
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if !e.fold("s-1").Paused {
			return fmt.Errorf("not repaired")
		}
		return nil
	})
	evs, _, err := e.store.ReadEvents(ctx, "s-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	var marker schema.RepairApplied
	for _, ev := range evs {
		if ev.Type == schema.TypeRepairApplied {
			if err := json.Unmarshal(ev.Data, &marker); err != nil {
				t.Fatal(err)
			}
		}
	}
	if marker.LeaseExpiredAt == nil || !marker.LeaseExpiredAt.Equal(claimedAt.Add(testTTL)) {
		t.Fatalf("repair's leaseExpiredAt %v, want the claim's time + TTL %v", marker.LeaseExpiredAt, claimedAt.Add(testTTL))
	}
	if at := evs[len(evs)-1].Time; at.Before(claimedAt.Add(testTTL)) {
		t.Fatalf("repaired at %v, before the claim's lease could have run out (%v)", at, claimedAt.Add(testTTL))
	}
}

// A lease whose TTL has run out on the leader is repaired without its
// expiry marker: the server writes markers late, and a repairer that
// waited for one added that lag to every repair. The repairer's clock is
// set past the TTL and grace of a lease whose server entry is still live
// (its real TTL is an hour), so only the leader's last entry can tell it
// the lease lapsed.
func TestLapsedLeaseRepairedBeforeItsMarker(t *testing.T) {
	e := newEnv(t)
	st, err := logstore.Open(context.Background(), e.nc, logstore.Config{LeaseTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	e.appendEvents("s-1", evCreated, evTurn)
	if err := st.RenewLease(context.Background(), "s-1", "agent", time.Now()); err != nil {
		t.Fatal(err)
	}
	rec, err := e.store.LeaseRecord(context.Background(), "s-1")
	if err != nil || !rec.Live() {
		t.Fatalf("lease not live: %+v %v", rec, err)
	}
	// The clock moves past the lease only after the repairer's first good
	// probe: a lease found lapsed at the start counts from a TTL after it.
	skew := time.Hour + testGrace + time.Second
	var skewed atomic.Bool
	r := e.start(Config{Grace: testGrace, LeaseTTL: time.Hour, SweepInterval: 100 * time.Millisecond,
		Now: func() time.Time {
			if skewed.Load() {
				return time.Now().Add(skew)
			}
			return time.Now()
		}})
	natstest.CheckFor(t, liveness, 10*time.Millisecond, func() error {
		r.svc.out.mu.Lock()
		defer r.svc.out.mu.Unlock()
		if !r.svc.out.from.IsZero() {
			return fmt.Errorf("no good probe yet")
		}
		return nil
	})
	skewed.Store(true)
	natstest.CheckFor(t, liveness, 20*time.Millisecond, func() error {
		if !e.fold("s-1").Paused {
			return fmt.Errorf("not repaired")
		}
		return nil
	})
	// Once, by the sweep or by the evaluation armed at the lease's expiry
	// (which the skewed clock also passes): whichever comes first on a
	// loaded machine, never both.
	var sweep, armed float64
	natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		// Counted after the commit the fold may see first.
		sweep = counter(t, r.svc.m.repaired.WithLabelValues(string(triggerSweep)))
		armed = counter(t, r.svc.m.repaired.WithLabelValues(string(triggerExpiry)))
		if sweep+armed == 0 {
			return fmt.Errorf("the repair is not counted")
		}
		return nil
	})
	if sweep+armed != 1 {
		t.Fatalf("repairs: %v by the sweep, %v at the lease's expiry, want 1 in all", sweep, armed)
	}
}

package repairer

import (
	"context"
	"errors"
	"fmt"
	"sort"
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
)

// held is a service (not running) whose grouper queues every repair until
// release: the test decides what one grouped batch holds.
type held struct {
	e   *env
	svc *Service
	g   *grouper
	ctx context.Context
}

func (e *env) held(cfg Config) *held {
	e.t.Helper()
	cfg.Store, cfg.Conn = e.store, e.nc
	cfg.Registerer = prometheus.NewRegistry()
	svc, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := newGrouper(svc, ctx)
	g.running = g.maxInflight // every committer slot taken: submits queue
	svc.grouper.Store(g)
	svc.wg.Add(1)
	go func() {
		defer svc.wg.Done()
		svc.dropLoop(ctx)
	}()
	e.t.Cleanup(func() {
		cancel()
		svc.wg.Wait()
	})
	return &held{e: e, svc: svc, g: g, ctx: ctx}
}

// orphan stores a session with a started tool call, claims it and deletes
// its lease: with no grace it is due for repair at once.
func (e *env) orphan(id string) {
	e.t.Helper()
	e.appendEvents(id, evCreated, evTurn, evRequested, evStarted)
	e.claim(id, "agent-1")
	// Behind the store's back, on the test's connection.
	kv, err := natstest.JetStream(e.t, e.nc).KeyValue(context.Background(), logstore.LeaseBucket)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := kv.Delete(context.Background(), id); err != nil {
		e.t.Fatal(err)
	}
}

// orphans makes an orphan of every id and returns them.
func (e *env) orphans(ids ...string) []string {
	e.t.Helper()
	for _, id := range ids {
		e.orphan(id)
	}
	return ids
}

// onceBefore runs f the first time id's plan is about to be appended.
func (h *held) onceBefore(id string, f func()) {
	var once sync.Once
	hook := func(got string) {
		if got == id {
			once.Do(f)
		}
	}
	h.svc.beforeAppend.Store(&hook)
}

// check evaluates every id at once, waits until all their plans are
// queued, commits them as one group and waits for the evaluations.
func (h *held) checkGrouped(ids ...string) {
	h.e.t.Helper()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.svc.check(h.ctx, id, triggerExpiry)
		}()
	}
	natstest.CheckFor(h.e.t, 10*time.Second, 5*time.Millisecond, func() error {
		h.g.mu.Lock()
		defer h.g.mu.Unlock()
		if len(h.g.pending) < len(ids) {
			return fmt.Errorf("%d of %d plans queued", len(h.g.pending), len(ids))
		}
		return nil
	})
	h.g.mu.Lock()
	h.g.running = 1 // the one committer started below
	h.g.mu.Unlock()
	h.svc.wg.Add(1)
	go h.g.loop()
	wg.Wait()
}

// groupCounts are the service's metrics a grouped batch moves.
type groupCounts struct{ refused, unknown, repaired, duplicates, lost float64 }

func (h *held) wantCounts(want groupCounts) {
	h.e.t.Helper()
	t := h.e.t
	got := groupCounts{
		refused:    counter(t, h.svc.m.groupFallbacks.WithLabelValues("refused")),
		unknown:    counter(t, h.svc.m.groupFallbacks.WithLabelValues("unknown")),
		repaired:   counter(t, h.svc.m.repaired.WithLabelValues(string(triggerExpiry))),
		duplicates: counter(t, h.svc.m.duplicates),
		lost:       counter(t, h.svc.m.lost),
	}
	if got != want {
		t.Fatalf("metrics %+v, want %+v", got, want)
	}
}

// wantRepairedOnce: every session is paused with nothing open, after
// exactly one repair.
func (e *env) wantRepairedOnce(ids []string) {
	e.t.Helper()
	for _, id := range ids {
		st := e.fold(id)
		if !st.Paused || st.HasOpenWork() || st.Repairs != 1 {
			e.t.Fatalf("%s: paused %v open %v repairs %d", id, st.Paused, st.OpenWork(), st.Repairs)
		}
	}
}

func histCount(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// headerKeys lists a stored message's header names but the batch commit
// marker, which only the last message of a batch carries.
func headerKeys(h map[string][]string) string {
	var ks []string
	for k := range h {
		if k != "Nats-Batch-Commit" {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// Repairs ready at once are committed as one atomic batch, which stores
// every event exactly as a single-session append stores it.
func TestGroupedRepairsCommitTogether(t *testing.T) {
	e := newEnv(t)
	h := e.held(Config{Grace: 0, SweepInterval: -1})
	ids := e.orphans("g-a", "g-b", "g-c", "g-d")
	// The same repair made by a single-session append, to compare with.
	e.orphan("g-ref")
	alone, err := New(Config{Store: e.store, Conn: e.nc, Grace: 0})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := alone.Repair(context.Background(), "g-ref", false); err != nil || !out.Repaired {
		t.Fatalf("reference repair: %+v %v", out, err)
	}

	h.checkGrouped(ids...)

	if n, sum := histCount(t, h.svc.m.groups); n != 1 || sum != float64(len(ids)) {
		t.Fatalf("grouped batches: %d holding %v sessions; want 1 holding %d", n, sum, len(ids))
	}
	h.wantCounts(groupCounts{repaired: float64(len(ids))})
	e.wantRepairedOnce(ids)
	refEvs, _, err := e.store.ReadEvents(context.Background(), "g-ref", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if st := e.fold(id); st.Tools["c1"].Status != schema.ToolOutcomeUnknown {
			t.Fatalf("%s: c1 %s", id, st.Tools["c1"].Status)
		}
		// The stream seq the group reported is the session's tail.
		tail, err := e.store.Tail(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := h.svc.states.Get(id); !ok || c.streamSeq != tail.StreamSeq || c.st.LastSeq != tail.Seq {
			t.Fatalf("%s: cached state at stream seq %d (seq %d), tail %+v", id, c.streamSeq, c.st.LastSeq, tail)
		}
		natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
			if c, _ := e.store.GetClaim(context.Background(), id); c != nil {
				return fmt.Errorf("%s: claim kept after repair", id)
			}
			return nil
		})
		evs, _, err := e.store.ReadEvents(context.Background(), id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != len(refEvs) {
			t.Fatalf("%s: %d events, the reference %d", id, len(evs), len(refEvs))
		}
		for i := 4; i < len(evs); i++ {
			got, err := e.store.NextAfter(context.Background(), id, evs[i].StreamSeq-1)
			if err != nil {
				t.Fatal(err)
			}
			want, err := e.store.NextAfter(context.Background(), "g-ref", refEvs[i].StreamSeq-1)
			if err != nil {
				t.Fatal(err)
			}
			if headerKeys(got.Header) != headerKeys(want.Header) {
				t.Fatalf("%s event %d headers %s, a single append's %s", id, i, headerKeys(got.Header), headerKeys(want.Header))
			}
			for _, k := range []string{logstore.HeaderType, logstore.HeaderSeq, logstore.HeaderSchema} {
				if got.Header.Get(k) != want.Header.Get(k) {
					t.Fatalf("%s event %d %s=%q, a single append's %q", id, i, k, got.Header.Get(k), want.Header.Get(k))
				}
			}
			if got.Header.Get(logstore.HeaderMsgID) != logstore.MsgID(id, evs[i].EventID) {
				t.Fatalf("%s event %d msg id %q", id, i, got.Header.Get(logstore.HeaderMsgID))
			}
			if evs[i].Type != refEvs[i].Type || !evs[i].Synthetic {
				t.Fatalf("%s event %d is %s (synthetic %v), the reference %s", id, i, evs[i].Type, evs[i].Synthetic, refEvs[i].Type)
			}
		}
	}
}

// The holder of one session of a group appends between the plan and the
// grouped batch: the batch fails whole, the others commit alone, and the
// changed session is planned again from its new tail.
func TestGroupedRepairOneSessionChangedUnderIt(t *testing.T) {
	e := newEnv(t)
	h := e.held(Config{Grace: 0, SweepInterval: -1})
	ids := e.orphans("c-a", "c-b", "c-c")
	var herr error
	h.onceBefore("c-b", func() {
		_, herr = e.tryAppend("c-b", `{"type":"tool/result","turnId":"t1","toolCallId":"c1","data":{"status":"ok"}}`)
	})

	h.checkGrouped(ids...)

	if herr != nil {
		t.Fatalf("holder append: %v", herr)
	}
	h.wantCounts(groupCounts{refused: 1, repaired: 3, lost: 1})
	e.wantRepairedOnce(ids)
	for _, id := range ids {
		st := e.fold(id)
		want := schema.ToolOutcomeUnknown
		if id == "c-b" {
			want = schema.ToolOK // the holder's result, seen by the second plan
		}
		if st.Tools["c1"].Status != want {
			t.Fatalf("%s: c1 %s, want %s", id, st.Tools["c1"].Status, want)
		}
	}
}

// Another replica commits the same plan of one session of a group first:
// the batch fails on its ids, the others commit alone, and that session's
// repair is counted as the other replica's. (The other replica's repair
// leaves the lease as it is, as one that read it after this replica ended
// it does: one that ended it itself makes this replica's end fail, and
// the session is read again before anything is queued.)
func TestGroupedRepairAnotherReplicaFirst(t *testing.T) {
	e := newEnv(t)
	h := e.held(Config{Grace: 0, SweepInterval: -1})
	other, err := New(Config{Store: e.store, Conn: e.nc, Grace: 0})
	if err != nil {
		t.Fatal(err)
	}
	ids := e.orphans("d-a", "d-b", "d-c")
	var oerr error
	h.onceBefore("d-b", func() {
		out, err := other.repair(context.Background(), "d-b", triggerDemand, "repair requested", nil, (*Service).fold, nil)
		oerr = err
		if oerr == nil && (!out.Repaired || out.Duplicate) {
			oerr = fmt.Errorf("other replica: %+v", out)
		}
	})

	h.checkGrouped(ids...)

	if oerr != nil {
		t.Fatal(oerr)
	}
	// The third repair is the other replica's.
	h.wantCounts(groupCounts{refused: 1, repaired: 2, duplicates: 1})
	e.wantRepairedOnce(ids)
}

// The answer to a grouped batch is lost after it committed: its sessions
// are appended alone with the same ids and expectations, find their own
// events in place, and count as repaired once, not as duplicates.
func TestGroupedBatchAnswerLost(t *testing.T) {
	e := newEnv(t)
	h := e.held(Config{Grace: 0, SweepInterval: -1})
	ids := e.orphans("l-a", "l-b", "l-c")
	var faults atomic.Int32
	fault := func() error {
		if faults.Add(1) == 1 {
			return errors.New("answer lost")
		}
		return nil
	}
	h.svc.groupFault.Store(&fault)

	h.checkGrouped(ids...)

	if faults.Load() == 0 {
		t.Fatal("no grouped batch was sent")
	}
	// No duplicates: the batch was ours.
	h.wantCounts(groupCounts{unknown: 1, repaired: 3})
	e.wantRepairedOnce(ids)
	for _, id := range ids {
		tail, err := e.store.Tail(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := h.svc.states.Get(id); !ok || c.streamSeq != tail.StreamSeq {
			t.Fatalf("%s: cached state at stream seq %d, tail %+v", id, c.streamSeq, tail)
		}
	}
}

// A group takes requests in arrival order up to its event limit, one per
// session and all of one stream; what it leaves waits for the next.
func TestGroupTake(t *testing.T) {
	g := &grouper{maxEvents: 10, running: 1}
	add := func(id, stream string, events int) {
		g.pending = append(g.pending, &pendingAppend{
			req: logstore.AppendRequest{SessionID: id}, stream: stream, msgs: make([]*nats.Msg, events)})
	}
	add("a", "S1", 4)
	add("a", "S1", 4) // the same session again: the next group
	add("b", "S2", 2) // another stream: the next group
	add("c", "S1", 4)
	add("d", "S1", 4) // over the limit: the next group
	add("e", "S1", 2)
	ids := func(group []*pendingAppend) string {
		var s []string
		for _, p := range group {
			s = append(s, p.req.SessionID)
		}
		return strings.Join(s, ",")
	}
	for _, want := range []string{"a,c,e", "a,d", "b"} {
		if got := ids(g.take()); got != want {
			t.Fatalf("group %q, want %q", got, want)
		}
	}
	if got := g.take(); got != nil || g.running != 0 {
		t.Fatalf("empty queue: group %q, running %d", ids(got), g.running)
	}
	// A request larger than the limit still goes, alone.
	g.running = 1
	add("big", "S1", 12)
	add("f", "S1", 1)
	for _, want := range []string{"big", "f"} {
		if got := ids(g.take()); got != want {
			t.Fatalf("group %q, want %q", got, want)
		}
	}
}

// On R1 an evaluation whose repair waits for its grouped batch gives its
// slot to the next session due: with one slot, two sessions' repairs still
// wait for the same batch (without it the second waited for the first's
// batch to commit before it was even read, and a burst was repaired in
// waves).
func TestWaitingRepairGivesUpItsSlot(t *testing.T) {
	e := newEnv(t)
	h := e.held(Config{Grace: 0, SweepInterval: -1, Concurrency: 1})
	ids := e.orphans("w-a", "w-b")
	h.svc.wg.Add(1)
	go func() {
		defer h.svc.wg.Done()
		h.svc.evaluateLoop(h.ctx)
	}()
	var once sync.Once
	release := func() {
		once.Do(func() {
			h.g.mu.Lock()
			h.g.running = 1 // the one committer started here
			h.g.mu.Unlock()
			h.svc.wg.Add(1)
			go h.g.loop()
		})
	}
	t.Cleanup(func() {
		release() // a failed test leaves no evaluation waiting
		h.svc.mu.Lock()
		h.svc.stopping = true
		h.svc.cond.Broadcast()
		h.svc.mu.Unlock()
	})
	for _, id := range ids {
		h.svc.wakeAt(id, time.Now(), triggerExpiry)
	}
	natstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		h.g.mu.Lock()
		defer h.g.mu.Unlock()
		if len(h.g.pending) < len(ids) {
			return fmt.Errorf("%d of %d plans queued", len(h.g.pending), len(ids))
		}
		return nil
	})
	release()
	natstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if n := counter(t, h.svc.m.repaired.WithLabelValues(string(triggerExpiry))); n != float64(len(ids)) {
			return fmt.Errorf("%v of %d repaired", n, len(ids))
		}
		return nil
	})
	if n, sum := histCount(t, h.svc.m.groups); n != 1 || sum != float64(len(ids)) {
		t.Fatalf("grouped batches: %d holding %v sessions; want 1 holding %d", n, sum, len(ids))
	}
	e.wantRepairedOnce(ids)
}

// On a store of one replica (an R1 file stream fsyncs each atomic batch,
// one at a time) one committer takes everything pending.
func TestGroupInflightOneOnR1(t *testing.T) {
	e := newEnv(t)
	svc, err := New(Config{Store: e.store, Conn: e.nc})
	if err != nil {
		t.Fatal(err)
	}
	if got := svc.cfg.GroupInflight; got != 1 {
		t.Fatalf("GroupInflight %d on R1, want 1", got)
	}
	svc, err = New(Config{Store: e.store, Conn: e.nc, GroupInflight: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := svc.cfg.GroupInflight; got != 3 {
		t.Fatalf("GroupInflight %d, want the configured 3", got)
	}
}

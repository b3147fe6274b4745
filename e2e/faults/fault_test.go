package faults

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/services/forker"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

var faultSoak = flag.Bool("soak", false, "run the fault suite as a long soak (also SESSIONLOG_SOAK=1)")

// faultTimes are the durations of one run.
type faultTimes struct {
	Warmup, Calm, Partition time.Duration
	// Cycles repeats the fault schedule (soak).
	Cycles int
	// LeaseTTL is short for a suite that waits on repairs, long enough
	// that a loaded 2-core machine (CI runs the e2e packages beside each
	// other) does not stall a live agent's renewals past it: at 8 s, a
	// warm-up where every request took 8 s repaired three live agents.
	LeaseTTL time.Duration
	Grace    time.Duration
	Sweep    time.Duration
	Drain    time.Duration
	// Think is the fleet's mean pause between two requests of an agent.
	Think time.Duration
}

func faultTimesFor(soak bool) faultTimes {
	ft := faultTimes{Warmup: 3 * time.Second, Calm: time.Second, Partition: 3 * time.Second, Cycles: 1, Think: 100 * time.Millisecond,
		LeaseTTL: 12 * time.Second, Grace: time.Second, Sweep: 2 * time.Second, Drain: 45 * time.Second}
	if soak {
		ft.Cycles, ft.Calm, ft.Partition, ft.Think = 12, 10*time.Second, 10*time.Second, 40*time.Millisecond
	}
	return ft
}

// faultHarness is the cluster and the services.
type faultHarness struct {
	t       *testing.T
	dir     string
	c       *faultCluster
	times   faultTimes
	svcs    map[string]*faultSvc
	windows []faultWindow
}

type faultSvc struct {
	role string
	spec *faultSvcSpec
	proc *faultProc
}

func (h *faultHarness) startService(name string) {
	h.t.Helper()
	s := h.svcs[name]
	s.proc = faultStart(h.t, name, faultSpec{Role: s.role, Svc: s.spec}, filepath.Join(h.dir, name+".log"))
	natstest.CheckFor(h.t, 60*time.Second, 100*time.Millisecond, func() error {
		if !s.proc.running() {
			return fmt.Errorf("%s exited: %v\n%s", name, s.proc.err, faultLogTail(filepath.Join(h.dir, name+".log"), 3000))
		}
		return faultHTTPReady(s.spec.HTTPAddr)
	})
}

func (h *faultHarness) addService(role, name string, prefer int, dataDir string) {
	h.svcs[name] = &faultSvc{role: role, spec: &faultSvcSpec{
		Instance: name, URLs: h.c.URLsFrom(prefer), DataDir: dataDir,
		HTTPAddr: fmt.Sprintf("127.0.0.1:%d", faultPort(h.t)),
		LeaseTTL: h.times.LeaseTTL, Grace: h.times.Grace, Sweep: h.times.Sweep,
	}}
	h.startService(name)
}

// fault runs one fault window: inject, recover, wait until whole again.
func (h *faultHarness) fault(name string, do func()) {
	h.t.Helper()
	h.faultDetail(name, func() string { do(); return "" })
}

// faultDetail is fault for an injection that says what it did (key=value
// pairs for the FAULT line).
func (h *faultHarness) faultDetail(name string, do func() string) {
	h.t.Helper()
	w := faultWindow{Name: name, Start: time.Now()}
	w.Detail = do()
	if err := h.c.WaitHealthy(60 * time.Second); err != nil {
		h.t.Fatalf("after %s: %v", name, err)
	}
	for n, s := range h.svcs {
		natstest.CheckFor(h.t, 60*time.Second, 100*time.Millisecond, func() error {
			if err := faultHTTPReady(s.spec.HTTPAddr); err != nil {
				return fmt.Errorf("%s after %s: %w", n, name, err)
			}
			return nil
		})
	}
	w.End = time.Now()
	h.windows = append(h.windows, w)
	h.t.Logf("fault %s: %s .. %s (%v) %s", name, w.Start.Format("15:04:05.000"), w.End.Format("15:04:05.000"), w.End.Sub(w.Start).Round(time.Millisecond), w.Detail)
	time.Sleep(h.times.Calm) // steady traffic between faults
}

// waitLeaderElsewhere waits until stream has a leader other than node
// old, seen through node via (a node of the majority).
func (h *faultHarness) waitLeaderElsewhere(stream string, old, via int) {
	h.t.Helper()
	nc, err := nats.Connect(h.c.URL(via), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		h.t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc, jetstream.WithDefaultTimeout(2*time.Second))
	natstest.CheckFor(h.t, 60*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" || h.c.NodeIndex(info.Cluster.Leader) == old {
			return fmt.Errorf("%s still led by %v", stream, info.Cluster)
		}
		return nil
	})
}

// TestFaultsCluster runs the fleet through the faults on one stream and on
// three partitions (each fault aimed at the leader of one partition, in
// turn).
func TestFaultsCluster(t *testing.T) {
	for _, partitions := range []int{1, 3} {
		t.Run(fmt.Sprintf("P%d", partitions), func(t *testing.T) { testFaultsCluster(t, partitions) })
	}
}

func testFaultsCluster(t *testing.T, partitions int) {
	// SIGKILL leaves the page cache to the restarted process: these
	// faults hold under the engine's lazy default too, and run under it.
	r := startFaultRun(t, partitions, faultClusterOpts{Sync: faultSyncInterval})
	h, times := r.h, r.h.times
	for cycle := 0; cycle < times.Cycles; cycle++ {
		target := h.c.streams[cycle%len(h.c.streams)]
		h.fault("leader_graceful", func() {
			l := h.c.StreamLeader(target)
			if err := h.c.Stop(l); err != nil {
				t.Errorf("graceful stop: %v", err)
			}
			h.c.Start(l)
		})
		h.fault("node_kill", func() {
			l := h.c.StreamLeader(target)
			h.c.Kill(l)
			h.waitLeaderElsewhere(target, l, (l+1)%faultNodes)
			h.c.Start(l)
		})
		h.fault("partition", func() {
			l := h.c.StreamLeader(target)
			h.c.Isolate(l)
			h.waitLeaderElsewhere(target, l, (l+1)%faultNodes)
			time.Sleep(times.Partition) // hold the partition
			h.c.Heal(l)
		})
		names := make([]string, 0, len(h.svcs))
		for n := range h.svcs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if n == "writer-2" {
				continue // one writer is enough to prove it
			}
			h.fault("kill_"+n, func() {
				h.svcs[n].proc.kill()
				h.startService(n)
			})
		}
	}
	r.finish(t)
}

// faultRun is one run of the fleet on a cluster with its services.
type faultRun struct {
	h        *faultHarness
	st       *logstore.Store
	fleet    *faultFleet
	stop     chan struct{}
	done     chan struct{}
	cancel   context.CancelFunc
	runStart time.Time
}

// startFaultRun starts a cluster, provisions the store on it, starts the
// services and the fleet, and returns after the warm-up.
func startFaultRun(t *testing.T, partitions int, copts faultClusterOpts) *faultRun {
	soak := *faultSoak || os.Getenv("SESSIONLOG_SOAK") == "1"
	times := faultTimesFor(soak)
	dir := t.TempDir()
	h := &faultHarness{t: t, dir: dir, times: times, svcs: map[string]*faultSvc{}}
	// Registered before the cluster's own cleanup, so it runs after it.
	t.Cleanup(func() {
		for _, s := range h.svcs {
			s.proc.kill()
		}
		faultCheckRaces(t, dir)
		if t.Failed() || os.Getenv("SESSIONLOG_FAULTS_LOGS") == "1" {
			faultDumpLogs(t, dir)
		}
		if keep := os.Getenv("SESSIONLOG_FAULTS_KEEP"); keep != "" {
			faultKeepLogs(t, dir, keep)
		}
	})
	h.c = newFaultCluster(t, dir, copts)
	ctx := context.Background()
	// The harness provisions the R3 stream and buckets, as an operator
	// would before deploying the services.
	// The meta group learns of all peers shortly after it elects a
	// leader: until then R3 placement fails.
	var st *logstore.Store
	natstest.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		var err error
		st, err = logstore.Open(ctx, h.c.admin, logstore.Config{Replicas: faultNodes, Partitions: partitions, LeaseTTL: times.LeaseTTL})
		if err != nil {
			return err
		}
		// The forker's own bucket, as the forker provisions it when it
		// may (services here run with NoProvision).
		_, err = natstest.JetStream(t, h.c.admin).CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: forker.ForkBucket, History: 1, Storage: jetstream.FileStorage, Replicas: faultNodes,
		})
		return err
	})
	h.c.streams = st.Streams()
	for _, role := range faultRoles {
		switch role {
		case "writer":
			h.addService(role, "writer-1", 0, "")
			h.addService(role, "writer-2", 1, "")
		default:
			h.addService(role, role, 2, filepath.Join(dir, role+"-data"))
		}
	}

	r := &faultRun{h: h, st: st, runStart: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	think := times.Think
	if faultRace {
		think *= 4
	}
	r.fleet = newFaultFleet(faultFleetConfig{
		Agents: 32, URLs: h.c.URLsFrom, Reader: st, Think: think, LeaseTTL: times.LeaseTTL,
		Abandon: 0.03, AbandonUntil: r.runStart.Add(times.Warmup + 20*time.Second),
		Seed: uint64(r.runStart.UnixNano()),
	})
	var fctx context.Context
	fctx, r.cancel = context.WithCancel(ctx)
	t.Cleanup(r.cancel)
	go func() { r.fleet.Run(fctx, r.stop); close(r.done) }()
	time.Sleep(times.Warmup)
	return r
}

// finish stops the fleet, lets it close its sessions, runs the checker
// and prints the FAULT, CHECK and ATTEMPTS lines; a broken guarantee
// fails the test. Then the projector must show what is stored.
func (r *faultRun) finish(t *testing.T) *faultReport {
	h, fleet := r.h, r.fleet
	runEnd := r.stopFleet(t)
	rep, stored, _ := faultVerify(t, h, r.st, fleet, true)
	for _, e := range fleet.errs {
		t.Errorf("fleet: %s", e)
	}
	faultReportRun(t, fleet, rep, h.windows, h.times.Calm, r.runStart, runEnd)
	faultAssert(t, rep)
	if faultHasRole("projector") {
		faultVerifyProjections(t, h, r.st, stored)
	}
	return rep
}

// finishDamaged is finish after faults that may destroy acknowledged
// events (a replica's files damaged): a session the checker finds damaged
// must be named by verify, or its agent answered rolled_back or
// unreadable, or the projector must have raised log_rolled_back, else it
// is a silent loss; every other session keeps every guarantee.
func (r *faultRun) finishDamaged(t *testing.T) {
	h, fleet := r.h, r.fleet
	runEnd := r.stopFleet(t)
	_, stored, problems := faultVerify(t, h, r.st, fleet, false)
	for _, e := range fleet.errs {
		t.Errorf("fleet: %s", e)
	}
	p := h.svcs["projector"]
	verify, verifyN := faultRunVerify(t, h.c.URLs(), p.spec.HTTPAddr)
	rolledBack := faultRolledBack(t, p.spec.HTTPAddr)
	j := faultJudgeDamage(t, fleet, stored, problems, verify, verifyN, rolledBack)
	t.Logf("DAMAGE %s", j)
	faultReportRun(t, fleet, j.rest, h.windows, h.times.Calm, r.runStart, runEnd)
	for _, s := range j.silent {
		t.Errorf("silent loss: %s", s)
	}
	faultAssert(t, j.rest)
}

// stopFleet stops the fleet and waits for its agents to close their
// sessions; it returns when the run ended.
func (r *faultRun) stopFleet(t *testing.T) time.Time {
	h, fleet := r.h, r.fleet
	close(r.stop)
	select {
	case <-r.done:
	case <-time.After(h.times.Drain):
		t.Errorf("fleet did not finish its sessions within %v of the stop", h.times.Drain)
		if faultExplainStuck(t, fleet) {
			// What the forker's requests wait on: its goroutines, in its
			// log (SIGQUIT; it is not needed by the checks below).
			if p := h.svcs["forker"]; p != nil && p.proc.running() {
				_ = p.proc.cmd.Process.Signal(syscall.SIGQUIT)
				select {
				case <-p.proc.done:
				case <-time.After(5 * time.Second):
				}
				t.Logf("STUCK forks: the forker's goroutines are in forker.log (SESSIONLOG_FAULTS_KEEP keeps it)")
			}
		}
		r.cancel()
		<-r.done
	}
	return time.Now()
}

// faultExplainStuck prints what the agents that did not finish were
// waiting for: their appends still without an outcome, and what each
// send of them was answered.
func faultExplainStuck(t *testing.T, fleet *faultFleet) (forks bool) {
	t.Helper()
	fleet.mu.Lock()
	defer fleet.mu.Unlock()
	for _, b := range fleet.batches {
		if b.Outcome == "" {
			t.Logf("STUCK agent %d %s expected %d %v: attempts %s", b.Agent, b.Session, b.ExpectedSeq, b.Types, faultAttempts(b))
		}
	}
	for _, f := range fleet.forks {
		if f.Result != "ok" && len(f.Attempts) > 0 && time.Since(f.Attempts[len(f.Attempts)-1].End) < 15*time.Second {
			t.Logf("STUCK agent %d fork %s of %s: attempts %s", f.Agent, f.Child, f.Parent, faultForkAttempts(f))
			forks = true
		}
	}
	return forks
}

// faultAssert fails the test on every broken guarantee.
func faultAssert(t *testing.T, rep *faultReport) {
	t.Helper()
	for _, p := range rep.Problems {
		t.Errorf("checker: %s", p)
	}
	if !rep.OK() {
		t.Errorf("checker: guarantees broken: %s", rep)
	}
}

// faultReportRun prints a FAULT line per window and the run's total,
// CHECK and ATTEMPTS.
func faultReportRun(t *testing.T, fleet *faultFleet, rep *faultReport, windows []faultWindow, calm time.Duration, runStart, runEnd time.Time) {
	t.Helper()
	sort.Slice(fleet.oks, func(i, j int) bool { return fleet.oks[i].T.Before(fleet.oks[j].T) })
	for _, w := range windows {
		// The aftermath (clients backing off, caches refilling) belongs
		// to the fault: measure until the calm period after it ended.
		w.End = w.End.Add(calm)
		d, acked := faultUnavailable(fleet.oks, w)
		detail := ""
		if w.Detail != "" {
			detail = " " + w.Detail
		}
		t.Logf("FAULT name=%s unavailable_ms=%d acked=%d lost=%d dups=%d gaps=%d window_ms=%d worst_agent_ms=%d%s",
			w.Name, d.Milliseconds(), acked, rep.Lost, rep.Dups, rep.Gaps, w.End.Sub(w.Start).Milliseconds(), faultWorstAgent(fleet.oks, w).Milliseconds(), detail)
	}
	d, acked := faultUnavailable(fleet.oks, faultWindow{Name: "run", Start: runStart, End: runEnd})
	t.Logf("FAULT name=total unavailable_ms=%d acked=%d lost=%d dups=%d gaps=%d events=%d duration_ms=%d",
		d.Milliseconds(), acked, rep.Lost, rep.Dups, rep.Gaps, fleet.events, runEnd.Sub(runStart).Milliseconds())
	t.Logf("CHECK %s", rep)
	t.Logf("ATTEMPTS %s", faultAttemptStats(fleet.batches))
	t.Logf("ANOMALY duplicate_on_first_send=%d", len(fleet.dupFirst))
	for i, d := range fleet.dupFirst {
		if i < 10 {
			t.Logf("ANOMALY duplicate reply to a first send: %s", d)
		}
	}
	faultExplainLive(t, fleet, rep)
}

// faultVerify waits for the repairer to repair the abandoned sessions
// (strict: a test failure if it does not within the wait; else the
// checker says which were not), dumps the streams and runs the checker.
func faultVerify(t *testing.T, h *faultHarness, st *logstore.Store, fleet *faultFleet, strict bool) (*faultReport, map[string][]faultStored, []string) {
	t.Helper()
	var abandoned []string
	for id, rec := range fleet.sessions {
		if rec.Abandoned {
			abandoned = append(abandoned, id)
		}
	}
	wait := h.times.LeaseTTL + h.times.Grace + h.times.Sweep + 30*time.Second
	if faultHasRole("repairer") {
		check := func(t *testing.T, total, every time.Duration, f func() error) {
			natstest.CheckFor(t, total, every, f)
		}
		if !strict {
			check = faultWaitFor
		}
		check(t, wait, 250*time.Millisecond, func() error {
			// A repair ends with session/paused: the tail's type says it.
			for _, id := range abandoned {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				tail, err := st.Tail(ctx, id)
				var m *logstore.Msg
				if err == nil {
					loc, _ := st.Locate(id)
					m, err = st.MsgAt(ctx, loc.Stream, tail.StreamSeq)
				}
				cancel()
				if err != nil {
					return err
				}
				if m == nil || m.Header.Get(logstore.HeaderType) != "session/paused" {
					// What the repairer sees of it: its lease and claim.
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					rec, lerr := st.LeaseRecord(ctx, id)
					claim, cerr := st.ClaimRevision(ctx, id)
					cancel()
					return fmt.Errorf("abandoned session %s not repaired yet (tail %d %s; lease %+v rev %d err %v; claim rev %d err %v)",
						id, tail.Seq, m.Header.Get(logstore.HeaderType), rec.Lease, rec.Revision, lerr, claim, cerr)
				}
			}
			return nil
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stored, n, problems, err := faultDumpAll(ctx, h.c.js, h.c.streams)
	if err != nil {
		t.Fatalf("dump: %v", err)
	}
	t.Logf("stream: %d messages, %d sessions", n, len(stored))
	if !faultHasRole("repairer") {
		for _, rec := range fleet.sessions {
			rec.Abandoned = false
		}
	}
	rep := faultCheck(stored, fleet.batches, fleet.forks, fleet.sessions, problems)
	faultExplain(t, h.dir, rep.Problems, stored)
	return rep, stored, problems
}

// faultWaitFor is natstest.CheckFor that logs instead of failing when f
// still fails at the end.
func faultWaitFor(t *testing.T, total, every time.Duration, f func() error) {
	t.Helper()
	var err error
	for end := time.Now().Add(total); time.Now().Before(end); time.Sleep(every) {
		if err = f(); err == nil {
			return
		}
	}
	t.Logf("after %v: %v", total, err)
}

// faultVerifyProjections waits until the projector (killed and restarted
// during the run) shows every session at its stored last seq, then stops
// it and compares its Pebble views with a clean rebuild of the same
// stream prefix (projector.Verify: stored, scanned and rebuilt checksums).
func faultVerifyProjections(t *testing.T, h *faultHarness, st *logstore.Store, stored map[string][]faultStored) {
	t.Helper()
	p := h.svcs["projector"]
	faultProjectorCaughtUp(t, p.spec.HTTPAddr, stored)
	if err := p.proc.stop(30 * time.Second); err != nil {
		t.Errorf("projector stop: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := projector.Verify(ctx, st, p.spec.DataDir, filepath.Join(h.dir, "projector-rebuild"), nil)
	if err != nil {
		t.Errorf("projector verify: %v", err)
		return
	}
	t.Logf("PROJECTION stored=%016x scanned=%016x rebuilt=%016x keys=%d ok=%v", res.Stored, res.Scanned, res.Rebuilt, res.Keys, res.OK())
	if !res.OK() {
		t.Errorf("projection checksums differ: stored %x, scanned %x, clean rebuild %x", res.Stored, res.Scanned, res.Rebuilt)
		faultDiffViews(t, p.spec.DataDir, filepath.Join(h.dir, "projector-rebuild"))
	}
}

// faultDiffViews logs the first keys whose values differ between the
// projector's store and the clean rebuild: what the checksums do not say.
func faultDiffViews(t *testing.T, dir, rebuilt string) {
	t.Helper()
	read := func(d string) map[string]string {
		db, err := store.Open(d, store.Options{})
		if err != nil {
			t.Logf("DIFF open %s: %v", d, err)
			return nil
		}
		defer db.Close()
		it, err := db.Iter(nil)
		if err != nil {
			t.Logf("DIFF iter %s: %v", d, err)
			return nil
		}
		defer it.Close()
		kv := map[string]string{}
		for ok := it.First(); ok; ok = it.Next() {
			kv[string(it.Key())] = string(it.Value())
		}
		return kv
	}
	a, b := read(dir), read(rebuilt)
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	short := func(v string, ok bool) string {
		if !ok {
			return "(none)"
		}
		if len(v) > 400 {
			v = v[:400] + "…"
		}
		return strconv.Quote(v)
	}
	n := 0
	for _, k := range keys {
		va, oka := a[k]
		vb, okb := b[k]
		if oka == okb && va == vb {
			continue
		}
		if n++; n > 20 {
			break
		}
		t.Logf("DIFF %q\n  projector: %s\n  rebuild:   %s", k, short(va, oka), short(vb, okb))
	}
}

// faultProjectorCaughtUp waits until the projector at addr shows every
// stored session at its stored last seq.
func faultProjectorCaughtUp(t *testing.T, addr string, stored map[string][]faultStored) {
	t.Helper()
	cl := http.Client{Timeout: 5 * time.Second}
	ids := make([]string, 0, len(stored))
	for id := range stored {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	pending := ids
	bodies := map[string]string{}
	check := func() error {
		var still []string
		for _, id := range pending {
			resp, err := cl.Get("http://" + addr + "/v1/sessions/" + id)
			if err != nil {
				return err
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			var sum struct {
				LastSeq uint64 `json:"lastSeq"`
			}
			if err == nil {
				err = json.Unmarshal(body, &sum)
			}
			if err != nil || resp.StatusCode != http.StatusOK || sum.LastSeq != uint64(len(stored[id])) {
				still = append(still, id)
				bodies[id] = fmt.Sprintf("%d %s", resp.StatusCode, body)
			}
		}
		pending = still
		if len(still) > 0 {
			return fmt.Errorf("projector behind on %d sessions (e.g. %s)", len(still), still[0])
		}
		return nil
	}
	var err error
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if err = check(); err == nil {
			return
		}
	}
	// What the projector shows of the sessions it is behind on, against
	// where they are stored, and what its metrics say of its consumers.
	for i, id := range pending {
		if i == 5 {
			break
		}
		evs := stored[id]
		last := evs[len(evs)-1]
		t.Logf("BEHIND %s: stored %d events, last at stream seq %d; projector: %s", id, len(evs), last.StreamSeq, bodies[id])
	}
	if resp, err := cl.Get("http://" + addr + "/metrics"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for line := range strings.Lines(string(body)) {
			if strings.HasPrefix(line, "sessionlog_projector_") && !strings.Contains(line, "_bucket") {
				t.Logf("METRIC %s", strings.TrimSpace(line))
			}
		}
	}
	t.Fatalf("after 60s: %v", err)
}

func faultHasRole(role string) bool {
	for _, r := range faultRoles {
		if r == role {
			return true
		}
	}
	return false
}

// faultDumpLogs prints the tail of every child's log after a failure.
func faultDumpLogs(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		t.Logf("---- %s (tail)\n%s", filepath.Base(l), faultLogTail(l, 6000))
	}
}

// faultKeepLogs copies the children's logs to keep (a directory), for a
// run that must be read after its temporary directory is gone.
func faultKeepLogs(t *testing.T, dir, keep string) {
	if err := os.MkdirAll(keep, 0o755); err != nil {
		t.Logf("keep logs: %v", err)
		return
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil {
			_ = os.WriteFile(filepath.Join(keep, filepath.Base(l)), b, 0o644)
		}
	}
	t.Logf("logs kept in %s", keep)
}

// faultExplainLive prints, for sessions repaired under a live agent, what
// that agent was told around the repair: when its appends last committed
// and what the ones after were answered.
func faultExplainLive(t *testing.T, fleet *faultFleet, rep *faultReport) {
	t.Helper()
	n := 0
	for _, p := range rep.Problems {
		sid, rest, ok := strings.Cut(p, ":")
		if !ok || !strings.Contains(rest, "agent was alive") || n >= 10 {
			continue
		}
		n++
		var parts []string
		for _, b := range fleet.batches {
			if b.Session != sid {
				continue
			}
			for _, a := range b.Attempts {
				// When the call was sent, and how many requests it took.
				parts = append(parts, fmt.Sprintf("%s@%s(sent %s, %d sends)", a.Result, a.End.Format("15:04:05.000"), a.Start.Format("15:04:05.000"), a.Sends))
			}
		}
		if len(parts) > 6 {
			parts = parts[len(parts)-6:]
		}
		t.Logf("LIVE %s:%s; last answers %s", sid, rest, strings.Join(parts, " "))
	}
}

// faultExplain prints, for each session a problem names, its stored
// events and every line of the children's logs that mentions it: what a
// failure needs to be understood after the run's directory is gone.
func faultExplain(t *testing.T, dir string, problems []string, stored map[string][]faultStored) {
	t.Helper()
	seen := map[string]bool{}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, p := range problems {
		sid, _, ok := strings.Cut(p, ":")
		if !ok || seen[sid] || strings.ContainsAny(sid, " \t") {
			continue
		}
		seen[sid] = true
		if len(seen) > 5 {
			return
		}
		for _, s := range stored[sid] {
			t.Logf("EXPLAIN %s stored seq=%d stream_seq=%d type=%s event=%s synthetic=%v", sid, s.Env.Seq, s.StreamSeq, s.Env.Type, s.Env.EventID, s.Env.Synthetic)
		}
		for _, l := range logs {
			b, err := os.ReadFile(l)
			if err != nil {
				continue
			}
			n := 0
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, sid) && n < 80 {
					t.Logf("EXPLAIN %s %s", filepath.Base(l), line)
					n++
				}
			}
		}
	}
}

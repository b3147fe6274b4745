package faults

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

var faultSoak = flag.Bool("soak", false, "run the fault suite as a long soak (also SESSIONLOG_SOAK=1)")

// faultTimes are the durations of one run.
type faultTimes struct {
	Warmup, Calm, Partition time.Duration
	// Cycles repeats the fault schedule (soak).
	Cycles   int
	LeaseTTL time.Duration
	Grace    time.Duration
	Sweep    time.Duration
	Drain    time.Duration
}

func faultTimesFor(soak bool) faultTimes {
	ft := faultTimes{Warmup: 4 * time.Second, Calm: 2 * time.Second, Partition: 4 * time.Second, Cycles: 1,
		LeaseTTL: 8 * time.Second, Grace: time.Second, Sweep: 2 * time.Second, Drain: 45 * time.Second}
	if soak {
		ft.Cycles, ft.Calm, ft.Partition = 12, 10*time.Second, 10*time.Second
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
			return fmt.Errorf("%s exited: %v (log %s)", name, s.proc.err, filepath.Join(h.dir, name+".log"))
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
	w := faultWindow{Name: name, Start: time.Now()}
	do()
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
	h.t.Logf("fault %s: %v", name, w.End.Sub(w.Start).Round(time.Millisecond))
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

func TestFaultsCluster(t *testing.T) {
	soak := *faultSoak || os.Getenv("SESSIONLOG_SOAK") == "1"
	times := faultTimesFor(soak)
	dir := t.TempDir()
	h := &faultHarness{t: t, dir: dir, times: times, svcs: map[string]*faultSvc{}}
	h.c = newFaultCluster(t, dir)
	t.Cleanup(func() {
		for _, s := range h.svcs {
			s.proc.kill()
		}
		if t.Failed() {
			faultDumpLogs(t, dir)
		}
	})
	ctx := context.Background()
	// The harness provisions the R3 stream and buckets, as an operator
	// would before deploying the services.
	// The meta group learns of all peers shortly after it elects a
	// leader: until then R3 placement fails.
	var st *logstore.Store
	natstest.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		var err error
		st, err = logstore.Open(ctx, h.c.admin, logstore.Config{Replicas: faultNodes, LeaseTTL: times.LeaseTTL})
		return err
	})
	for _, role := range faultRoles {
		switch role {
		case "writer":
			h.addService(role, "writer-1", 0, "")
			h.addService(role, "writer-2", 1, "")
		default:
			h.addService(role, role, 2, filepath.Join(dir, role+"-data"))
		}
	}

	runStart := time.Now()
	fleet := newFaultFleet(faultFleetConfig{
		Agents: 32, URLs: h.c.URLsFrom, Reader: st,
		Abandon: 0.03, AbandonUntil: runStart.Add(times.Warmup + 20*time.Second),
		Seed: uint64(runStart.UnixNano()),
	})
	stop := make(chan struct{})
	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	done := make(chan struct{})
	go func() { fleet.Run(fctx, stop); close(done) }()

	time.Sleep(times.Warmup)
	for cycle := 0; cycle < times.Cycles; cycle++ {
		h.fault("leader_graceful", func() {
			l := h.c.StreamLeader(logstore.StreamName)
			if err := h.c.Stop(l); err != nil {
				t.Errorf("graceful stop: %v", err)
			}
			h.c.Start(l)
		})
		h.fault("node_kill", func() {
			l := h.c.StreamLeader(logstore.StreamName)
			h.c.Kill(l)
			h.waitLeaderElsewhere(logstore.StreamName, l, (l+1)%faultNodes)
			h.c.Start(l)
		})
		h.fault("partition", func() {
			l := h.c.StreamLeader(logstore.StreamName)
			h.c.Isolate(l)
			h.waitLeaderElsewhere(logstore.StreamName, l, (l+1)%faultNodes)
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
	close(stop)
	select {
	case <-done:
	case <-time.After(times.Drain):
		t.Errorf("fleet did not finish its sessions within %v of the stop", times.Drain)
		fcancel()
		<-done
	}
	runEnd := time.Now()

	rep := faultVerify(t, h, st, fleet)
	for _, e := range fleet.errs {
		t.Errorf("fleet: %s", e)
	}
	sort.Slice(fleet.oks, func(i, j int) bool { return fleet.oks[i].Before(fleet.oks[j]) })
	for _, w := range h.windows {
		d, acked := faultUnavailable(fleet.oks, w)
		t.Logf("FAULT name=%s unavailable_ms=%d acked=%d lost=%d dups=%d gaps=%d window_ms=%d",
			w.Name, d.Milliseconds(), acked, rep.Lost, rep.Dups, rep.Gaps, w.End.Sub(w.Start).Milliseconds())
	}
	d, acked := faultUnavailable(fleet.oks, faultWindow{Name: "run", Start: runStart, End: runEnd})
	t.Logf("FAULT name=total unavailable_ms=%d acked=%d lost=%d dups=%d gaps=%d events=%d duration_ms=%d",
		d.Milliseconds(), acked, rep.Lost, rep.Dups, rep.Gaps, fleet.events, runEnd.Sub(runStart).Milliseconds())
	t.Logf("CHECK %s", rep)
	t.Logf("ATTEMPTS %s", faultAttemptStats(fleet.batches))
	for _, p := range rep.Problems {
		t.Errorf("checker: %s", p)
	}
	if !rep.OK() {
		t.Errorf("checker: guarantees broken: %s", rep)
	}
}

// faultVerify waits for the repairs of abandoned sessions, then dumps the
// stream and runs the checker.
func faultVerify(t *testing.T, h *faultHarness, st *logstore.Store, fleet *faultFleet) *faultReport {
	t.Helper()
	var abandoned []string
	for id, rec := range fleet.sessions {
		if rec.Abandoned {
			abandoned = append(abandoned, id)
		}
	}
	wait := h.times.LeaseTTL + h.times.Grace + h.times.Sweep + 30*time.Second
	if faultHasRole("repairer") {
		natstest.CheckFor(t, wait, 250*time.Millisecond, func() error {
			for _, id := range abandoned {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				evs, _, err := st.ReadEvents(ctx, id, 0)
				cancel()
				if err != nil {
					return err
				}
				if n := len(evs); n == 0 || evs[n-1].Type != "session/paused" {
					return fmt.Errorf("abandoned session %s not repaired yet", id)
				}
			}
			return nil
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stored, n, problems, err := faultDump(ctx, h.c.js, logstore.StreamName)
	if err != nil {
		t.Fatalf("dump: %v", err)
	}
	t.Logf("stream: %d messages, %d sessions", n, len(stored))
	if !faultHasRole("repairer") {
		for _, rec := range fleet.sessions {
			rec.Abandoned = false
		}
	}
	return faultCheck(stored, fleet.batches, fleet.sessions, problems)
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
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		t.Logf("---- %s (tail)\n%s", filepath.Base(l), b)
	}
}

package repairer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The window rule on its own: an expiry inside an outage, or within a TTL
// after its end, counts from a TTL after the end; one before it, or after
// that, is left as it is; one inside the open outage cannot be dated.
func TestOutageExpiry(t *testing.T) {
	ttl := 10 * time.Second
	t0 := time.Unix(1_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	o := newOutages(ttl, time.Second)
	o.ok(srcProbe, at(0))
	o.fail(srcProbe, at(5)) // the last good probe was at 0
	if _, ongoing := o.expiry(at(3)); !ongoing {
		t.Fatal("an expiry inside the open outage is dated")
	}
	if got, ongoing := o.expiry(at(-1)); ongoing || !got.Equal(at(-1)) {
		t.Fatalf("an expiry before the outage: %v %v", got, ongoing)
	}
	if !o.park("s1", triggerExpiry) {
		t.Fatal("park during an outage")
	}
	w, parked, ended := o.ok(srcProbe, at(20))
	if !ended || !w.from.Equal(at(0)) || !w.to.Equal(at(20)) || parked["s1"] != triggerExpiry {
		t.Fatalf("end of the outage: %v %v %v", w, parked, ended)
	}
	for _, tc := range []struct{ exp, want float64 }{
		{-1, -1},                               // lapsed before: the holder had the log
		{0, 30}, {3, 30}, {20, 30}, {29.9, 30}, // inside, or within a TTL after the end
		{30, 30}, {31, 31}, // a holder that renewed after the recovery
	} {
		if got, ongoing := o.expiry(at(tc.exp)); ongoing || !got.Equal(at(tc.want)) {
			t.Errorf("expiry at %v: got %v (ongoing %v), want %v", tc.exp, got.Sub(t0).Seconds(), ongoing, tc.want)
		}
	}
	if o.park("s2", triggerExpiry) {
		t.Fatal("parked with no outage open")
	}
	// A leader change between two good probes is a window too, and an
	// expiry moved into a later window moves again.
	o.ok(srcProbe, at(29))
	o.blip(at(31))
	if got, _ := o.expiry(at(25)); !got.Equal(at(41)) {
		t.Fatalf("expiry moved by two windows: %v, want 41", got.Sub(t0).Seconds())
	}
	// Two sources: the outage ends when both are fine.
	o.ok(srcProbe, at(49))
	o.fail(srcWatch, at(50))
	o.fail(srcProbe, at(51))
	if _, _, ended := o.ok(srcProbe, at(52)); ended {
		t.Fatal("ended with the watch still broken")
	}
	if w, _, ended := o.ok(srcWatch, at(53)); !ended || !w.from.Equal(at(49)) {
		t.Fatalf("end with both fine: %v %v", w, ended)
	}

	// Two outages less than a TTL apart, the second long: a lease that
	// lapsed in the first and was moved into the second moves again, even
	// once the first ended longer ago than windows are kept.
	o = newOutages(ttl, time.Second)
	o.ok(srcProbe, at(0))
	o.fail(srcProbe, at(1))
	o.ok(srcProbe, at(10))
	o.fail(srcProbe, at(16)) // the last good probe was at 15
	if _, ongoing := o.expiry(at(5)); !ongoing {
		t.Fatal("an expiry moved into the open outage is dated")
	}
	o.ok(srcProbe, at(40))
	if got, ongoing := o.expiry(at(5)); ongoing || !got.Equal(at(50)) {
		t.Fatalf("expiry moved through two outages: %v (ongoing %v), want 50", got.Sub(t0).Seconds(), ongoing)
	}
}

// A process that starts knows nothing of the time before: every lease
// that lapsed before its start, however long ago, counts from a TTL after
// its first good probe (a partition may have let it lapse just before).
func TestOutageAtStartReachesBack(t *testing.T) {
	ttl := 10 * time.Second
	t0 := time.Unix(1_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	o := newOutages(ttl, time.Second)
	o.start(at(0))
	for _, exp := range []float64{-3600, -11, -1, 0.5} {
		if _, ongoing := o.expiry(at(exp)); !ongoing {
			t.Errorf("expiry at %v dated before the first probe", exp)
		}
	}
	if !o.park("s1", triggerSweep) {
		t.Fatal("park before the first probe")
	}
	if _, parked, ended := o.ok(srcProbe, at(1)); !ended || parked["s1"] != triggerSweep {
		t.Fatalf("first probe: ended %v parked %v", ended, parked)
	}
	for _, tc := range []struct{ exp, want float64 }{
		{-3600, 11}, {-11, 11}, {-1, 11}, {0.5, 11}, {10.9, 11}, // lapsed before the start, or within a TTL after the first probe
		{11, 11}, {12, 12}, // renewed after it
	} {
		if got, ongoing := o.expiry(at(tc.exp)); ongoing || !got.Equal(at(tc.want)) {
			t.Errorf("expiry at %v: got %v (ongoing %v), want %v", tc.exp, got.Sub(t0).Seconds(), ongoing, tc.want)
		}
	}
}

// The server is down for longer than the lease TTL while two holders keep
// their sessions open. The one that renews again within a TTL of the
// recovery (not at once: its own retry pacing) keeps its session; the one
// that died with the server is repaired after its TTL and grace.
func TestOutageLongerThanTTL(t *testing.T) {
	dir := t.TempDir()
	port, err := natstest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	opts := natstest.Options(dir)
	opts.Port = port
	var mu sync.Mutex
	srv, err := natstest.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	connect := func() *nats.Conn {
		nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
			nats.RetryOnFailedConnect(true), nats.Timeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	open := func(nc *nats.Conn) *logstore.Store {
		st, err := logstore.Open(context.Background(), nc, logstore.Config{LeaseTTL: testTTL, RequestTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	e := &env{t: t, nc: connect()}
	e.store = open(e.nc)
	agents := open(connect()) // the holders renew on a connection of their own
	for _, id := range []string{"s-live", "s-dead"} {
		e.appendEvents(id, evCreated, evTurn, evRequested, evStarted)
	}
	e.claim("s-live", "agent-live")
	e.claim("s-dead", "agent-dead")
	r := e.start(Config{Grace: testGrace, SweepInterval: 200 * time.Millisecond})

	// Each agent renews every TTL/4, trying on through the outage. The
	// dead one stops when the server goes; the live one, once the server
	// is back, waits half a TTL before it renews (notBefore).
	var dead atomic.Bool
	var notBefore atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	renewed := make(chan string, 64)
	for _, a := range []struct{ id, holder string }{{"s-live", "agent-live"}, {"s-dead", "agent-dead"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if a.id == "s-dead" && dead.Load() {
					return
				}
				if time.Now().UnixNano() >= notBefore.Load() {
					rctx, rcancel := context.WithTimeout(ctx, testTTL/4)
					if agents.TakeLease(rctx, a.id, a.holder, time.Now(), false) == nil {
						select {
						case renewed <- a.id:
						default:
						}
					}
					rcancel()
				}
				select {
				case <-ctx.Done():
				case <-time.After(testTTL / 4):
				}
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	// Both sessions stay leased well past the TTL while the log runs.
	time.Sleep(2 * testTTL)
	for _, id := range []string{"s-live", "s-dead"} {
		if n := e.repairs(id); n != 0 {
			t.Fatalf("%s repaired while its holder renewed", id)
		}
	}

	// The outage: longer than TTL + grace.
	dead.Store(true)
	notBefore.Store(time.Now().Add(time.Hour).UnixNano())
	mu.Lock()
	srv.Shutdown()
	srv.WaitForShutdown()
	mu.Unlock()
	for len(renewed) > 0 {
		<-renewed // renewals from before the outage
	}
	time.Sleep(2*testTTL + testGrace)
	back := time.Now() // no probe can pass before this
	mu.Lock()
	srv, err = natstest.Start(opts.Clone())
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	notBefore.Store(time.Now().Add(testTTL / 2).UnixNano())

	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		if n := e.repairs("s-dead"); n != 1 {
			return fmt.Errorf("s-dead: %d repairs", n)
		}
		return nil
	})
	took := time.Since(back)
	t.Logf("the dead holder's session was repaired %v after the server came back", took.Round(time.Millisecond))
	if took < testTTL+testGrace {
		t.Errorf("s-dead repaired %v after the recovery, before TTL %v + grace %v", took, testTTL, testGrace)
	}
	// The live holder renewed after the recovery, within its TTL.
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		for {
			select {
			case id := <-renewed:
				if id == "s-live" {
					return nil
				}
			default:
				return errors.New("the live holder has not renewed since the recovery")
			}
		}
	})
	// Give the repairer every chance: another TTL + grace and sweeps.
	time.Sleep(testTTL + testGrace + 2*200*time.Millisecond)
	if n := e.repairs("s-live"); n != 0 {
		t.Fatalf("s-live: repaired %d times though its holder renewed within a TTL of the recovery", n)
	}
	if got := counter(t, r.svc.m.outages); got < 1 {
		t.Fatalf("outages metric %v", got)
	}
}

// Only failures to reach the log open an outage: a session that keeps
// failing for its own reasons must not hold back every other repair.
func TestOutageOnlyFromReachingTheLog(t *testing.T) {
	m, err := newMetrics(nil, func() float64 { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{out: newOutages(testTTL, testGrace), m: m, log: slog.New(slog.DiscardHandler), now: time.Now}
	for _, err := range []error{
		schema.Errorf(schema.CodeUnreadable, "session s at stream seq 3: not an event"),
		errors.New("repairer: s folded to seq 3 but the tail is seq 4"),
		logstore.ErrConflict,
	} {
		s.noteFailure(err)
		if got := counter(t, m.outages); got != 0 {
			t.Fatalf("%v opened an outage", err)
		}
	}
	s.noteFailure(fmt.Errorf("logstore: lease record s: %w", context.DeadlineExceeded))
	if got := counter(t, m.outages); got != 1 {
		t.Fatalf("a timeout reaching the log: %v outages, want 1", got)
	}
}

// slowProbe stands in for the writability probe of r: it never answers
// in time. It returns how many probes ran out of time so far.
func slowProbe(r *running) func() int32 {
	var n atomic.Int32
	probe := func(ctx context.Context) ([]string, error) {
		<-ctx.Done()
		n.Add(1)
		return nil, fmt.Errorf("logstore: KV_SESSION_CLAIMS: %w", ctx.Err())
	}
	r.svc.probeHook.Store(&probe)
	return n.Load
}

// outageOpen reports whether r counts the log as unable to take writes now.
func outageOpen(r *running) bool {
	_, ongoing := r.svc.out.expiry(time.Now())
	return ongoing
}

func waitNoOutage(t *testing.T, r *running) {
	t.Helper()
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if outageOpen(r) {
			return errors.New("the repairer counts an outage")
		}
		return nil
	})
}

// A probe that gets no answer in time while the log answers the
// repairer's own reads and writes is a loaded server, not an outage: it
// must not give every lease lapsing meanwhile another TTL.
func TestSlowProbeWhileTheLogAnswers(t *testing.T) {
	e := newEnv(t)
	e.appendEvents("s-busy", evCreated)
	r := e.start(Config{Grace: testGrace, SweepInterval: -1})
	waitNoOutage(t, r) // the start's outage ends at the first good probe
	probes := slowProbe(r)
	for probes() < 3 {
		// The repairer's own reads: the lease, the claim, the session.
		if _, err := r.svc.Repair(context.Background(), "s-busy", false); err != nil {
			t.Fatal(err)
		}
	}
	if got := counter(t, r.svc.m.outages); got != 0 {
		t.Fatalf("%v outages counted from slow probes while the log answered", got)
	}
	if outageOpen(r) {
		t.Fatal("an outage is open after slow probes while the log answered")
	}
	if got := counter(t, r.svc.m.slowProbes); got < 2 {
		t.Fatalf("slow probes metric %v, want >= 2", got)
	}
}

// A probe that gets no answer in time while nothing else of the log
// answers the repairer, or only some of the streams it asks about do, is
// an outage, and ends at the next good probe.
func TestSlowProbeAloneIsAnOutage(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func(r *running) // the repairer's own reads meanwhile
	}{
		{"NothingAnswers", func(*running) {}},
		{"OnlyTheLeasesAnswer", func(r *running) {
			_, err := r.svc.st.LeaseRecord(context.Background(), "s-none")
			if r.svc.heard(fromLeases, err) != nil {
				t.Error(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			r := e.start(Config{Grace: testGrace, SweepInterval: -1})
			waitNoOutage(t, r)
			slowProbe(r)
			natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
				tc.read(r)
				if got := counter(t, r.svc.m.outages); got < 1 || !outageOpen(r) {
					return fmt.Errorf("no outage counted (%v) from a probe unanswered", got)
				}
				return nil
			})
			r.svc.probeHook.Store(nil)
			waitNoOutage(t, r)
		})
	}
}

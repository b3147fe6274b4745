package repairer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/natstest"
)

// A holder that only heartbeats, and whose renewal lands after the
// repairer read its lapsed lease but before the repair commits, keeps its
// session: the repairer ends the lease only if its key is still at the
// revision it read, so the renewal makes the repair stop and look again.
// Once the holder stops for good, its session is repaired.
func TestRenewalBeforeCommitWins(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{Grace: testGrace, SweepInterval: -1})
	const id = "s-hb"
	live, repaired := r.svc.m.checks.WithLabelValues("live"), r.svc.m.checks.WithLabelValues("repaired")
	var (
		once      sync.Once
		mu        sync.Mutex
		renewedAt time.Time
		liveAt    float64
		herr      error
	)
	hook := func(got string) {
		if got != id {
			return
		}
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			liveAt = counter(t, live)
			renewedAt = time.Now()
			herr = e.store.RenewLease(context.Background(), id, "agent", renewedAt)
		})
	}
	r.svc.beforeAppend.Store(&hook)
	e.appendEvents(id, evCreated, evTurn, evRequested, evStarted)
	e.claim(id, "agent")
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if renewedAt.IsZero() {
			return fmt.Errorf("no repair planned yet")
		}
		if counter(t, live) <= liveAt && counter(t, repaired) == 0 {
			return fmt.Errorf("the evaluation that met the renewal has not ended")
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if herr != nil {
		t.Fatal(herr)
	}
	if n := e.repairs(id); n != 0 {
		t.Fatalf("the session was repaired (%d) though its holder renewed before the repair committed", n)
	}
	// The holder renews no more: its new lease lapses and the session is
	// repaired then, not before.
	natstest.CheckFor(t, liveness, 20*time.Millisecond, func() error {
		if !e.fold(id).Paused {
			return fmt.Errorf("not repaired")
		}
		return nil
	})
	if n := e.repairs(id); n != 1 {
		t.Fatalf("%d repairs, want 1", n)
	}
	evs, _, err := e.store.ReadEvents(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Synthetic && ev.Time.Before(renewedAt.Add(testTTL)) {
			t.Fatalf("repair event %s at %v, before the renewed lease ran out (%v)", ev.Type, ev.Time, renewedAt.Add(testTTL))
		}
	}
}

// An evaluation that ends without a repair because the session has no
// events, or because it cannot be read, leaves nothing of the session's
// lease behind (expiries, first looks).
func TestEvaluationsWithoutRepairForgetTheLease(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{Grace: testGrace, SweepInterval: -1})
	// Claimed, never written to: no_events.
	e.claim("empty-1", "agent")
	e.claim("empty-2", "agent")
	// Holds a message that is not an event of it: unreadable.
	e.appendEvents("bad-1", evCreated, evTurn, evRequested)
	e.publishAround("bad-1", []byte("\x00 not an event"), 0)
	e.claim("bad-1", "agent")
	s := r.svc
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if n := counter(t, s.m.checks.WithLabelValues("no_events")); n < 2 {
			return fmt.Errorf("no_events checks %v", n)
		}
		if n := counter(t, s.m.checks.WithLabelValues("unreadable")); n < 1 {
			return fmt.Errorf("unreadable checks %v", n)
		}
		return nil
	})
	natstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.expiries) > 0 || len(s.warm) > 0 {
			return fmt.Errorf("expiries %v, first looks %d after every evaluation ended", s.expiries, len(s.warm))
		}
		return nil
	})
}

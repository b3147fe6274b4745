package repairer

import (
	"fmt"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/natstest"
)

// Memory is bounded by what is active, not by how many sessions exist: a
// sweep that repairs many times more sessions than the state cache holds
// leaves at most the bound of folded states, and nothing per session in
// its queue, timers, locks or lease bookkeeping once they are repaired.
func TestSweepKeepsAtMostTheBound(t *testing.T) {
	const bound, sessions = 8, 120
	e := newEnv(t)
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("bound-%03d", i)
	}
	// Half are orphaned before the start (found by the sweep), half while
	// it runs (seen by the lease watch: renewed, then gone).
	e.orphans(ids[:sessions/2]...)
	r := e.start(Config{StateCacheSize: bound, SweepInterval: -1, SweepQueue: 16, Concurrency: 4})
	e.orphans(ids[sessions/2:]...)
	natstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		got := counter(t, r.svc.m.repaired.WithLabelValues(string(triggerSweep))) +
			counter(t, r.svc.m.repaired.WithLabelValues(string(triggerExpiry)))
		if got < sessions {
			return fmt.Errorf("%v of %d sessions repaired", got, sessions)
		}
		return nil
	})
	e.wantRepairedOnce(ids)

	s := r.svc
	if n := s.states.Len(); n > bound {
		t.Errorf("state cache holds %d sessions after %d, bound %d", n, sessions, bound)
	}
	// What is left of the last evaluations (a lock being released, a
	// wake-up set before the repair committed, which finds nothing to do)
	// goes within a TTL.
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		s.lmu.Lock()
		locks := len(s.locks)
		s.lmu.Unlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range []struct {
			name string
			n    int
		}{{"locks", locks}, {"queued", len(s.queued)}, {"urgent", len(s.urgent)}, {"sweep queue", len(s.sweepQ)},
			{"timers", len(s.timers)}, {"renewals", len(s.lastPut)}, {"expiries", len(s.expiries)}} {
			if c.n > 0 {
				return fmt.Errorf("%s holds %d sessions after every session was repaired", c.name, c.n)
			}
		}
		return nil
	})
}

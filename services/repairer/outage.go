package repairer

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Lease expiry after an outage (docs/adr/006-lease-expiry-after-outage.md).
//
// A holder renews its lease through the log: the writer renews after a
// committed append, a heartbeat writes the lease bucket. While the cluster
// cannot take writes, no holder can renew, and every lease that runs out
// meanwhile says nothing about its holder. The repairer therefore keeps
// the periods in which it saw the log unable to take writes, and a lease
// whose expiry falls within one, or within a TTL after its end, counts as
// expiring a full TTL after the recovery: the holder gets TTL + grace
// after the recovery to renew before its session is repaired.
//
// A period starts at the last moment this process knew the log writable
// (its last good probe) and ends at the first good probe after a failure.
// What opens one:
//   - a probe (every probeEvery) that finds a stream the holders need
//     (sessions, leases, claims) without a leader, without a quorum, or
//     does not get an answer, which also covers this process's own
//     disconnection; a probe that runs out of time while the session
//     stream and the lease and claim buckets each answer this process's
//     own reads and writes (heard) is slow, not failed: a
//     loaded server (a burst of repairs, a busy machine) answers a probe
//     of five stream infos late, and counting that as an outage gave every
//     lease lapsing meanwhile another TTL. It is neither a failure nor a
//     recovery: the next probe decides;
//   - a change of a stream's leader between two probes (the election in
//     between refused writes);
//   - a failed read or write of the repairer's own (not a definite answer
//     such as a lost sequence check);
//   - the lease watch breaking, until it runs again;
//   - the start of this process, until its first good probe: leases whose
//     markers the server writes on its own restart (a whole-cluster or
//     single-node restart) are dated at that restart.
//
// Nothing is persisted: a restarted repairer knows no earlier periods, so
// its start is one reaching back to before any lease it finds lapsed
// (beforeStart): the repair of a session found abandoned at the start
// waits TTL + grace after the first good probe, and a holder that lost
// its lease in an outage just before the restart still gets its TTL.

// Sources of an outage: each must be fine again for one to end.
const (
	srcProbe = "probe"
	srcWatch = "watch"
)

// outageWindow is one closed period: from the last moment the log was
// known writable to the first moment it was again.
type outageWindow struct{ from, to time.Time }

type outages struct {
	ttl time.Duration
	// keep: how long after its end a window can still move an expiry
	// that is not due yet.
	keep time.Duration

	mu      sync.Mutex
	lastOK  time.Time            // last moment every source was fine
	down    map[string]time.Time // failing sources, since when
	from    time.Time            // start of the current outage; zero when none
	windows []outageWindow       // closed, by from
	// parked: sessions whose expiry fell into the current outage, woken
	// when it ends.
	parked map[string]trigger
}

func newOutages(ttl, grace time.Duration) *outages {
	return &outages{ttl: ttl, keep: 2*ttl + grace, down: map[string]time.Time{}, parked: map[string]trigger{}}
}

// beforeStart is where the outage a process starts in begins: it knows
// nothing of the log before its start, so a lease that lapsed at any time
// before it may have lapsed in an outage it did not see (a repairer
// restarted a few seconds after a partition healed found the leases the
// partition let lapse, and repaired a holder that was about to renew).
var beforeStart = time.Unix(0, 0)

// start opens the outage that lasts until the first good probe: until then
// nothing is known of the log, and nothing before it either, so every
// lease found lapsed counts from a TTL after that probe.
func (o *outages) start(now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lastOK = now
	o.down[srcProbe] = now
	if o.from.IsZero() {
		o.from = beforeStart
	}
}

// fail marks src failing at now; it reports whether an outage began.
func (o *outages) fail(src string, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.down[src]; !ok {
		o.down[src] = now
	}
	if !o.from.IsZero() {
		return false
	}
	o.from = o.lastOK
	return true
}

// ok marks src fine at now. When that ends the outage it returns the
// closed window and the sessions parked during it.
func (o *outages) ok(src string, now time.Time) (w outageWindow, parked map[string]trigger, ended bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.down, src)
	if len(o.down) > 0 {
		return w, nil, false
	}
	o.lastOK = now
	if o.from.IsZero() {
		return w, nil, false
	}
	w = outageWindow{from: o.from, to: now}
	o.from = time.Time{}
	o.addLocked(w, now)
	parked, o.parked = o.parked, map[string]trigger{}
	return w, parked, true
}

// blip records a closed window that no probe saw open: a leader changed
// between two good probes.
func (o *outages) blip(now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.from.IsZero() {
		return // the open outage covers it
	}
	o.addLocked(outageWindow{from: o.lastOK, to: now}, now)
}

func (o *outages) addLocked(w outageWindow, now time.Time) {
	// A window that starts less than a TTL after the previous one ends
	// joins it: an expiry the first moves lands in the second and moves
	// again, exactly as if they were one. Merged, a window is independent
	// of the others and can be forgotten once it can no longer move an
	// expiry not yet due.
	if n := len(o.windows); n > 0 && w.from.Before(o.windows[n-1].to.Add(o.ttl)) {
		if w.to.After(o.windows[n-1].to) {
			o.windows[n-1].to = w.to
		}
	} else {
		o.windows = append(o.windows, w)
		sort.Slice(o.windows, func(a, b int) bool { return o.windows[a].from.Before(o.windows[b].from) })
	}
	i := 0
	for _, old := range o.windows {
		if now.Sub(old.to) <= o.keep {
			o.windows[i] = old
			i++
		}
	}
	o.windows = o.windows[:i]
}

// expiry returns when a lease that ran out at exp counts as expired: exp
// itself, or a TTL after the end of an outage it fell into (or a TTL
// after). ongoing: it fell into the outage still open, so it cannot be
// dated yet. A zero exp (unknown: long ago) is left as it is.
func (o *outages) expiry(exp time.Time) (at time.Time, ongoing bool) {
	if exp.IsZero() {
		return exp, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	at = exp
	for _, w := range o.windows {
		if !at.Before(w.from) && at.Before(w.to.Add(o.ttl)) {
			at = w.to.Add(o.ttl)
		}
	}
	return at, !o.from.IsZero() && !at.Before(o.from)
}

// park remembers a session to wake when the current outage ends. It
// reports false when none is open any more (the caller checks again).
func (o *outages) park(id string, why trigger) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.from.IsZero() {
		return false
	}
	if _, ok := o.parked[id]; !ok || why != triggerSweep {
		o.parked[id] = why
	}
	return true
}

// probeEvery is the interval of the writability probe: a sixteenth of the
// lease TTL, within [100ms, 2s], so an outage is seen well within a TTL.
func probeEvery(ttl time.Duration) time.Duration {
	return min(max(ttl/16, 100*time.Millisecond), 2*time.Second)
}

// probeTimeout bounds one probe; no answer within it is a failure.
func probeTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/8, 500*time.Millisecond), 2*time.Second)
}

// probeLoop asks the leaders of the streams holders write whether they
// can take writes, until ctx ends.
func (s *Service) probeLoop(ctx context.Context) {
	every, timeout := probeEvery(s.cfg.LeaseTTL), probeTimeout(s.cfg.LeaseTTL)
	var prev []string
	var degradedSince time.Time // since when a replica is not reached
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		began := s.heardClock()
		pctx, cancel := context.WithTimeout(ctx, timeout)
		leaders, err := s.writable(pctx)
		slow := err != nil && pctx.Err() != nil
		cancel()
		if ctx.Err() != nil {
			return
		}
		if slow && s.heardAllSince(began) {
			s.m.slowProbes.Inc()
			s.log.Debug("repairer: probe unanswered in time while the log answers this process; not an outage", "timeout", timeout, "err", err)
			t.Reset(every)
			continue
		}
		var deg *logstore.DegradedError
		if errors.As(err, &deg) {
			// Writable for the holders connected to the quorum, not for
			// those on the node cut off: an outage for them, for at most
			// maxDegraded (a node away that long is lost, and its
			// clients have moved to the others).
			if degradedSince.IsZero() {
				degradedSince = s.now()
			}
			if s.now().Sub(degradedSince) < maxDegraded(s.cfg.LeaseTTL) {
				s.outageFailed(srcProbe, err)
				prev = leaders
				t.Reset(every)
				continue
			}
			err = nil
		} else if err == nil {
			degradedSince = time.Time{}
		}
		if err != nil {
			s.outageFailed(srcProbe, err)
			prev = nil
		} else {
			if changed(prev, leaders) {
				s.out.blip(s.now())
				s.log.Info("repairer: a stream changed leader; leases that lapse around it get their TTL again", "leaders", leaders)
			}
			prev = leaders
			s.outageOK(srcProbe)
		}
		t.Reset(every)
	}
}

// writable is the probe: logstore.Writable, or the test's stand-in.
func (s *Service) writable(ctx context.Context) ([]string, error) {
	if hook := s.probeHook.Load(); hook != nil {
		return (*hook)(ctx)
	}
	return s.st.Writable(ctx)
}

// The streams a probe asks about, as heard tells them apart.
const (
	fromSessions = iota
	fromLeases
	fromClaims
	heardFrom // how many
)

// heard notes that stream from answered one of this process's own reads
// or writes: a success, or a definite answer about the session (a lost
// check, a lease written since). It returns err.
func (s *Service) heard(from int, err error) error {
	if err == nil || errors.Is(err, logstore.ErrLeaseChanged) || errors.Is(err, logstore.ErrConflict) {
		s.lastHeard[from].Store(int64(s.heardClock()))
	}
	return err
}

// heardClock is the monotonic time heard and heardAllSince compare.
func (s *Service) heardClock() time.Duration { return time.Since(s.born) }

// heardAllSince reports whether every stream a probe asks about answered
// this process at or after t (heardClock): only then is a probe that ran
// out of time a slow server rather than one stream that cannot answer.
func (s *Service) heardAllSince(t time.Duration) bool {
	for i := range s.lastHeard {
		if time.Duration(s.lastHeard[i].Load()) < t {
			return false
		}
	}
	return true
}

// maxDegraded is how long a replica that is not reached keeps the log in
// an outage for lease expiries: long enough for a partition to heal, short
// enough that a node lost for good does not hold back repairs for long.
func maxDegraded(ttl time.Duration) time.Duration { return 10 * ttl }

func changed(prev, cur []string) bool {
	if prev == nil || len(prev) != len(cur) {
		return false
	}
	for i := range prev {
		if prev[i] != cur[i] {
			return true
		}
	}
	return false
}

// outageFailed notes that src cannot reach a writable log.
func (s *Service) outageFailed(src string, err error) {
	if s.out.fail(src, s.now()) {
		s.m.outages.Inc()
		s.log.Warn("repairer: the log cannot take writes; leases that lapse now are not counted until it recovers", "source", src, "err", err)
	}
}

// outageOK notes that src is fine again; the end of an outage wakes the
// sessions parked during it when their holders' new TTL and the grace
// period have passed.
func (s *Service) outageOK(src string) {
	w, parked, ended := s.out.ok(src, s.now())
	if !ended {
		return
	}
	due := w.to.Add(s.cfg.LeaseTTL + s.cfg.Grace)
	if w.from.Equal(beforeStart) {
		s.log.Info("repairer: the log takes writes; leases that lapsed before this start count from now",
			"parked", len(parked), "repairable_after", due.Format(time.RFC3339Nano))
	} else {
		s.log.Info("repairer: the log takes writes again; leases that lapsed during the outage count from now",
			"outage", w.to.Sub(w.from).Round(time.Millisecond), "parked", len(parked), "repairable_after", due.Format(time.RFC3339Nano))
	}
	for id, why := range parked {
		s.wakeAt(id, due, why)
	}
}

// noteFailure counts an evaluation's failure as an outage when it is one
// of reaching the log (no answer, no responders, no leader), never when it
// is an answer about the session: a session that keeps failing for its
// own reasons must not hold back every other repair.
func (s *Service) noteFailure(err error) {
	switch {
	case logstore.Unreachable(err):
	case schema.CodeOf(err) == schema.CodeNotCommitted, schema.CodeOf(err) == schema.CodeOutcomeUnknown:
	default:
		return
	}
	s.outageFailed(srcProbe, err)
}

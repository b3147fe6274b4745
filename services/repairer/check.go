package repairer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// Outcome is what one repair did.
type Outcome struct {
	SessionID string
	// Repaired: the plan is committed (by this call, or already by
	// another replica: Duplicate).
	Repaired  bool
	Duplicate bool
	FirstSeq  uint64
	LastSeq   uint64
	Closed    []schema.Closed
}

// check evaluates one session for an automatic repair: claimed, lease gone
// for longer than the grace period, something open.
func (s *Service) check(ctx context.Context, id string, why trigger) {
	defer s.lock(id)()
	s.stage(id, StageStarted)
	first := true // the next reads are this evaluation's first
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			return
		}
		var (
			claim     uint64
			expiredAt time.Time
			leaseRev  uint64
			fold      foldFunc
		)
		if w, ok := s.takeWarm(id, why, attempt); ok {
			// Due after a first look: the lease's entry, the claim and the
			// state it read stand unless something changed since, and
			// whatever did fails the lease's end (a write to the key) or
			// the append's sequence check, and the session is read again.
			claim, expiredAt, leaseRev, fold = w.claim, w.expires, w.rev, w.fold
		} else {
			var done bool
			claim, expiredAt, leaseRev, fold, done = s.readDue(ctx, id, why, first)
			first = false
			if done {
				return
			}
			s.stage(id, StageRead)
		}
		var exp *time.Time
		if !expiredAt.IsZero() {
			exp = &expiredAt
		}
		out, err := s.repair(ctx, id, why, session.DefaultRepairReason, exp, fold, &leaseRev)
		if errors.Is(err, logstore.ErrLeaseChanged) || errors.Is(err, logstore.ErrConflict) {
			// The lease was written after it was read (renewed, taken, or
			// its marker came), or the session appended to: the holder
			// may be back. Evaluate again from the new state.
			if errors.Is(err, logstore.ErrConflict) {
				s.m.lost.Inc()
				s.log.Info("repair lost the sequence check; re-evaluating", "session", id, "attempt", attempt)
			}
			if attempt+1 >= maxConflicts {
				s.wakeAt(id, s.now().Add(s.cfg.Grace+retryBackoff), why)
				return
			}
			continue
		}
		if errors.Is(err, errNoSession) {
			s.m.checks.WithLabelValues("no_events").Inc()
			s.forgetExpiry(id)
			return
		}
		if err != nil {
			s.failed(ctx, id, why, "repair", err)
			return
		}
		if !out.Repaired {
			s.m.checks.WithLabelValues("nothing_open").Inc()
		} else {
			s.m.checks.WithLabelValues("repaired").Inc()
		}
		// The session is paused with nothing open (or never will be
		// repaired again): drop the claim unless the holder re-claimed it
		// meanwhile (the revision guard). A holder that comes back creates
		// a new lease and with it a new claim.
		if out.Repaired {
			s.dropClaim(ctx, id, claim)
		}
		s.forgetExpiry(id)
		return
	}
}

// foldFunc returns the state a plan is made from and the tail it is
// checked against.
type foldFunc func(s *Service, ctx context.Context, id string) (*session.State, logstore.Tail, error)

// readDue reads what an evaluation decides on: the lease, the claim and,
// for a lease seen to go (most likely due now), the session's state, all
// at once. A plan made from a state read before the lease is as safe as
// one read after: its append is checked against the tail that state was
// read at. done: the evaluation ended here (not due, not claimed, failed).
func (s *Service) readDue(ctx context.Context, id string, why trigger, first bool) (claim uint64, expiredAt time.Time, leaseRev uint64, fold foldFunc, done bool) {
	reads := s.startReads(ctx, id, why == triggerExpiry && first)
	rec, err := s.st.LeaseRecord(ctx, id)
	s.heard(fromLeases, err)
	claim, cerr := reads.claim()
	if err != nil {
		reads.wait()
		s.failed(ctx, id, why, "lease", err)
		return 0, time.Time{}, 0, nil, true
	}
	now := s.now()
	// A live entry whose TTL has run out on the leader is a lapsed lease
	// whose marker the server has not written yet (it lags by up to a few
	// hundred ms); a holder takes it as expired too
	// (logstore.HeldByOther). A renewal that came first is the leader's
	// last entry and keeps the lease live here.
	lapsed := rec.Live() && !rec.ExpiresAt().IsZero() && !now.Before(rec.ExpiresAt())
	if rec.Live() && !lapsed {
		reads.wait()
		// The watch will see the lease renewed (and re-arm the wake-up)
		// or go; a lease it saw no renewal of (taken before it ran) is
		// looked at again when its TTL and grace run out.
		if exp := rec.ExpiresAt(); !exp.IsZero() {
			if why == triggerExpiry && cerr == nil && claim != 0 {
				s.keepWarm(id, warmLook{rev: rec.Revision, stored: rec.Stored, expires: exp, claim: claim})
			}
			s.wakeAt(id, exp.Add(s.cfg.Grace), why)
		}
		s.m.checks.WithLabelValues("live").Inc()
		return 0, time.Time{}, 0, nil, true
	}
	if cerr != nil {
		reads.wait()
		s.failed(ctx, id, why, "claim", cerr)
		return 0, time.Time{}, 0, nil, true
	}
	if claim == 0 {
		reads.wait()
		// Never claimed (or repaired already): repaired only on demand.
		s.m.checks.WithLabelValues("unclaimed").Inc()
		s.forgetExpiry(id)
		return 0, time.Time{}, 0, nil, true
	}
	expiredAt = s.expiryOf(id, rec)
	if lapsed {
		expiredAt = rec.ExpiresAt()
	}
	if expiredAt.IsZero() && rec.Revision == 0 {
		// No lease record at all, though claimed: the claim is written
		// just before the lease, and a lease write that failed (its
		// bucket unavailable) leaves a claim alone while its holder goes
		// on and takes the lease at its next append or heartbeat. The
		// lease it could have had runs out a TTL after the claim.
		if at := reads.claimedAt(); !at.IsZero() {
			expiredAt = at.Add(s.cfg.LeaseTTL)
		}
	}
	// A lease that lapsed while the log could not take its renewal counts
	// from the recovery (outage.go).
	due, ongoing := s.out.expiry(expiredAt)
	if ongoing {
		reads.wait()
		if s.out.park(id, why) {
			s.m.checks.WithLabelValues("outage").Inc()
			return 0, time.Time{}, 0, nil, true
		}
		due, _ = s.out.expiry(expiredAt) // it ended meanwhile
	}
	if !due.IsZero() && now.Before(due.Add(s.cfg.Grace)) {
		reads.wait()
		if why == triggerExpiry {
			s.keepWarm(id, warmLook{rev: rec.Revision, stored: rec.Stored, expires: expiredAt, claim: claim})
		}
		s.wakeAt(id, due.Add(s.cfg.Grace), why)
		s.m.checks.WithLabelValues("grace").Inc()
		return 0, time.Time{}, 0, nil, true
	}
	return claim, expiredAt, rec.Revision, reads.folded, false
}

// warmLook is what the first look at a session before its lease's due
// time read: the lease key's last entry (a live one, or the expiry marker
// the watch saw written after it), when that entry's TTL ran out, and the
// claim. The session's state it read is in the state cache.
type warmLook struct {
	rev     uint64
	stored  time.Time // when the server stored the entry read
	expires time.Time
	claim   uint64
	epoch   int // the lease watch that ran when it was read
	fold    foldFunc
}

func (s *Service) keepWarm(id string, w warmLook) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopping {
		w.epoch = s.epoch
		s.warm[id] = w
	}
}

// takeWarm returns the first look of a session whose lease is due now,
// when it can stand in for reading the lease, the claim and the tail
// again: the expiry it read is not moved by an outage, and the session's
// state is cached. Any other evaluation drops it.
func (s *Service) takeWarm(id string, why trigger, attempt int) (warmLook, bool) {
	s.mu.Lock()
	w, ok := s.warm[id]
	delete(s.warm, id)
	s.mu.Unlock()
	if !ok || why != triggerExpiry || attempt > 0 {
		return warmLook{}, false
	}
	due, ongoing := s.out.expiry(w.expires)
	if ongoing || !due.Equal(w.expires) || s.now().Before(due.Add(s.cfg.Grace)) {
		return warmLook{}, false
	}
	c, ok := s.states.Get(id)
	if !ok || c.st.LastSeq == 0 {
		return warmLook{}, false
	}
	w.fold = func(*Service, context.Context, string) (*session.State, logstore.Tail, error) {
		return c.st, logstore.Tail{Seq: c.st.LastSeq, StreamSeq: c.streamSeq}, nil
	}
	return w, true
}

// reads are the reads of one evaluation that run beside its lease read.
type reads struct {
	claimC chan claimRead
	foldC  chan foldRead
}

type claimRead struct {
	rev uint64 // 0: no claim
	at  time.Time
	err error
}

type foldRead struct {
	st   *session.State
	tail logstore.Tail
	err  error
}

// startReads reads the session's claim and, if fold, its state, each on
// its own goroutine.
func (s *Service) startReads(ctx context.Context, id string, fold bool) *reads {
	r := &reads{claimC: make(chan claimRead, 1)}
	go func() {
		rev, at, err := s.st.ClaimEntry(ctx, id)
		s.heard(fromClaims, err)
		r.claimC <- claimRead{rev, at, err}
	}()
	if fold {
		r.foldC = make(chan foldRead, 1)
		go func() {
			st, tail, err := s.fold(ctx, id)
			r.foldC <- foldRead{st, tail, err}
		}()
	}
	return r
}

// claim returns the revision of the session's claim (0: none).
func (r *reads) claim() (uint64, error) {
	c := <-r.claimC
	r.claimC <- c
	return c.rev, c.err
}

// claimedAt is when the server stored the session's claim.
func (r *reads) claimedAt() time.Time {
	c := <-r.claimC
	r.claimC <- c
	return c.at
}

// folded returns the state read beside the lease, or folds now.
func (r *reads) folded(s *Service, ctx context.Context, id string) (*session.State, logstore.Tail, error) {
	if r.foldC == nil {
		return s.fold(ctx, id)
	}
	f := <-r.foldC
	r.foldC = nil
	return f.st, f.tail, f.err
}

// wait lets the reads finish (nothing of the session is read once its
// evaluation is over).
func (r *reads) wait() {
	r.claim()
	if r.foldC != nil {
		<-r.foldC
		r.foldC = nil
	}
}

func (s *Service) failed(ctx context.Context, id string, why trigger, op string, err error) {
	if ctx.Err() != nil {
		return
	}
	// The evaluation that follows reads the lease again and dates its
	// expiry from what it finds.
	s.forgetExpiry(id)
	if schema.CodeOf(err) == schema.CodeUnreadable {
		// The session holds a message that is not a valid event of it
		// (written around the writer, or by a newer version): no plan can
		// be made from it and retrying cannot help. Skipped, not retried:
		// sweeps look again (an operator may have erased it, a newer
		// reader may run).
		s.m.checks.WithLabelValues("unreadable").Inc()
		s.log.Warn("repairer: session unreadable; skipped", "session", id, "trigger", why, "op", op, "err", err)
		return
	}
	s.m.errors.Inc()
	s.noteFailure(err)
	s.log.Warn("repairer: evaluation failed; retrying later", "session", id, "op", op, "err", err)
	s.wakeAt(id, s.now().Add(retryBackoff), why)
}

// expiryOf is the best known time the lease went: the last renewal seen +
// TTL, or the time of its marker. Zero when unknown (the marker is gone:
// long ago).
func (s *Service) expiryOf(id string, rec logstore.LeaseRecord) time.Time {
	s.mu.Lock()
	at, ok := s.expiries[id]
	s.mu.Unlock()
	if rec.Revision == 0 {
		if ok {
			return at
		}
		return time.Time{}
	}
	if ok && !at.After(rec.Stored) {
		return at
	}
	return rec.Stored
}

// forgetExpiry drops what this process keeps of a session's lease once an
// evaluation ended it.
func (s *Service) forgetExpiry(id string) {
	s.mu.Lock()
	delete(s.expiries, id)
	delete(s.warm, id)
	s.mu.Unlock()
}

var errNoSession = schema.Errorf(schema.CodeNotFound, "session has no events")

// repair folds the session, plans and appends the plan in one batch with
// the per-subject check against the tail the plan was made from. With
// leaseRev it first ends the session's lease if its key is still at that
// revision (the one the decision to repair was made from): a holder that
// renewed since wins, and repair returns logstore.ErrLeaseChanged.
func (s *Service) repair(ctx context.Context, id string, why trigger, reason string, leaseExpiredAt *time.Time,
	fold foldFunc, leaseRev *uint64) (Outcome, error) {
	out := Outcome{SessionID: id, Closed: []schema.Closed{}}
	st, tail, err := fold(s, ctx, id)
	if err != nil {
		return out, err
	}
	if !tail.Exists() {
		return out, errNoSession
	}
	plan := session.PlanRepair(st, session.RepairOptions{
		KeepApprovalsPending: s.cfg.KeepApprovalsPending,
		Reason:               reason,
		LeaseExpiredAt:       leaseExpiredAt,
		Now:                  s.now(),
	})
	if plan == nil {
		return out, nil
	}
	if hook := s.beforeAppend.Load(); hook != nil {
		(*hook)(id)
	}
	s.stage(id, StageDecided)
	s.repairing.Add(1)
	defer s.repairing.Add(-1)
	if leaseRev != nil {
		if err := s.heard(fromLeases, s.st.EndLease(ctx, id, *leaseRev)); err != nil {
			return out, err
		}
		s.stage(id, StageEnded)
	}
	res, unsure, err := s.appendPlan(ctx, logstore.AppendRequest{SessionID: id, ExpectedStreamSeq: tail.StreamSeq, Events: plan})
	s.heard(fromSessions, err)
	s.stage(id, StageCommitted)
	if err != nil {
		if errors.Is(err, logstore.ErrConflict) {
			s.states.Remove(id)
		}
		return out, err
	}
	var applied schema.RepairApplied
	if err := plan[0].DecodeData(&applied); err == nil {
		out.Closed = applied.Closed
	}
	out.Repaired, out.Duplicate, out.FirstSeq, out.LastSeq = true, res.Duplicate, res.FirstSeq, res.LastSeq

	// Keep the repaired state so the next sweep reads nothing.
	next := st.Clone()
	ok := true
	for i := range plan {
		if err := next.Apply(&plan[i]); err != nil {
			ok = false
			break
		}
	}
	if ok {
		s.states.Add(id, folded{st: next, streamSeq: res.StreamSeq, hash: res.Hash})
	} else {
		s.states.Remove(id)
	}

	if (res.Resolved || (unsure && res.Duplicate)) && !s.stored(ctx, id, tail.StreamSeq, &plan[0]) {
		// The store resolved an unanswered attempt (its own, or a grouped
		// batch's) by finding the plan's event ids in place: they are
		// another replica's batch (same ids, its own time), not ours.
		res.Duplicate = true
	} else if unsure && res.Duplicate {
		// Our own grouped batch, whose answer was lost.
		res.Duplicate = false
	}
	if res.Duplicate {
		// Another replica (or an earlier attempt of ours whose answer was
		// lost) committed this very plan: it is counted there.
		s.m.duplicates.Inc()
		s.log.Info("repair already committed", "session", id, "firstSeq", res.FirstSeq, "lastSeq", res.LastSeq)
		return out, nil
	}
	s.usage.Count(logstore.UsageTenant(id), logstore.TenantUsage{Bytes: int64(res.Bytes)})
	s.m.repaired.WithLabelValues(string(why)).Inc()
	for _, c := range out.Closed {
		s.m.closers.WithLabelValues(c.Kind).Inc()
	}
	if leaseExpiredAt != nil {
		s.m.latency.Observe(s.now().Sub(*leaseExpiredAt).Seconds())
	}
	s.log.Info("session repaired", "session", id, "trigger", why, "firstSeq", res.FirstSeq, "lastSeq", res.LastSeq,
		"closed", len(out.Closed), "plannedAtSeq", tail.Seq)
	return out, nil
}

// fold returns the session's state as of the leader's tail, reading only
// what was appended since the cached state or, for a session not cached,
// since its snapshot (when it has one that matches the log). The
// returned state is shared: callers must not mutate it.
func (s *Service) fold(ctx context.Context, id string) (*session.State, logstore.Tail, error) {
	return s.foldFrom(ctx, id, !s.cfg.NoSnapshots)
}

// foldFrom is fold; snap: a session not cached starts from its snapshot.
func (s *Service) foldFrom(ctx context.Context, id string, snap bool) (*session.State, logstore.Tail, error) {
	o := logstore.FoldOptions{NoSnapshot: !snap}
	base, cached := s.states.Get(id)
	if cached {
		// What the cache holds was judged when read (and what a snapshot
		// holds by the writer that folded it): the judge goes on from its
		// last event, so every message after it is judged here. The
		// cached state is shared: the first event folds into a clone.
		o.From = &logstore.FoldStart{State: base.st, Shared: true,
			Last: logstore.Tail{Seq: base.st.LastSeq, StreamSeq: base.streamSeq, EventID: base.st.LastEventID, Hash: base.hash}}
	}
	f, err := logstore.FoldSession(ctx, s.st, id, o)
	s.snapshotOf(id, f.Snapshot)
	s.m.folded.Add(float64(f.Events))
	ok := cached || f.Snapshot.Use == logstore.SnapshotUsed
	if s.heard(fromSessions, err) != nil {
		s.states.Remove(id)
		return nil, f.Tail, err
	}
	if ok && f.Tail.StreamSeq < f.Start.StreamSeq {
		// The cache (or the snapshot) is ahead of the leader (cannot
		// happen on a log that never truncates): start over.
		s.states.Remove(id)
		return s.foldFrom(ctx, id, false)
	}
	if f.Events == 0 && ok {
		s.states.Add(id, folded{st: f.State, streamSeq: f.Start.StreamSeq, hash: f.Start.Hash})
		return f.State, f.Tail, nil
	}
	if f.State.LastSeq != f.Tail.Seq {
		s.states.Remove(id)
		return nil, f.Tail, fmt.Errorf("repairer: %s folded to seq %d but the tail is seq %d", id, f.State.LastSeq, f.Tail.Seq)
	}
	s.states.Add(id, folded{st: f.State, streamSeq: f.Tail.StreamSeq, hash: f.Tail.Hash})
	return f.State, f.Tail, nil
}

// snapshotOf counts what became of the snapshot of a session not cached
// (logstore.SnapshotFor, the writer's checks): one that does not match
// the log is ignored with a log line, and the session folded from its
// start.
func (s *Service) snapshotOf(id string, l logstore.SnapshotLoad) {
	switch l.Use {
	case logstore.SnapshotIgnored:
		s.m.snapLoads.WithLabelValues("ignored").Inc()
		s.log.Warn("repairer: snapshot ignored, folding the session from its start", "session", id, "err", l.Why)
	case logstore.SnapshotUsed:
		s.m.snapLoads.WithLabelValues("used").Inc()
	}
}

// Repair repairs a session on demand (sessions.api.repair). Without force
// a live lease is refused with conflict. A session that was never claimed
// is repaired too: on demand is the only way it ever is.
func (s *Service) Repair(ctx context.Context, id string, force bool) (Outcome, error) {
	if !schema.ValidSessionID(id) {
		return Outcome{}, schema.Errorf(schema.CodeBadRequest, "session id must match ^[A-Za-z0-9_-]{1,128}$")
	}
	defer s.lock(id)()
	for attempt := 0; ; attempt++ {
		rec, err := s.st.LeaseRecord(ctx, id)
		if s.heard(fromLeases, err) != nil {
			return Outcome{}, err
		}
		if rec.Live() && !force {
			return Outcome{}, schema.Errorf(schema.CodeConflict, "session %s is held by %q (lease renewed %s); repair it anyway with force (sessionlog repair --force, or force: true in sessions.api.repair)",
				id, rec.Lease.Holder, rec.Stored.UTC().Format(time.RFC3339Nano))
		}
		claim, err := s.st.ClaimRevision(ctx, id)
		if s.heard(fromClaims, err) != nil {
			return Outcome{}, err
		}
		var exp *time.Time
		reason := "repair requested"
		if rec.Live() {
			reason = "forced repair"
		} else if at := s.expiryOf(id, rec); !at.IsZero() {
			exp = &at
		}
		// A forced repair of a live lease leaves it (and the claim): the
		// holder's later death is still noticed.
		var leaseRev *uint64
		if !rec.Live() {
			leaseRev = &rec.Revision
		}
		out, err := s.repair(ctx, id, triggerDemand, reason, exp, (*Service).fold, leaseRev)
		if errors.Is(err, logstore.ErrLeaseChanged) && attempt+1 < maxConflicts {
			continue
		}
		if errors.Is(err, logstore.ErrConflict) && attempt+1 < maxConflicts {
			s.m.lost.Inc()
			continue
		}
		if errors.Is(err, errNoSession) {
			return out, schema.Errorf(schema.CodeNotFound, "session %s does not exist", id)
		}
		if err != nil {
			return out, err
		}
		if out.Repaired && !rec.Live() && claim != 0 {
			_ = s.st.DropClaim(ctx, id, claim)
			s.forgetExpiry(id)
		}
		return out, nil
	}
}

// stored reports whether the event after streamSeq is exactly first as
// this process encoded it. Replicas plan the same event ids for the same
// state, so an append whose answer was lost and then resolved by id cannot
// tell by itself whose batch it found; the event time (each planner's
// clock) can. When the check cannot be made, the repair counts as ours.
func (s *Service) stored(ctx context.Context, id string, streamSeq uint64, first *schema.Envelope) bool {
	ours, err := schema.Encode(first)
	if err != nil {
		return true
	}
	m, err := s.st.NextAfter(ctx, id, streamSeq)
	if err != nil || m == nil {
		return true
	}
	return bytes.Equal(m.Data, ours)
}

// Package repairer closes what dead agents left open (DESIGN.md section 6).
//
// A session is orphaned when it has open work, a holder once claimed it
// (SESSION_CLAIMS has its key) and its lease in SESSION_LEASES has been
// absent for longer than the grace period. The service learns of lease
// expiry by watching the lease bucket (the server writes a marker with
// Nats-Marker-Reason MaxAge when a per-key TTL runs out), waits out the
// grace period, and checks again from the stored state before it acts; it
// also sweeps every claimed session on start and periodically, so a
// restart misses nothing.
//
// The server writes those markers a few hundred ms after the TTL runs out,
// so the service does not wait for them: each renewal it sees arms the
// session's evaluation at that renewal's expiry plus the grace period (a
// later renewal moves it), with a first look shortly before. The first
// look reads the lease key's last entry from the bucket's leader, the
// claim and the session's state (kept in the cache): a live entry whose
// TTL has run out by then is a lapsed lease whose marker is still to come
// (holders take such a lease as expired too, logstore.HeldByOther); a
// renewal stored before that read is the last entry and keeps the session
// alone.
//
// Before a repair is appended, the lease is ended (logstore.EndLease: a
// delete of the key that expects the revision the decision was made from,
// the entry read or the marker the watch saw after it). A holder's
// renewal is a write expecting the revision it read, so the two are
// ordered by the bucket: a renewal stored first makes the end fail, and
// the session is evaluated again (its lease is live); one after the end
// takes a new lease and claim, as after any repair. Once due, an
// evaluation that follows a first look therefore reads nothing: the end
// of the lease checks that the lease was not written since, the append's
// sequence check that the state was not, and either failing sends it back
// to reading all three. A burst of leases lapsing together costs one lease
// write and a share of one grouped append per session when it is due; an
// evaluation whose repair waits for its group gives its slot to the next
// session due (pipeline.go), so the next group fills while one commits.
//
// A repair is the plan of session.PlanRepair appended as one atomic batch
// with the per-subject sequence check against the tail the plan was made
// from. If the holder appended in between, the batch loses the check and
// the session is evaluated again. The plan's event ids depend only on the
// session and the seq it was planned against, so any number of replicas
// may race: one batch commits, the others deduplicate into it or lose the
// check, and the state is never repaired twice. Repairs ready at the same
// time are committed together in one atomic batch of several sessions,
// each with its own check and ids (group.go); a group one of whose checks
// fails is appended session by session instead.
//
// After a committed automatic repair the session's claim is deleted
// (guarded by its revision), off the repair's path by one goroutine: the
// session is paused with nothing open, so sweeps need not visit it again,
// and a holder that comes back creates a new lease and with it a new
// claim. A forced repair of a session whose
// lease is live leaves the claim, so the holder's later death is still
// noticed.
//
// A lease that lapsed while the log could not take writes gets its TTL
// again from the recovery before it counts as expired
// (docs/adr/006-lease-expiry-after-outage.md). No holder can renew while
// the cluster cannot take writes, so such an expiry says nothing about the
// holder. The service keeps the periods it saw the log unable to take
// writes (outage.go): a probe every TTL/16 of the leaders of the session
// stream and the lease and claim buckets (no answer, no leader, no quorum;
// a probe unanswered in time while the session stream and both buckets
// answer the service's own reads and writes is a slow server, not an
// outage),
// a leader change between two probes, its own failed reads and writes, its
// lease watch breaking, and its own start until the first good probe. A
// lease whose expiry falls inside such a period, or within a TTL after its
// end, counts as expiring a TTL after the end: its holder gets a full TTL
// plus the grace period after the recovery to renew before the session is
// repaired. An expiry inside a period still open is not dated at all: the
// session waits for the recovery. Nothing is persisted; a restarted
// repairer knows only the periods since its start.
//
// The same plan is served on demand on sessions.api.repair (an operator's
// request: the outage rule does not apply to it).
package repairer

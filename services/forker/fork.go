package forker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// plan is one fork copy: everything needed to write (or finish writing)
// the child. It is also the value of the child's SESSION_FORKS record.
type plan struct {
	ChildID    string `json:"childId"`
	ParentID   string `json:"parentId"`
	SeedLength uint64 `json:"seedLength"`
	Depth      int    `json:"depth"`
	Workspace  string `json:"workspace"`
	// OpID scopes the child's event ids to this fork (see opID).
	OpID        string    `json:"opId"`
	StartedAt   time.Time `json:"startedAt"`
	HeartbeatAt time.Time `json:"heartbeatAt"`
	Owner       string    `json:"owner"`
	// ChildOwner is the agent that asked for the fork (ADR 010): it owns
	// the child. Nil when an operator asked: the child keeps the parent's
	// owner and grants.
	ChildOwner *schema.Owner `json:"childOwner,omitempty"`
	// copied: the bytes of the child's bodies this forker wrote (for the
	// tenant's usage; not recorded).
	copied int64
	// empty: this request found the child without events and wrote its
	// record, so the copy starts at seq 1 without reading the child first
	// (not recorded).
	empty bool
}

// opID names a fork by what it copies. The child's event ids are derived
// from it and the seq, so a retried batch, a retried request and a forker
// finishing a crashed copy all write the same ids (and deduplicate), while
// two different forks racing for one child id never share an id: the
// loser's first batch fails the sequence check and cannot be mistaken for
// a duplicate of the winner's.
func opID(child, parent string, seed uint64, workspace string) string {
	h := sha256.Sum256([]byte(child + "\x00" + parent + "\x00" + strconv.FormatUint(seed, 10) + "\x00" + workspace))
	return hex.EncodeToString(h[:8])
}

// eventID is the id of the child's event at seq.
func (p *plan) eventID(seq uint64) string {
	return "fork:" + p.OpID + ":" + strconv.FormatUint(seq, 10)
}

func (p *plan) ours(eventID string) bool {
	return strings.HasPrefix(eventID, "fork:"+p.OpID+":")
}

func (p *plan) reply() Reply {
	return Reply{ChildID: p.ChildID, ParentID: p.ParentID, SeedLength: p.SeedLength, Depth: p.Depth}
}

func badRequest(format string, args ...any) error {
	return schema.Errorf(schema.CodeBadRequest, format, args...)
}

// Fork resolves the request's cut on the parent and writes the child. It
// is what the endpoint runs; tests and benchmarks may call it directly.
func (s *Service) Fork(ctx context.Context, r Request) (rep Reply, err error) {
	return s.ForkAs(ctx, api.Caller{}, r)
}

// ForkAs is Fork for a requester the NATS server named: an agent forks
// only a session it owns or was granted, and owns the child.
func (s *Service) ForkAs(ctx context.Context, caller api.Caller, r Request) (rep Reply, err error) {
	start := time.Now()
	defer func() {
		code := "ok"
		if err != nil {
			code = string(schema.CodeOf(err))
		} else {
			s.m.duration.Observe(time.Since(start).Seconds())
		}
		s.m.forks.WithLabelValues(code).Inc()
	}()
	if s.bucket() == nil {
		return Reply{}, schema.Errorf(schema.CodeNotCommitted, "forker is not running")
	}
	if !caller.Operator() {
		// The stored ids of the sessions the agent names (the child's
		// made here when it names none), and its own in the reply.
		if r.ChildID == "" {
			r.ChildID = s.cfg.NewID()
		}
		if r.ParentID, err = caller.StoredID(r.ParentID); err != nil {
			return Reply{}, err
		}
		if r.ChildID, err = caller.StoredID(r.ChildID); err != nil {
			return Reply{}, err
		}
		defer func() { rep.ParentID, rep.ChildID = caller.WireID(rep.ParentID), caller.WireID(rep.ChildID) }()
	}
	cut, err := s.check(&r)
	if err != nil {
		return Reply{}, err
	}
	sc, err := s.resolve(ctx, caller, r.ParentID, cut)
	if err != nil {
		// Nothing is written before the parent is read. A parent erased
		// (its events gone, or going) is answered so, not as missing.
		return Reply{}, s.erasedOr(ctx, r.ParentID, r.ChildID, definite(schema.CodeNotCommitted, err))
	}
	if caller.Operator() {
		// An operator's child keeps the parent's owner: it must be of the
		// tenant the child's id names (ADR 010), or the child would be a
		// session none of its tenant's agents could use.
		if err := api.CheckOwner(r.ChildID, sc.owner); err != nil {
			msg := err.Error()
			if se := (*schema.Error)(nil); errors.As(err, &se) {
				msg = se.Message
			}
			return Reply{}, badRequest("child %s would keep parent %s's owner, as an operator's fork does: %s", r.ChildID, r.ParentID, msg)
		}
	}
	k, depth := sc.k, sc.depth
	scanned := time.Since(start)
	defer func() {
		if err == nil {
			s.log.Debug("fork timing", "child", r.ChildID, "seedLength", k, "scan", scanned, "copy", time.Since(start)-scanned)
		}
	}()
	now := s.cfg.Now().UTC()
	p := &plan{
		ChildID: r.ChildID, ParentID: r.ParentID, SeedLength: k, Depth: depth, Workspace: r.Workspace,
		OpID: opID(r.ChildID, r.ParentID, k, r.Workspace), StartedAt: now, HeartbeatAt: now, Owner: s.owner,
		ChildOwner: caller.Owner(),
	}
	s.step(StepScanned)
	// One fork into a child at a time in this process, from before its
	// record is claimed: a fork that dropped its record and has not
	// returned yet must not let another claim a record it then leaves.
	if !s.markInflight(p.ChildID) {
		return Reply{}, schema.Errorf(schema.CodeConflict, "child %s is being forked right now", p.ChildID)
	}
	defer s.doneInflight(p.ChildID)
	// A child id that holds another session (or another fork) is taken.
	// The same fork asked again (a retry) finds its own events and is
	// finished or answered as done.
	fresh, err := s.claimChild(ctx, p)
	if err != nil {
		// A child id being erased still holds events: erased, not taken.
		return Reply{}, s.erasedOr(ctx, p.ParentID, p.ChildID, err)
	}
	p.empty = fresh
	s.step(StepClaimed)
	// An erased id is never used again (DESIGN.md section 14); the
	// forker appends around the writer, so it checks itself. A parent
	// erased (or being erased) is not copied either. Asked once the
	// record is written (ADR 009, "Forks in flight"): a cascade erase of
	// the parent that did not see the record was marked before this read,
	// which sees it; one that comes later finds the record, erases the
	// child too and waits for this copy to end.
	if err := s.checkErased(ctx, p.ParentID, p.ChildID); err != nil {
		s.eraseRecord(p)
		return Reply{}, err
	}
	s.step(StepChecked)
	// A new child counts in its tenant's usage like a session the writer
	// creates: an agent's past the tenant's bounds is refused.
	tenant := logstore.UsageTenant(p.ChildID)
	reserved := false
	if fresh && !caller.Operator() {
		if reserved, err = s.reserveChild(ctx, tenant); err != nil {
			s.dropRecord(p)
			return Reply{}, err
		}
	}
	unreserve := func() {
		if reserved {
			s.countUsage(tenant, logstore.TenantUsage{Sessions: -1})
		}
	}
	s.m.inflight.Inc()
	defer s.m.inflight.Dec()
	err = s.finish(ctx, p, sc)
	// countChild counts a fresh child as stored: the bytes copied, and
	// the session unless reserved.
	countChild := func() {
		d := logstore.TenantUsage{Bytes: p.copied}
		if !reserved {
			d.Sessions = 1
		}
		s.countUsage(tenant, d)
	}
	// A fresh child this request copied is counted whatever its erasure
	// record says (below: an erased child's copy is counted too), so the
	// count (a read and a compare-and-set) runs while that record is read
	// and the fork's record dropped: two round trips before the reply,
	// not three. It ends before the reply.
	var counted sync.WaitGroup
	defer counted.Wait()
	counting := err == nil && fresh && p.copied > 0
	if counting {
		counted.Go(countChild)
	}
	s.step(StepCopied)
	// A cascade erase that found the record while the copy ran has
	// marked the child, and erases it once the record is dropped (ADR
	// 009, "Forks in flight"): whatever the copy came to, the caller
	// hears that, not of a child about to go. What was copied is counted,
	// as the eraser gives back what it deletes.
	if erased, cerr := s.erased(ctx, p.ChildID); cerr == nil && erased {
		switch {
		case counting:
		case fresh && p.copied > 0:
			countChild()
		default:
			unreserve()
		}
		s.eraseRecord(p)
		return Reply{}, schema.Errorf(schema.CodeErased, "session %s was erased while it was being forked; its child %s is erased with it", p.ParentID, p.ChildID)
	}
	if err != nil {
		if errors.Is(err, errNotOurs) {
			unreserve()
			s.dropRecord(p)
			return Reply{}, schema.Errorf(schema.CodeConflict, "child id %s is taken", p.ChildID)
		}
		var nw *nothingWritten
		if errors.As(err, &nw) {
			unreserve()
			s.dropRecord(p)
			return Reply{}, nw.err
		}
		var perm *permanentError
		if errors.As(err, &perm) {
			s.abandon(ctx, p, err)
			return Reply{}, perm.err
		}
		// The record stays: a sweep finishes the copy, and so does the
		// same request sent again.
		s.log.Warn("fork copy interrupted; a sweep will finish it", "child", p.ChildID, "parent", p.ParentID, "err", err)
		return Reply{}, definite(schema.CodeOutcomeUnknown, err)
	}
	// The record dropped and the child counted at once.
	if fresh && !counting {
		counted.Go(countChild)
	}
	s.dropRecord(p)
	return p.reply(), nil
}

// reserveChild counts the child an agent asks for in its tenant's usage,
// or refuses it quota_exceeded past the tenant's session bound or with
// its stored bytes at their bound (logstore.ReserveStored; the child's
// bytes are not known before the copy).
func (s *Service) reserveChild(ctx context.Context, tenant string) (bool, error) {
	return s.st.ReserveStored(ctx, tenant, 0, "no fork")
}

// countUsage adds d to the tenant's usage; a failure is logged (the count
// reads low).
func (s *Service) countUsage(tenant string, d logstore.TenantUsage) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.st.CountUsage(ctx, tenant, d); err != nil {
		s.log.Warn("forker: counting a child in its tenant's usage", "tenant", tenant, "sessions", d.Sessions, "bytes", d.Bytes, "err", err)
	}
}

// check validates the request and fills its defaults.
func (s *Service) check(r *Request) (session.Cut, error) {
	var cut session.Cut
	if r.ParentID == "" {
		return cut, badRequest("parentId is required")
	}
	if !schema.ValidSessionID(r.ParentID) {
		return cut, badRequest("parentId %q is not a valid session id", schema.Clip(r.ParentID, 40))
	}
	if r.ChildID == "" {
		// An operator's child keeps the parent's owner, so the id made
		// for it is of the parent's tenant (an agent's is made and
		// scoped before).
		r.ChildID = s.cfg.NewID()
		if t, ok := api.TenantOfStored(r.ParentID); ok && t != api.DefaultTenant {
			r.ChildID = api.TenantIDPrefix + t + "_" + r.ChildID
		}
	}
	if !schema.ValidSessionID(r.ChildID) {
		return cut, badRequest("childId %q is not a valid session id", schema.Clip(r.ChildID, 40))
	}
	if r.ChildID == r.ParentID {
		return cut, badRequest("childId must differ from parentId")
	}
	switch r.Workspace {
	case "":
		// Forking a conversation forks no files: the child shares the
		// parent's workspace unless the request says it needs its own.
		r.Workspace = schema.WorkspaceShared
	case schema.WorkspaceShared, schema.WorkspaceIsolated:
	default:
		return cut, badRequest("workspace must be %q or %q, got %q", schema.WorkspaceShared, schema.WorkspaceIsolated, schema.Clip(r.Workspace, 40))
	}
	if r.At != nil {
		if r.At.Seq != nil && r.At.TurnID != "" {
			return cut, badRequest("at is a seq or a turnId, not both")
		}
		if r.At.TurnID != "" && !schema.ValidItemID(r.At.TurnID) {
			return cut, badRequest("at.turnId %q is not a valid id", schema.Clip(r.At.TurnID, 40))
		}
		cut.Seq, cut.TurnID = r.At.Seq, r.At.TurnID
	}
	return cut, nil
}

// callTimeout bounds one call of a fork to the store that is not a read
// of a session (a leader read, a record write, an append): a reply lost
// with a paused or crashed node must not hold the fork's slot for its
// whole ForkTimeout. Session reads bound their own calls (logstore's
// readUpTo) and give up with logstore.ErrReadStalled.
func (s *Service) callTimeout() time.Duration { return 4 * s.st.Config().RequestTimeout }

// call is ctx bounded by callTimeout.
func (s *Service) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.callTimeout())
}

// step runs Config.Step, if set.
func (s *Service) step(name string) {
	if h := s.cfg.Step; h != nil {
		h(name)
	}
}

// checkErased refuses a fork whose parent or child id has an erasure
// record, asking both at once (one round trip, not two).
func (s *Service) checkErased(ctx context.Context, parent, child string) error {
	var parentErased bool
	var parentErr error
	var asked sync.WaitGroup
	asked.Go(func() { parentErased, parentErr = s.erased(ctx, parent) })
	childErased, childErr := s.erased(ctx, child)
	asked.Wait()
	if erased, err := childErased, childErr; err != nil {
		return schema.Errorf(schema.CodeNotCommitted, "fork: %v", err)
	} else if erased {
		return schema.Errorf(schema.CodeErased, "child id %s belonged to an erased session; use another id", child)
	}
	if erased, err := parentErased, parentErr; err != nil {
		return schema.Errorf(schema.CodeNotCommitted, "fork: %v", err)
	} else if erased {
		return schema.Errorf(schema.CodeErased, "session %s was erased", parent)
	}
	return nil
}

// erasedOr is err, or the erased answer when the parent or the child has
// an erasure record.
func (s *Service) erasedOr(ctx context.Context, parent, child string, err error) error {
	if eerr := s.checkErased(ctx, parent, child); schema.CodeOf(eerr) == schema.CodeErased {
		return eerr
	}
	return err
}

func (s *Service) erased(ctx context.Context, id string) (bool, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	return s.st.Erased(ctx, id)
}

// definite gives an error that carries no contract code (a store call
// that failed or timed out: the cluster, not the request) the code the
// fork's state implies: not_committed before anything that a sweep could
// finish was written, outcome_unknown after (the same request sent again
// finishes the copy or answers it done). Errors with a code keep it.
func definite(code schema.Code, err error) error {
	var se *schema.Error
	if err == nil || errors.As(err, &se) {
		return err
	}
	return schema.Errorf(code, "fork: %v", err)
}

// scan is what reading the parent established: the seed length, the
// child's depth, and where each of the seed's events is stored. A stored
// message never changes, so the copy, finding the same stream seqs, copies
// exactly the events the scan folded, and need not decode or fold them
// again.
type scan struct {
	k     uint64
	depth int
	// owner is the parent's (nil: it has none).
	owner *schema.Owner
	// base is the last event of the parent's snapshot when the scan began
	// there (zero: it read the parent from its start): the scan then read
	// only the events after it, and the copy judges the events up to it as
	// it copies them (copyCovered).
	base logstore.Tail
	// streamSeqs[i] is the stream seq of the parent's event seq
	// base.Seq+i+1, and canonical[i] whether its body is exactly what
	// schema.Encode writes (the copy then edits the body instead of
	// encoding it again).
	streamSeqs []uint64
	canonical  []bool
	// bodies holds the scanned bodies while they fit in the budget
	// (Config.ScanBodyBudget; nil past it): the copy then has no second
	// read of the parent.
	bodies    [][]byte
	bodyBytes int
}

// at is the index in streamSeqs, canonical and bodies of the parent's
// event seq (> base.Seq).
func (sc *scan) at(seq uint64) int { return int(seq - sc.base.Seq - 1) }

// resolve scans the parent (only as far as the cut needs) and returns the
// seed length, the child's depth and where the seed is stored. A parent
// with a snapshot that matches the log (logstore.LoadSnapshot, the
// writer's checks) is scanned from it, when the cut can be at or after
// it; a cut that scan cannot resolve (refused with no safe seq after the
// snapshot before it, a turn that ended before the snapshot) is resolved
// by a scan from the start, which gives the answer.
func (s *Service) resolve(ctx context.Context, caller api.Caller, parent string, cut session.Cut) (*scan, error) {
	// The parent's tail is read from its leader while its snapshot is
	// loaded: one round trip before the scan's read, not two. (A snapshot
	// stored after that tail was read covers it: the scan reads nothing
	// more, as a read begun a little later would have found.)
	tail := readTail(ctx, s.st, parent)
	if base := s.snapshotOf(ctx, parent); base != nil && cut.Seq != nil && *cut.Seq < base.Tail.Seq {
		s.m.snapLoads.WithLabelValues("past_cut").Inc()
	} else if base != nil {
		s.m.snapLoads.WithLabelValues("used").Inc()
		sc, err := s.scanFrom(ctx, caller, parent, cut, base, tail)
		var se *schema.Error
		if err == nil || !errors.As(err, &se) {
			return sc, err
		}
		switch {
		case se.Code == schema.CodeUnsafeCut && se.NearestSafeBefore != nil:
			// The nearest safe seqs are at or after the snapshot: the
			// answer of a scan from the start.
			return nil, err
		case se.Code == schema.CodeUnsafeCut, se.Code == schema.CodeBadRequest, se.Code == schema.CodeNotFound, se.Code == schema.CodeUnreadable:
			// The events before the snapshot may answer otherwise: a safe
			// seq before it, a turn that ended there, the first
			// unreadable message.
		default:
			return nil, err
		}
		s.log.Debug("fork: the cut is not resolved after the snapshot; scanning the parent from its start", "parent", parent, "cut", cut.String(), "err", err)
		// That scan reads the parent's tail again.
		tail = nil
	}
	return s.scanFrom(ctx, caller, parent, cut, nil, tail)
}

// snapshotOf is the parent's snapshot checked against the log; nil when
// it has none, when snapshots are off, or when it does not match (then
// ignored with a log line).
func (s *Service) snapshotOf(ctx context.Context, parent string) *logstore.SnapshotBase {
	if s.cfg.NoSnapshots {
		return nil
	}
	l := logstore.SnapshotFor(ctx, s.st, parent)
	if l.Use == logstore.SnapshotIgnored {
		s.m.snapLoads.WithLabelValues("ignored").Inc()
		s.log.Warn("forker: snapshot ignored, scanning the parent from its start", "parent", parent, "err", l.Why)
	}
	return l.Base
}

// scanFrom scans the parent from base (nil: from its start) up to tail
// (nil: the tail the read finds first). Every message read is judged
// (logstore.Judge, from base's last event).
func (s *Service) scanFrom(ctx context.Context, caller api.Caller, parent string, cut session.Cut, base *logstore.SnapshotBase, tail pendingTail) (*scan, error) {
	sp := session.NewSafePoints(parent)
	sc := &scan{}
	if base != nil {
		sp = session.ResumeSafePoints(base.State)
		sc.base = base.Tail
	}
	j := logstore.Judge{SessionID: parent, Last: sc.base}
	last, err := readDecodedBy(ctx, s.st, parent, sc.base, tail, chunkSize, func(m *logstore.Msg, e schema.Envelope, canonical bool, err error) error {
		switch v, err := j.Judged(m, &e, err); v {
		case logstore.VerdictCopy:
			return nil
		case logstore.VerdictUnreadable:
			return err
		}
		s.m.scanned.Inc()
		if err := sp.Add(&e); err != nil {
			return schema.Errorf(schema.CodeUnreadable, "session %s is unreadable at stream seq %d: seq %d does not fold: %v", parent, m.StreamSeq, e.Seq, err)
		}
		sc.streamSeqs = append(sc.streamSeqs, m.StreamSeq)
		sc.canonical = append(sc.canonical, canonical)
		if sc.bodyBytes += len(m.Data); sc.bodyBytes <= s.cfg.ScanBodyBudget {
			sc.bodies = append(sc.bodies, m.Data)
		} else {
			sc.bodies = nil
		}
		if sp.Decided(cut) {
			return logstore.ErrStop
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !last.Exists() {
		return nil, schema.Errorf(schema.CodeNotFound, "parent session %s does not exist", parent)
	}
	// Before anything of the parent is answered (its safe seqs included).
	if err := api.Authorize(caller, parent, &sp.State().Meta); err != nil {
		return nil, err
	}
	if sc.k, err = sp.Resolve(cut); err != nil {
		return nil, err
	}
	if sc.k < sc.base.Seq || sc.k > sc.base.Seq+uint64(len(sc.streamSeqs)) {
		return nil, schema.Errorf(schema.CodeInternal, "parent %s: seed length %d outside the events %d..%d scanned", parent, sc.k, sc.base.Seq+1, sc.base.Seq+uint64(len(sc.streamSeqs)))
	}
	sc.depth, sc.owner = 1, sp.State().Meta.Owner
	if pp := sp.State().Meta.Parent; pp != nil {
		sc.depth = pp.Depth + 1
	}
	return sc, nil
}

var (
	// errNotOurs: the child id holds events that this fork did not write.
	errNotOurs = errors.New("forker: child holds another session")
)

// nothingWritten: the first batch failed definitely, so nothing of the
// child was stored and its record can go.
type nothingWritten struct{ err error }

func (e *nothingWritten) Error() string { return e.err.Error() }
func (e *nothingWritten) Unwrap() error { return e.err }

// permanentError: the copy can never be finished (the parent's events do
// not fold into the child, or do not fit): the child is abandoned.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// claimChild refuses a child id that holds another session, then writes
// the copy's record (before the first batch, so a crash at any later point
// leaves a record a sweep finds).
func (s *Service) claimChild(ctx context.Context, p *plan) (fresh bool, err error) {
	first, err := s.st.NextAfter(ctx, p.ChildID, 0)
	if err != nil {
		return false, schema.Errorf(schema.CodeNotCommitted, "forker: read child %s: %v", p.ChildID, err)
	}
	if first != nil && !p.ours(first.EventID()) {
		t, err := s.st.Tail(ctx, p.ChildID)
		if err != nil {
			return false, schema.Errorf(schema.CodeNotCommitted, "forker: read child %s: %v", p.ChildID, err)
		}
		cur := t.Seq
		return false, &schema.Error{Code: schema.CodeConflict, Index: -1, CurrentSeq: &cur,
			Message: fmt.Sprintf("child id %s is taken: that session has %d events", p.ChildID, t.Seq)}
	}
	b, _ := json.Marshal(p)
	ctx, cancel := s.call(ctx)
	defer cancel()
	// A record write that went unanswered may have landed, and a sweep
	// finishes the copy of a record it finds.
	if err := s.bucket().Create(ctx, p.ChildID, b); err != nil {
		if !errors.Is(err, logstore.ErrForkRecordExists) {
			return false, schema.Errorf(schema.CodeOutcomeUnknown, "forker: record %s: %v", p.ChildID, err)
		}
		rec, _, gerr := s.bucket().Get(ctx, p.ChildID)
		if gerr != nil {
			return false, schema.Errorf(schema.CodeNotCommitted, "forker: record %s: %v", p.ChildID, gerr)
		}
		var other plan
		if json.Unmarshal(rec.Value, &other) != nil || other.OpID != p.OpID {
			return false, schema.Errorf(schema.CodeConflict, "child id %s is being forked from %s", p.ChildID, other.ParentID)
		}
		// The same fork, left by a crash or asked again: take it on.
		if err := s.bucket().Put(ctx, p.ChildID, b); err != nil {
			return false, schema.Errorf(schema.CodeOutcomeUnknown, "forker: record %s: %v", p.ChildID, err)
		}
		return false, nil
	}
	// No event of the child and a record of our own: a child this request
	// makes (counted in its tenant's usage).
	return first == nil, nil
}

func (s *Service) dropRecord(p *plan) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.bucket().Drop(ctx, p.ChildID); err != nil {
		s.log.Warn("drop fork record", "child", p.ChildID, "err", err)
	}
}

// eraseRecord drops the record of a fork whose parent or child is
// erased with the server's secure delete (logstore.EraseForkRecord), not
// a purge: its bytes (the parent, the owners) go from the files, and the
// eraser, which waits for a copy while its record lasts, goes on.
func (s *Service) eraseRecord(p *plan) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.st.EraseForkRecord(ctx, p.ChildID); err != nil {
		s.log.Warn("erase fork record", "child", p.ChildID, "err", err)
	}
}

// finish brings the child to its fork/committed, from wherever it is: not
// written yet, part-copied by a forker that crashed, or done. sc is the
// scan of the parent the plan was made from; nil (a sweep taking over a
// copy) scans the parent again up to the seed length.
func (s *Service) finish(ctx context.Context, p *plan, sc *scan) error {
	if p.empty && sc != nil {
		// The child had no event when its record was written: the copy
		// starts at seq 1, its first batch expecting no message on the
		// child's subject. Anything stored there since fails that batch,
		// writing nothing, and the child is read as below (one round trip
		// saved on every fresh fork).
		p.empty = false
		if err := s.copyPrefix(ctx, p, sc, 0, logstore.Tail{}); !errors.Is(err, errNotOurs) {
			return err
		}
		p.copied = 0 // the batch refused was not written
	}
	cs := session.New(p.ChildID)
	var foreign bool
	j := logstore.Judge{SessionID: p.ChildID}
	tail, err := s.st.ReadSession(ctx, p.ChildID, 0, func(m *logstore.Msg) error {
		if !p.ours(m.EventID()) {
			foreign = true
			return logstore.ErrStop
		}
		e, v, err := j.Next(m)
		if v == logstore.VerdictCopy {
			return nil
		}
		if err != nil {
			return &permanentError{err}
		}
		if err := cs.Apply(&e); err != nil {
			return &permanentError{schema.Errorf(schema.CodeUnreadable, "child %s cannot be folded at seq %d: %v", p.ChildID, e.Seq, err)}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if foreign {
		if cs.LastSeq == 0 {
			return errNotOurs
		}
		// Someone else appended to our copy (a repair of a child still
		// being copied): it can no longer be a faithful copy.
		return &permanentError{schema.Errorf(schema.CodeConflict, "child %s holds events after seq %d that the forker did not write", p.ChildID, cs.LastSeq)}
	}
	if cs.ForkCommittedSeq != 0 {
		return nil
	}
	if cs.Closed {
		return &permanentError{schema.Errorf(schema.CodeConflict, "child %s was abandoned (%s)", p.ChildID, cs.CloseReason)}
	}
	if cs.LastSeq > p.SeedLength {
		return &permanentError{schema.Errorf(schema.CodeConflict, "child %s holds %d events of a seed of %d", p.ChildID, cs.LastSeq, p.SeedLength)}
	}
	if sc == nil {
		// The request that made the plan was authorized already.
		k := p.SeedLength
		if sc, err = s.resolve(ctx, api.Caller{}, p.ParentID, session.Cut{Seq: &k}); err != nil {
			switch schema.CodeOf(err) {
			case schema.CodeUnreadable, schema.CodeNotFound, schema.CodeBadRequest, schema.CodeConflict:
				return &permanentError{err}
			}
			return err
		}
	}
	if sc.k != p.SeedLength {
		return &permanentError{schema.Errorf(schema.CodeConflict, "parent %s now resolves to seed length %d, the copy is of %d", p.ParentID, sc.k, p.SeedLength)}
	}
	return s.copyPrefix(ctx, p, sc, cs.LastSeq, tail)
}

// copyPrefix appends the parent's events have+1..SeedLength and
// fork/committed, in batches, reading the parent as a stream so memory
// stays at about two batches: the one being appended and the one being
// prepared. A batch's expected stream seq is the previous batch's last, so
// batches go one at a time, but the next one is read and made while the
// store commits the last.
//
// Each copied message must be the one the scan folded (same stream seq),
// so the copy neither decodes nor folds it again: a canonical body becomes
// the child's by rewriting its sessionId, eventId and synthetic
// (schema.CanonicalBody.Rewrite), any other is decoded and encoded.
func (s *Service) copyPrefix(ctx context.Context, p *plan, sc *scan, have uint64, tail logstore.Tail) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fresh := have == 0
	batches := make(chan *copyBatch)
	appended := make(chan error, 1)
	go func() { appended <- s.appendBatches(ctx, p, tail.StreamSeq, !fresh, batches) }()
	// send hands a full batch to the appender; an appender that failed
	// ends the copy.
	send := func(b *copyBatch) error {
		select {
		case batches <- b:
			return nil
		case err := <-appended:
			appended <- err
			if err == nil {
				err = errors.New("forker: appender stopped")
			}
			return err
		}
	}
	finish := func(err error) error {
		close(batches)
		aerr := <-appended
		if err != nil {
			return err
		}
		return aerr
	}
	batch := newCopyBatch(s.cfg.BatchSize)
	add := func(e schema.Envelope, body []byte) error {
		batch.add(e, body)
		p.copied += int64(len(body))
		if len(batch.events) >= s.cfg.BatchSize {
			full := batch
			batch = newCopyBatch(s.cfg.BatchSize)
			return send(full)
		}
		return nil
	}
	next := have + 1 // the parent seq to copy next
	var perr error
	if next <= sc.base.Seq {
		// The events the parent's snapshot covers, which the scan did not
		// read.
		perr = s.copyCovered(ctx, p, sc.base, &next, add)
	}
	after := sc.base.StreamSeq // the stream seq of the parent's event next-1
	if next-1 > sc.base.Seq {
		after = sc.streamSeqs[sc.at(next-1)]
	}
	// copyOne copies the parent's event next, stored in m.
	copyOne := func(m *logstore.Msg) error {
		i := sc.at(next)
		if m.StreamSeq != sc.streamSeqs[i] {
			return &permanentError{schema.Errorf(schema.CodeNotFound, "parent %s seq %d is no longer at stream seq %d", p.ParentID, next, sc.streamSeqs[i])}
		}
		e, body, err := s.childEvent(p, m, next, sc.canonical[i])
		if err != nil {
			return err
		}
		next++
		return add(e, body)
	}
	switch {
	case perr != nil:
	case next > p.SeedLength:
	case uint64(len(sc.bodies)) >= p.SeedLength-sc.base.Seq:
		for next <= p.SeedLength && perr == nil {
			perr = copyOne(&logstore.Msg{StreamSeq: sc.streamSeqs[sc.at(next)], Data: sc.bodies[sc.at(next)]})
		}
	default:
		_, perr = s.st.ReadSession(ctx, p.ParentID, after, func(m *logstore.Msg) error {
			if m.StreamSeq < sc.streamSeqs[sc.at(next)] {
				return nil // a copy of the event before, which the scan skipped
			}
			if err := copyOne(m); err != nil {
				return err
			}
			if next > p.SeedLength {
				return logstore.ErrStop
			}
			return nil
		})
	}
	if perr != nil {
		return finish(perr)
	}
	if next != p.SeedLength+1 {
		return finish(&permanentError{schema.Errorf(schema.CodeNotFound, "parent %s ends before seq %d", p.ParentID, p.SeedLength)})
	}
	data, _ := json.Marshal(schema.ForkCommitted{SeedLength: p.SeedLength})
	commit := schema.Envelope{
		SchemaVersion: schema.Version, SessionID: p.ChildID, Seq: p.SeedLength + 1, EventID: p.eventID(p.SeedLength + 1),
		Time: s.cfg.Now().UTC(), Type: schema.TypeForkCommitted, Synthetic: true, Data: data,
	}
	body, err := schema.Encode(&commit)
	if err != nil {
		return finish(&permanentError{schema.Errorf(schema.CodeInternal, "child %s fork/committed: %v", p.ChildID, err)})
	}
	if err := add(commit, body); err != nil {
		return finish(err)
	}
	if len(batch.events) > 0 {
		if err := send(batch); err != nil {
			return finish(err)
		}
	}
	if err := finish(nil); err != nil {
		return err
	}
	if fresh {
		s.log.Info("forked", "child", p.ChildID, "parent", p.ParentID, "seedLength", p.SeedLength, "depth", p.Depth)
	}
	return nil
}

// copyCovered copies the parent's events *next..base.Seq, which its
// snapshot covers and the scan did not read. It reads the parent from its
// start and judges every message as a scan from the start would
// (logstore.Judge): a message the parent's writer never judged (one
// stored around it, a hole left by a lost message) ends the copy with the
// verdict, and the child is abandoned, never written past it. The event
// at base.Seq must be the one the snapshot names (stream seq, hash, id).
func (s *Service) copyCovered(ctx context.Context, p *plan, base logstore.Tail, next *uint64, add func(schema.Envelope, []byte) error) error {
	j := logstore.Judge{SessionID: p.ParentID}
	_, err := readDecoded(ctx, s.st, p.ParentID, logstore.Tail{}, func(m *logstore.Msg, e schema.Envelope, canonical bool, err error) error {
		switch v, err := j.Judged(m, &e, err); v {
		case logstore.VerdictCopy:
			return nil
		case logstore.VerdictUnreadable:
			return &permanentError{err}
		}
		if e.Seq >= *next {
			ce, body, err := s.childEvent(p, m, e.Seq, canonical)
			if err != nil {
				return err
			}
			*next = e.Seq + 1
			if err := add(ce, body); err != nil {
				return err
			}
		}
		if e.Seq < base.Seq {
			return nil
		}
		if j.Last != base {
			return &permanentError{schema.Errorf(schema.CodeConflict, "parent %s seq %d at stream seq %d is not the event its snapshot names", p.ParentID, e.Seq, m.StreamSeq)}
		}
		return logstore.ErrStop
	})
	if err != nil {
		var ue *logstore.UnreadableError
		if errors.As(err, &ue) {
			return &permanentError{err}
		}
		return err
	}
	if *next != base.Seq+1 {
		return &permanentError{schema.Errorf(schema.CodeNotFound, "parent %s ends before seq %d", p.ParentID, base.Seq)}
	}
	return nil
}

// copyBatch is one atomic batch of the child: the envelopes (of which the
// store reads the header fields), their bodies and the bodies' chain
// hashes (made here, while the store commits the batch before, rather
// than by Append after it).
type copyBatch struct {
	events []schema.Envelope
	bodies [][]byte
	hashes []string
}

func newCopyBatch(n int) *copyBatch {
	return &copyBatch{events: make([]schema.Envelope, 0, n), bodies: make([][]byte, 0, n), hashes: make([]string, 0, n)}
}

func (b *copyBatch) add(e schema.Envelope, body []byte) {
	b.events = append(b.events, e)
	b.bodies = append(b.bodies, body)
	b.hashes = append(b.hashes, logstore.ChainHash(body))
}

// childEvent makes the child's copy of the parent's event seq, stored in
// m: seq 1 is the child's own session/created, every other event the
// parent's with the child's session id and event id, marked synthetic.
func (s *Service) childEvent(p *plan, m *logstore.Msg, seq uint64, canonical bool) (schema.Envelope, []byte, error) {
	id := p.eventID(seq)
	if seq > 1 && canonical {
		if cb, ok := schema.ScanCanonical(m.Data); ok && cb.Seq == seq && cb.SessionIs(p.ParentID) {
			body, ok := cb.Rewrite(make([]byte, 0, len(m.Data)+len(p.ChildID)+len(id)),
				schema.Identity{SessionID: p.ChildID, Seq: seq, EventID: id, Synthetic: true})
			if ok {
				e := schema.Envelope{SchemaVersion: schema.Version, SessionID: p.ChildID, Seq: seq, EventID: id, Type: cb.Type()}
				return e, body, nil
			}
		}
	}
	e, err := schema.Decode(m.Data)
	if err != nil {
		return e, nil, &permanentError{schema.Errorf(schema.CodeUnreadable, "parent %s at stream seq %d: %v", p.ParentID, m.StreamSeq, err)}
	}
	if e.Seq != seq {
		return e, nil, &permanentError{schema.Errorf(schema.CodeUnreadable, "parent %s at stream seq %d holds seq %d, not %d", p.ParentID, m.StreamSeq, e.Seq, seq)}
	}
	if seq == 1 {
		if e, err = s.created(p, &e); err != nil {
			return e, nil, err
		}
	} else {
		e.SessionID, e.EventID, e.Synthetic = p.ChildID, id, true
	}
	body, err := schema.Encode(&e)
	if err != nil {
		return e, nil, &permanentError{schema.Errorf(schema.CodeInvalidEvent, "copy of %s seq %d: %v", p.ParentID, seq, err)}
	}
	return e, body, nil
}

// appendBatches appends each batch after the previous one and renews the
// copy's record every StaleAfter/3. wrote says whether the child already
// has events of this copy (a conflict on the first batch of a fresh child
// means the child id is taken).
func (s *Service) appendBatches(ctx context.Context, p *plan, expected uint64, wrote bool, batches <-chan *copyBatch) error {
	lastBeat := time.Now()
	for batch := range batches {
		actx, cancel := s.call(ctx)
		res, err := s.st.Append(actx, logstore.AppendRequest{SessionID: p.ChildID, ExpectedStreamSeq: expected, Events: batch.events, Bodies: batch.bodies, Hashes: batch.hashes})
		cancel()
		if err != nil {
			switch code := schema.CodeOf(err); {
			case !wrote && code == schema.CodeConflict:
				return errNotOurs
			case !wrote && code == schema.CodeNotCommitted:
				return &nothingWritten{err}
			case code == schema.CodeTooLarge || code == schema.CodeInvalidEvent:
				return &permanentError{err}
			}
			return err
		}
		wrote = true
		s.m.events.Add(float64(len(batch.events)))
		expected = res.StreamSeq
		if time.Since(lastBeat) >= s.cfg.StaleAfter/3 {
			lastBeat = time.Now()
			s.heartbeat(ctx, p)
		}
	}
	return nil
}

// created is the child's seq 1: the parent's title, agent and labels, the
// fork's parent and workspace.
func (s *Service) created(p *plan, parentCreated *schema.Envelope) (schema.Envelope, error) {
	var pd schema.SessionCreated
	if err := parentCreated.DecodeData(&pd); err != nil {
		return schema.Envelope{}, &permanentError{schema.Errorf(schema.CodeUnreadable, "parent %s session/created: %v", p.ParentID, err)}
	}
	d := schema.SessionCreated{
		Title: pd.Title, Agent: pd.Agent, Labels: pd.Labels, Workspace: p.Workspace,
		Parent: &schema.Parent{SessionID: p.ParentID, SeedLength: p.SeedLength, Depth: p.Depth},
		Owner:  pd.Owner, Grants: pd.Grants,
	}
	if p.ChildOwner != nil {
		d.Owner, d.Grants = p.ChildOwner, nil
	}
	data, err := json.Marshal(d)
	if err != nil {
		return schema.Envelope{}, err
	}
	e := schema.Envelope{
		SchemaVersion: schema.Version, SessionID: p.ChildID, Seq: 1, EventID: p.eventID(1),
		Time: s.cfg.Now().UTC(), Type: schema.TypeSessionCreated, Synthetic: true, Data: data,
	}
	if err := schema.Validate(&e, schema.ValidateOptions{Origin: schema.OriginService, Stored: true, MaxEventBytes: s.st.Config().MaxEventBytes}); err != nil {
		return schema.Envelope{}, &permanentError{err}
	}
	return e, nil
}

func (s *Service) heartbeat(ctx context.Context, p *plan) {
	p.HeartbeatAt, p.Owner = s.cfg.Now().UTC(), s.owner
	b, _ := json.Marshal(p)
	ctx, cancel := s.call(ctx)
	defer cancel()
	if err := s.bucket().Put(ctx, p.ChildID, b); err != nil {
		s.log.Warn("renew fork record", "child", p.ChildID, "err", err)
	}
}

// abandon closes a copy that can never be finished, so it never becomes
// usable half-copied, and drops its record.
func (s *Service) abandon(ctx context.Context, p *plan, cause error) {
	log := s.log.With("child", p.ChildID, "parent", p.ParentID)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	first, err := s.st.NextAfter(ctx, p.ChildID, 0)
	if err != nil {
		log.Warn("abandon: read child", "err", err)
		return
	}
	if first == nil || !p.ours(first.EventID()) {
		// Nothing of ours to close.
		s.dropRecord(p)
		return
	}
	t, err := s.st.Tail(ctx, p.ChildID)
	if err != nil {
		log.Warn("abandon: tail", "err", err)
		return
	}
	data, _ := json.Marshal(schema.Reason{Reason: AbandonReason})
	e := schema.Envelope{
		SchemaVersion: schema.Version, SessionID: p.ChildID, Seq: t.Seq + 1, EventID: "fork:" + p.OpID + ":abandoned",
		Time: s.cfg.Now().UTC(), Type: schema.TypeSessionClosed, Synthetic: true, Data: data,
	}
	if _, err := s.st.Append(ctx, logstore.AppendRequest{SessionID: p.ChildID, ExpectedStreamSeq: t.StreamSeq, Events: []schema.Envelope{e}}); err != nil {
		log.Warn("abandon: close", "err", err)
		return
	}
	log.Warn("fork abandoned", "cause", cause)
	s.dropRecord(p)
}

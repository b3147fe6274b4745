package eraser

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/wire"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Erasure (DESIGN.md section 14): the eraser is the one service whose
// NATS user may delete stored messages (deploy/nats, the "eraser"
// permissions); retention, which erases, runs beside its resumptions.

// The wire types of sessions.api.erase (defined in pkg/api).
type (
	EraseRequest = api.EraseRequest
	EraseReply   = api.EraseReply
)

// The steps of one session's erase, in order; a test hook may stop the
// erase after any of them, as a kill would.
const (
	StepMarked  = "marked"  // the erasure record exists: the id is refused, reads answer erased
	StepHashed  = "hashed"  // one more batch hashed into the record (called per batch)
	StepDeleted = "deleted" // one more message deleted (called per message)
	StepRecords = "records" // lease, claim, fork and source records dropped
	StepAudited = "audited" // the audit record is written
)

// Erase states of a reply (api.EraseReply.State).
const (
	EraseAccepted = api.EraseAccepted
	EraseDone     = api.EraseDone
)

const (
	// eraseBatch: events hashed into the record, then deleted, at a time.
	eraseBatch = 1024
	// eraseAnswerWait: how long a request waits for its jobs before it
	// answers accepted with their progress (a small erase answers done).
	eraseAnswerWait = 2 * time.Second
	// eraseJobsAtOnce: jobs this process runs at once.
	eraseJobsAtOnce = 2
	// eraseResumeEvery: how often unfinished jobs are started again when
	// the eraser does not sweep (SweepInterval < 0).
	eraseResumeEvery = 30 * time.Second
)

// Erase erases a session (and with Cascade its fork descendants) and
// returns when every job is done: retention's erase, and the one a test
// drives. The request endpoint accepts the jobs and answers at once.
func (s *Service) Erase(ctx context.Context, req EraseRequest) (EraseReply, error) {
	ids, err := s.acceptErase(ctx, req)
	if err != nil {
		return EraseReply{}, err
	}
	for _, id := range ids {
		if err := s.runErase(ctx, id); err != nil {
			return EraseReply{}, err
		}
	}
	return s.eraseProgress(ctx, req.SessionID, ids)
}

// acceptErase checks the request and writes the erasure record of every
// session it erases (from then on each id is refused and reads answer
// erased), and returns their ids, the session's first. Repeated, it
// writes nothing new and returns the same ids.
func (s *Service) acceptErase(ctx context.Context, req EraseRequest) ([]string, error) {
	if err := logstore.ValidateSessionID(req.SessionID); err != nil {
		return nil, err
	}
	if req.Reason == "" || req.By == "" {
		return nil, schema.Errorf(schema.CodeBadRequest, "reason and by are required")
	}
	if err := s.st.CheckErasable(ctx, req.SessionID); err != nil {
		// Refused before anything is marked: the session stays readable.
		return nil, schema.Errorf(schema.CodeInternal, "erase: %v", err)
	}
	rec, _, err := s.st.ErasureOf(ctx, req.SessionID)
	if err != nil {
		return nil, schema.Errorf(schema.CodeNotCommitted, "erase: %v", err)
	}
	var total uint64
	if rec == nil {
		t, _, err := s.storedTail(ctx, req.SessionID)
		if err != nil && schema.CodeOf(err) != schema.CodeNotFound {
			return nil, schema.Errorf(schema.CodeNotCommitted, "erase: %v", err)
		}
		if t.StreamSeq == 0 {
			left, err := s.leftOver(ctx, req.SessionID)
			if err != nil {
				return nil, schema.Errorf(schema.CodeNotCommitted, "erase: %v", err)
			}
			if !left {
				return nil, schema.Errorf(schema.CodeNotFound, "session %s does not exist", req.SessionID)
			}
		}
		total = t.Seq
	}
	var children []string
	switch {
	case rec != nil && rec.Cascade:
		children = rec.Children
	case req.Cascade:
		if children, err = s.descendants(ctx, req.SessionID); err != nil {
			return nil, schema.Errorf(schema.CodeNotCommitted, "erase: descendants: %v", err)
		}
	}
	now := s.now().UTC().Format(time.RFC3339Nano)
	// mark writes the session's erasure record, its Owner and Grants
	// folded from its events unless it has a record already (a repeated
	// request: the record holds them); read: that record was read for
	// this request, and found absent.
	mark := func(id string, total uint64, cascade bool, children []string, read bool) error {
		e := logstore.Erasure{SessionID: id, By: req.By, Reason: req.Reason, ErasedAt: now,
			Phase: logstore.ErasePhaseDeleting, Total: total, Cascade: cascade, Children: children}
		var had *logstore.Erasure
		var err error
		if !read {
			had, _, err = s.st.ErasureOf(ctx, id)
		}
		if err == nil && had == nil {
			err = s.ownerOf(ctx, &e)
		}
		if err == nil {
			_, _, err = s.st.MarkErased(ctx, e)
		}
		if err == nil {
			err = s.step(StepMarked)
		}
		if err != nil {
			return schema.Errorf(schema.CodeNotCommitted, "erase %s (repeat it to finish): %v", id, err)
		}
		return nil
	}
	// The children first: once the parent's record names them, a repeat
	// takes them from it.
	for _, c := range children {
		var n uint64
		if t, _, err := s.storedTail(ctx, c); err == nil {
			n = t.Seq
		}
		if err := mark(c, n, false, nil, false); err != nil {
			return nil, err
		}
	}
	if rec == nil || (req.Cascade && !rec.Cascade) {
		if rec != nil {
			// A cascade after a plain erase: the record learns the children.
			if err := s.updateRecord(ctx, req.SessionID, func(r *logstore.Erasure) { r.Cascade, r.Children = true, children }); err != nil {
				return nil, err
			}
		} else if err := mark(req.SessionID, total, req.Cascade, children, true); err != nil {
			return nil, err
		}
	}
	if req.Cascade || rec != nil && rec.Cascade {
		// Children being copied have no events yet, or not all: each is
		// found by its fork record, read after the parent's erasure
		// record exists (ADR 009, "Forks in flight"). A copy whose record
		// is written later reads the parent's erasure record and stops.
		late, err := s.forksFrom(ctx, req.SessionID, children)
		if err != nil {
			return nil, schema.Errorf(schema.CodeNotCommitted, "erase %s (repeat it to finish): forks in flight: %v", req.SessionID, err)
		}
		for _, c := range late {
			if err := mark(c, 0, false, nil, false); err != nil {
				return nil, err
			}
		}
		if len(late) > 0 {
			children = append(children, late...)
			if err := s.updateRecord(ctx, req.SessionID, func(r *logstore.Erasure) { r.Children = children }); err != nil {
				return nil, err
			}
		}
	}
	return append([]string{req.SessionID}, children...), nil
}

// ownerOf sets the record's Owner and Grants, the session's as its
// events say (api.Authorize's: data.owner of session/created, its
// data.grants and those of session/granted), and its OwnerFold, where the
// job goes on folding them (ownerFold). The events are read and folded as
// every reader does (logstore.FoldSession: ReadJudged, session.State), up
// to the first that is unreadable or does not fold (a grant stored after
// it counts for no reader, so for no audit record either). Ids only: the
// record and the audit record made from it hold no content.
func (s *Service) ownerOf(ctx context.Context, e *logstore.Erasure) error {
	// From the session's snapshot when it has one that matches the log
	// (the writer's checks, logstore.LoadSnapshot), so that the request's
	// read is bounded by the snapshot interval, not the session's length.
	f, err := logstore.FoldSession(ctx, s.st, e.SessionID, logstore.FoldOptions{UpToUnfoldable: true})
	if f.Snapshot.Use == logstore.SnapshotIgnored {
		s.log.Warn("eraser: snapshot ignored, folding the session's owner from its start", "session", e.SessionID, "err", f.Snapshot.Why)
	}
	keyGone := errors.Is(err, logstore.ErrKeyGone)
	if err != nil && !keyGone && !errors.Is(err, logstore.ErrUnreadable) && schema.CodeOf(err) != schema.CodeNotFound {
		return fmt.Errorf("owner: %w", err)
	}
	e.Owner, e.Grants = f.State.Meta.Owner, slices.Clone(f.State.Meta.Grants)
	fold := logstore.FoldedTo(f.Last)
	// A session whose key is gone folds no further than its first sealed
	// body (no key opens it): nothing after it counts, as after any
	// message that is unreadable.
	fold.Stopped = f.Stopped || keyGone
	e.OwnerFold = &fold
	return nil
}

// leftOver reports whether a session of which no message is stored has
// records an erase removes: a lease (an entry, live or not), a claim, or
// its data key in SESSION_KEYS (a store that seals made it with the
// session's first lease or claim). A writer that took the lease and
// never appended leaves them; nothing else removes them, and the erase
// of such a session runs as any (its record first, then a job that finds
// no event and drops the records and the key).
func (s *Service) leftOver(ctx context.Context, id string) (bool, error) {
	l, err := s.st.LeaseRecord(ctx, id)
	if err != nil || l.Revision != 0 {
		return err == nil, err
	}
	c, err := s.st.GetClaim(ctx, id)
	if errors.Is(err, logstore.ErrKeyGone) {
		return true, nil // a sealed claim whose key is gone: an entry all the same
	}
	if err != nil || c != nil {
		return err == nil, err
	}
	return s.st.HasKey(ctx, id)
}

// forksFrom lists the children of fork copies in flight from root or
// from a session in known (or from such a child, and so on) that known
// does not hold yet.
func (s *Service) forksFrom(ctx context.Context, root string, known []string) ([]string, error) {
	var all []logstore.ForkInFlight
	if err := s.st.ForksInFlight(ctx, func(f logstore.ForkInFlight) { all = append(all, f) }); err != nil {
		return nil, err
	}
	in := map[string]bool{root: true}
	for _, c := range known {
		in[c] = true
	}
	var late []string
	for grew := true; grew; {
		grew = false
		for _, f := range all {
			if in[f.ParentID] && !in[f.ChildID] {
				in[f.ChildID] = true
				late = append(late, f.ChildID)
				grew = true
			}
		}
	}
	return late, nil
}

// waitForkCopy waits while a fork copy may still write the session (ADR
// 009, "Forks in flight"): its record exists and its forker renewed it
// within forkStale. A copy ends by itself once it reads the session's
// erasure record and drops its record; a record left by a forker that
// stopped is not waited for (a forker taking it over reads the erasure
// record and drops it without copying).
func (s *Service) waitForkCopy(ctx context.Context, id string) error {
	for {
		f, ok, err := s.st.ForkInFlightOf(ctx, id)
		if err != nil {
			return err
		}
		if !ok || !f.Live(s.now(), forkStale) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// updateRecord reads the session's record, changes it and writes it over
// the revision it read.
func (s *Service) updateRecord(ctx context.Context, id string, change func(*logstore.Erasure)) error {
	rec, rev, err := s.st.ErasureOf(ctx, id)
	if err == nil && rec == nil {
		err = errors.New("the erasure record is gone")
	}
	if err == nil {
		change(rec)
		_, err = s.st.UpdateErasure(ctx, *rec, rev)
	}
	if err != nil {
		return schema.Errorf(schema.CodeNotCommitted, "erase %s (repeat it to finish): %v", id, err)
	}
	return nil
}

// eraseProgress is the reply: the jobs as their records say.
func (s *Service) eraseProgress(ctx context.Context, root string, ids []string) (EraseReply, error) {
	out := EraseReply{SessionID: root, Erased: []string{}, State: EraseDone}
	for _, id := range ids {
		rec, _, err := s.st.ErasureOf(ctx, id)
		if err != nil {
			return out, schema.Errorf(schema.CodeNotCommitted, "erase: %v", err)
		}
		if rec == nil {
			return out, schema.Errorf(schema.CodeNotCommitted, "erase: the record of %s is gone", id)
		}
		if rec.Done || rec.Phase == logstore.ErasePhaseRecords || rec.Phase == logstore.ErasePhaseAudit {
			deletedAll(rec)
		}
		j := api.EraseJob{SessionID: id, Phase: rec.Phase, Total: rec.Total, Deleted: rec.Deleted, Done: rec.Done}
		if rec.Done {
			j.Phase = logstore.ErasePhaseDone
			out.Erased = append(out.Erased, id)
			out.Events += rec.Events
		} else {
			out.State = EraseAccepted
		}
		if j.Total < j.Deleted {
			j.Total = j.Deleted
		}
		out.Jobs = append(out.Jobs, j)
	}
	return out, nil
}

// deletedAll sets the counts of a job past its deletes (phase records
// on): it deleted every message of the session, Deleted of them, the
// events of its digest and those it counted in Unhashed, and Total is
// that many (at acceptance it was the session's length, which counts an
// unhashed message that has a seq, not one that is no event, nor an
// append that landed after).
func deletedAll(rec *logstore.Erasure) {
	rec.Deleted = rec.Events + rec.Unhashed
	rec.Total = rec.Deleted
}

func (s *Service) step(name string) error {
	if h := s.eraseStep.Load(); h != nil {
		return (*h)(name)
	}
	return nil
}

// runErase runs the session's erase job to its end (at once if done).
func (s *Service) runErase(ctx context.Context, id string) error {
	unlock := s.lock(id)
	defer unlock()
	rec, rev, err := s.st.ErasureOf(ctx, id)
	if err != nil {
		return schema.Errorf(schema.CodeNotCommitted, "erase %s: %v", id, err)
	}
	if rec == nil || rec.Done {
		return nil
	}
	if err := s.eraseOne(ctx, *rec, rev); err != nil {
		var se *schema.Error
		if errors.As(err, &se) {
			return err
		}
		return schema.Errorf(schema.CodeNotCommitted, "erase %s (it goes on by itself): %v", id, err)
	}
	return nil
}

// eraseOne takes the job on from where its record stands: hash and
// delete the events batch by batch, drop the records, audit, done.
func (s *Service) eraseOne(ctx context.Context, rec logstore.Erasure, rev uint64) error {
	id := rec.SessionID
	var err error
	if rec.Phase == "" || rec.Phase == logstore.ErasePhaseDeleting {
		if err := s.waitForkCopy(ctx, id); err != nil {
			return err
		}
		if rev, err = s.eraseEvents(ctx, &rec, rev); err != nil {
			return err
		}
	}
	if rec.Phase == logstore.ErasePhaseRecords {
		if err := s.st.DropSessionRecords(ctx, id); err != nil {
			return err
		}
		if err := s.giveBack(ctx, rec); err != nil {
			return err
		}
		if err := s.step(StepRecords); err != nil {
			return err
		}
		deletedAll(&rec)
		rec.Phase = logstore.ErasePhaseAudit
		if rev, err = s.st.UpdateErasure(ctx, rec, rev); err != nil {
			return err
		}
	}
	if err := s.forgetGiveBack(ctx, rec); err != nil {
		return err
	}
	if err := s.st.WriteAudit(ctx, rec.Audit()); err != nil {
		return err
	}
	if err := s.step(StepAudited); err != nil {
		return err
	}
	rec.Done, rec.Phase = true, logstore.ErasePhaseDone
	if _, err := s.st.UpdateErasure(ctx, rec, rev); err != nil {
		return err
	}
	s.log.Info("eraser: erased", "session", id, "events", rec.Events, "unhashed", rec.Unhashed, "by", rec.By)
	return nil
}

// eraseEvents hashes and deletes the session's events. First the seal:
// every stored event goes into the record's digest (the record is
// written), then the first event and the tail are deleted. An append
// from a writer that took the tail from its cache expects that tail,
// so the stream's per-subject sequence check refuses it from then on,
// and the writer, reading the session again, reads the record too and
// answers erased. Appends that landed before the seal are hashed and
// the new tail deleted, until none did. Then the rest goes oldest
// first, a batch at a time (anything not yet hashed is hashed, and the
// record written, before its batch is deleted). The digest covers
// exactly what was deleted, and a resumed job neither hashes an event
// twice nor misses one. Each event hashed after where the record's owner
// fold stands is folded into its Owner and Grants (ownerFold), written
// with the digest: the audit names whoever an event in the digest
// granted the session to. It ends when the stream leader has no event of
// the session left.
func (s *Service) eraseEvents(ctx context.Context, rec *logstore.Erasure, rev uint64) (uint64, error) {
	// A record of an erase made before jobs (no phase, hashed) has the
	// whole digest: its events are only deleted.
	legacy := rec.Phase == "" && rec.Hashed
	sealedBefore := rec.Sealed
	rec.Phase = logstore.ErasePhaseDeleting
	var fold *ownerFold
	if !legacy {
		var err error
		if fold, err = s.ownerFold(ctx, rec); err != nil {
			return rev, err
		}
	}
	h, err := digestOf(rec)
	if err != nil {
		return rev, err
	}
	for !legacy && !rec.Sealed {
		var tail logstore.Tail
		var verdict *logstore.UnreadableError
		if tail, verdict, rev, err = s.hashToTail(ctx, rec, rev, h, fold); err != nil {
			return rev, err
		}
		// junk: the tail deleted is a message Tail refuses (storedTail's
		// verdict), which may have been stored around the writer, so the
		// event a cached append expects may still be there: the seal goes
		// round again to delete it.
		junk := false
		if !tail.Exists() || tail.StreamSeq <= rec.Through {
			// Nothing stored after what is hashed: delete the first
			// event, then the tail, the one a cached append expects.
			first, err := s.st.NextAfter(ctx, rec.SessionID, 0)
			if err != nil && (first == nil || !errors.Is(err, logstore.ErrKeyGone)) {
				// (A sealed body whose key is gone is deleted all the
				// same: only its position is needed.)
				return rev, err
			}
			var seqs []uint64
			if first != nil {
				seqs = append(seqs, first.StreamSeq)
			}
			if tail.Exists() && (first == nil || tail.StreamSeq != first.StreamSeq) {
				seqs = append(seqs, tail.StreamSeq)
			}
			if err := s.st.SecureDelete(ctx, rec.SessionID, seqs, 1, func() error { return s.step(StepDeleted) }); err != nil {
				return rev, err
			}
			rec.Deleted += uint64(len(seqs))
			junk = tail.Exists() && verdict != nil
		}
		// An append may have landed after the tail hashed: hash it and
		// seal again on the new tail.
		after, _, err := s.storedTail(ctx, rec.SessionID)
		if err != nil && schema.CodeOf(err) != schema.CodeNotFound {
			return rev, err
		}
		if after.StreamSeq <= rec.Through && !junk {
			rec.Sealed = true
		}
	}
	if !legacy && rec.Sealed {
		// Every event stored is in the digest (the seal): a session with
		// sealed bodies goes at once, its key destroyed and its subject
		// purged (its plain events one at a time first). One with an
		// event after the digest (written around the writer) or none
		// sealed goes a batch at a time below. The record says the seal
		// is whole before a key can go: a job resumed after the key's
		// delete reads no body (ownerFold and the seal's loop read them,
		// and a sealed body whose key is gone reads as erased).
		if !sealedBefore {
			var err error
			if rev, err = s.st.UpdateErasure(ctx, *rec, rev); err != nil {
				return rev, err
			}
		}
		n, err := s.st.Shred(ctx, rec.SessionID, rec.Through, func() error { return s.step(StepDeleted) })
		if err != nil {
			return rev, err
		}
		rec.Deleted += uint64(n)
	}
	for {
		page, err := s.st.StoredPage(ctx, rec.SessionID, eraseBatch)
		if err != nil {
			return rev, err
		}
		if len(page) == 0 {
			break
		}
		seqs := make([]uint64, len(page))
		hashed := false
		for i, m := range page {
			seqs[i] = m.StreamSeq
			if legacy || m.StreamSeq <= rec.Through {
				continue
			}
			hashed = true
			// A sealed body past the digest that does not open (stored
			// around the writer with a key the shred destroyed after its
			// look at the leader, or with another key) comes with its
			// reason; a plain one is judged as the seal's read judges it.
			why := m.Unopened
			if why == nil {
				why = logstore.NotAnEvent(m)
			}
			s.take(h, rec, fold, m, why)
		}
		if hashed {
			if rev, err = s.saveDigest(ctx, rec, rev, h); err != nil {
				return rev, err
			}
		}
		if err := s.st.SecureDelete(ctx, rec.SessionID, seqs, logstore.EraseInFlight, func() error { return s.step(StepDeleted) }); err != nil {
			return rev, err
		}
		rec.Deleted += uint64(len(seqs))
	}
	if !legacy {
		rec.Hashed, rec.SHA256 = true, hex.EncodeToString(h.Sum(nil))
	}
	rec.Deleted, rec.HashState, rec.Phase = rec.Events, "", logstore.ErasePhaseRecords
	return s.st.UpdateErasure(ctx, *rec, rev)
}

// digestOf is the job's running digest: a new one, or where the record's
// HashState left it.
func digestOf(rec *logstore.Erasure) (hash.Hash, error) {
	h := sha256.New()
	if rec.HashState != "" {
		b, err := base64.StdEncoding.DecodeString(rec.HashState)
		if err == nil {
			err = h.(encoding.BinaryUnmarshaler).UnmarshalBinary(b)
		}
		if err != nil {
			return nil, fmt.Errorf("digest state in the record: %w", err)
		}
	}
	return h, nil
}

// hashToTail is the seal's read: it reads the session's tail from the
// stream leader (storedTail), adds to h what is stored after the digest
// (rec.Through) up to it, folding each event into the record's owner
// (fold), and writes the digest's state in the record. Each message comes
// with the read's verdict on it (logstore's ReadVerdicts): a message that
// is not an event, a sealed body that does not open or whose key is gone,
// is counted in Unhashed instead, and the read goes on after it. It
// returns the tail, with its verdict, and the record's revision.
func (s *Service) hashToTail(ctx context.Context, rec *logstore.Erasure, rev uint64, h hash.Hash, fold *ownerFold) (logstore.Tail, *logstore.UnreadableError, uint64, error) {
	tail, verdict, err := s.storedTail(ctx, rec.SessionID)
	if err != nil {
		return tail, verdict, rev, err
	}
	if err := s.st.ReadVerdicts(ctx, rec.SessionID, rec.Through, tail, func(m *logstore.Msg, why error) error {
		s.take(h, rec, fold, m, why)
		return nil
	}); err != nil {
		return tail, verdict, rev, err
	}
	rev, err = s.saveDigest(ctx, rec, rev, h)
	return tail, verdict, rev, err
}

// take adds m, the next stored message after the digest, to it (h, the
// record's count and owner fold), or counts it in Unhashed when the
// read's verdict on it (why) is that it is no event it can hash.
func (s *Service) take(h hash.Hash, rec *logstore.Erasure, fold *ownerFold, m *logstore.Msg, why error) {
	if why != nil {
		s.unhashed(rec, fold, m, why)
		return
	}
	hashOne(h, rec, m)
	fold.next(m)
}

// saveDigest writes h's state in the record (StepHashed: one more batch
// hashed) and returns the record's revision.
func (s *Service) saveDigest(ctx context.Context, rec *logstore.Erasure, rev uint64, h hash.Hash) (uint64, error) {
	b, _ := h.(encoding.BinaryMarshaler).MarshalBinary()
	rec.HashState = base64.StdEncoding.EncodeToString(b)
	rev, err := s.st.UpdateErasure(ctx, *rec, rev)
	if err != nil {
		return rev, err
	}
	return rev, s.step(StepHashed)
}

// unhashed counts m in the record's Unhashed instead of its digest: a
// sealed body that does not open, which cannot be hashed, ever, or a
// message that is not an event (why says which), which is no event of
// the digest's count. It is counted apart (the audit's unhashed) and
// deleted, so that the job ends; its stored body's size is added to
// UnhashedBytes, for the give-back (m.Data as read: a StoredPage message
// whose sealed body does not open comes without it and adds nothing).
func (s *Service) unhashed(rec *logstore.Erasure, fold *ownerFold, m *logstore.Msg, why error) {
	rec.Unhashed++
	rec.UnhashedBytes += uint64(len(m.Data))
	rec.Through = m.StreamSeq
	fold.unreadable(m)
	s.log.Warn("eraser: a stored message is not an event that can be hashed: deleted without being hashed, counted as unhashed in the audit",
		"session", rec.SessionID, "stream_seq", m.StreamSeq, "err", why)
}

// storedTail is where the session's last stored message is, as the
// stream leader answers (logstore.Store.TailPosition), with Tail's
// verdict on it when it is not the session's event (nil: it is).
//
// This is the eraser's acceptance of a session's tail, the one place it
// is decided: an erase goes on past the last message whatever the
// verdict, a body that is not an event (logstore.KindGarbage), a sealed
// body that does not open (KindUnopened) or an event of a newer schema
// stored without SL-Seq (KindNewer). Tail, and every read that starts
// with it, fails on such a message for ever, so refusing it would leave
// the session unerasable; the job deletes every message stored on the
// subject, and counts each as its reads judge it (a message that is not
// an event, or a sealed body that does not open, in Unhashed; one of a
// newer schema is an event, hashed).
//
// A sealed last message whose session key is gone (destroyed around the
// eraser: the session has no erasure record, or the job's is before its
// shred) reads as erased (logstore.ErrKeyGone) for every reader;
// TailPosition answers so, with the position the stream gives that
// message. Here it is accepted as a sealed body that does not open
// (KindUnopened) at that position, so that the erase of such a session
// finishes, its sealed bodies counted in Unhashed.
func (s *Service) storedTail(ctx context.Context, id string) (logstore.Tail, *logstore.UnreadableError, error) {
	t, ue, err := s.st.TailPosition(ctx, id)
	if !errors.Is(err, logstore.ErrKeyGone) || !t.Exists() {
		return t, ue, err
	}
	return t, &logstore.UnreadableError{SessionID: id, StreamSeq: t.StreamSeq, GotSeq: t.Seq, Kind: logstore.KindUnopened, Reason: err.Error()}, nil
}

// hashOne adds m to the digest and the record's count.
func hashOne(h hash.Hash, rec *logstore.Erasure, m *logstore.Msg) {
	h.Write(m.Data)
	rec.Events++
	rec.Bytes += uint64(len(m.Data))
	rec.LastSeq = rec.Events
	if v, err := strconv.ParseUint(m.Header.Get(logstore.HeaderSeq), 10, 64); err == nil {
		rec.LastSeq = v
	}
	rec.Through = m.StreamSeq
}

// descendants lists every session forked (directly or not) from root,
// parents before children, from each session's session/created: the
// links outlive an erased parent, so a repeated cascade finds them again.
func (s *Service) descendants(ctx context.Context, root string) ([]string, error) {
	list, err := s.st.ListSessions(ctx)
	if err != nil {
		return nil, err
	}
	children := map[string][]string{}
	for _, sc := range list {
		m, err := s.st.NextAfter(ctx, sc.ID, 0)
		if err != nil {
			return nil, err
		}
		if m == nil {
			continue
		}
		e, err := schema.Decode(m.Data)
		if err != nil || e.Type != schema.TypeSessionCreated {
			continue
		}
		var d schema.SessionCreated
		if json.Unmarshal(e.Data, &d) != nil || d.Parent == nil || d.Parent.SessionID == sc.ID {
			continue
		}
		children[d.Parent.SessionID] = append(children[d.Parent.SessionID], sc.ID)
	}
	var out []string
	seen := map[string]bool{root: true}
	for q := []string{root}; len(q) > 0; q = q[1:] {
		for _, c := range children[q[0]] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				q = append(q, c)
			}
		}
	}
	return out, nil
}

func (s *Service) handleErase(ctx context.Context, m *nats.Msg) {
	var req EraseRequest
	if err := schema.Unmarshal(m.Data, &req); err != nil {
		s.respondErr(m.Reply, ErrorDetail{Code: schema.CodeBadRequest, Message: "request: " + err.Error()})
		return
	}
	ids, err := s.acceptErase(ctx, req)
	if err != nil {
		s.respondErr(m.Reply, errorDetail(err))
		return
	}
	// The jobs run on whatever the request does; it waits a little for
	// them, so a small erase answers done.
	ends := make([]<-chan struct{}, len(ids))
	for i, id := range ids {
		ends[i] = s.startErase(id)
	}
	wait := time.NewTimer(eraseAnswerWait)
	defer wait.Stop()
	for _, end := range ends {
		select {
		case <-end:
		case <-wait.C:
		case <-ctx.Done():
		}
	}
	out, err := s.eraseProgress(ctx, req.SessionID, ids)
	if err != nil {
		s.respondErr(m.Reply, errorDetail(err))
		return
	}
	body, _ := json.Marshal(out)
	if wire.Answerable(m.Reply) {
		if err := s.nc.Publish(m.Reply, body); err != nil {
			s.log.Warn("eraser: reply", "err", err)
		}
	}
}

// giveBack takes the erased session and its bytes (hashed, Bytes, and
// the stored bodies of the unhashed messages, UnhashedBytes) off its
// tenant's usage (ADR 010), before the job's record leaves the phase: once, though the
// two are not one write, since the give-back names the session in the
// tenant's value and a job resumed after a cut between them finds it
// there (logstore.GiveBackErased); forgetGiveBack drops the name once the
// record has moved on.
func (s *Service) giveBack(ctx context.Context, rec logstore.Erasure) error {
	if !givesBack(rec) {
		return nil
	}
	_, err := s.st.GiveBackErased(ctx, rec.SessionID, logstore.TenantUsage{Sessions: -1, Bytes: -int64(rec.Bytes + rec.UnhashedBytes)})
	if errors.Is(err, logstore.ErrNoUsageBucket) {
		return nil // no writer of this version counted anything
	}
	return err
}

// givesBack reports whether the job deleted messages of the session,
// hashed or not, so that it gives the session back: one whose messages
// were all unhashed (its key gone, say) was counted as any.
func givesBack(rec logstore.Erasure) bool { return rec.Events > 0 || rec.Unhashed > 0 }

// forgetGiveBack drops the session's name from its tenant's usage value
// once its record is past the give-back (again on a resumed job: a
// repeat writes nothing).
func (s *Service) forgetGiveBack(ctx context.Context, rec logstore.Erasure) error {
	if !givesBack(rec) {
		return nil
	}
	err := s.st.ForgetGiveBack(ctx, rec.SessionID)
	if errors.Is(err, logstore.ErrNoUsageBucket) {
		return nil
	}
	return err
}

package repairer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/wire"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Erasure (DESIGN.md section 14) lives in the repairer: it is the one
// service whose NATS user may delete stored messages (deploy/nats, the
// "eraser" permissions), and retention, which erases, runs beside its
// sweeps.

// The wire types of sessions.api.erase (defined in pkg/api).
type (
	EraseRequest = api.EraseRequest
	EraseReply   = api.EraseReply
)

// The steps of one session's erase, in order; a test hook may stop the
// erase after any of them, as a kill would.
const (
	StepMarked  = "marked"  // the erasure record exists: the id is refused, reads answer erased
	StepHashed  = "hashed"  // the digest of the bodies is in the record
	StepDeleted = "deleted" // one more message deleted (called per message)
	StepRecords = "records" // lease, claim and fork record dropped
	StepAudited = "audited" // the audit record is written
)

// Erase erases a session (and with Cascade its fork descendants). Every
// step is idempotent: an erase interrupted anywhere is finished by
// repeating it, and the audit stream keeps one record per session.
func (s *Service) Erase(ctx context.Context, req EraseRequest) (EraseReply, error) {
	if err := logstore.ValidateSessionID(req.SessionID); err != nil {
		return EraseReply{}, err
	}
	if req.Reason == "" || req.By == "" {
		return EraseReply{}, schema.Errorf(schema.CodeBadRequest, "reason and by are required")
	}
	if err := s.st.CheckErasable(ctx, req.SessionID); err != nil {
		// Refused before anything is marked: the session stays readable.
		return EraseReply{}, schema.Errorf(schema.CodeInternal, "erase: %v", err)
	}
	rec, _, err := s.st.ErasureOf(ctx, req.SessionID)
	if err != nil {
		return EraseReply{}, schema.Errorf(schema.CodeNotCommitted, "erase: %v", err)
	}
	if rec == nil {
		m, err := s.st.NextAfter(ctx, req.SessionID, 0)
		if err != nil {
			return EraseReply{}, schema.Errorf(schema.CodeNotCommitted, "erase: %v", err)
		}
		if m == nil {
			return EraseReply{}, schema.Errorf(schema.CodeNotFound, "session %s does not exist", req.SessionID)
		}
	}
	ids := []string{req.SessionID}
	if req.Cascade {
		desc, err := s.descendants(ctx, req.SessionID)
		if err != nil {
			return EraseReply{}, schema.Errorf(schema.CodeNotCommitted, "erase: descendants: %v", err)
		}
		ids = append(ids, desc...)
	}
	out := EraseReply{SessionID: req.SessionID, Erased: []string{}}
	for _, id := range ids {
		n, err := s.eraseOne(ctx, id, req.By, req.Reason)
		if err != nil {
			return out, err
		}
		out.Erased = append(out.Erased, id)
		out.Events += n
	}
	return out, nil
}

func (s *Service) step(name string) error {
	if h := s.eraseStep.Load(); h != nil {
		return (*h)(name)
	}
	return nil
}

// eraseOne runs the steps for one session: mark, hash, delete, drop the
// records, audit, done.
func (s *Service) eraseOne(ctx context.Context, id, by, reason string) (uint64, error) {
	unlock := s.lock(id)
	defer unlock()
	fail := func(err error) (uint64, error) {
		var se *schema.Error
		if errors.As(err, &se) {
			return 0, err
		}
		return 0, schema.Errorf(schema.CodeNotCommitted, "erase %s (repeat it to finish): %v", id, err)
	}
	rec, rev, err := s.st.MarkErased(ctx, logstore.Erasure{SessionID: id, By: by, Reason: reason,
		ErasedAt: s.now().UTC().Format(time.RFC3339Nano)})
	if err != nil {
		return fail(err)
	}
	if rec.Done {
		return rec.Events, nil
	}
	if err := s.step(StepMarked); err != nil {
		return fail(err)
	}
	if !rec.Hashed {
		// Nothing is deleted before the digest is recorded, so a repeat
		// hashes the same bodies.
		if err := s.hashInto(ctx, &rec); err != nil {
			return fail(err)
		}
		if rev, err = s.st.UpdateErasure(ctx, rec, rev); err != nil {
			return fail(err)
		}
		if err := s.step(StepHashed); err != nil {
			return fail(err)
		}
	}
	if _, err := s.st.EraseEvents(ctx, id, func() error { return s.step(StepDeleted) }); err != nil {
		return fail(err)
	}
	s.states.Remove(id)
	s.forgetExpiry(id)
	if err := s.st.DropSessionRecords(ctx, id); err != nil {
		return fail(err)
	}
	if err := s.step(StepRecords); err != nil {
		return fail(err)
	}
	if err := s.st.WriteAudit(ctx, rec.Audit()); err != nil {
		return fail(err)
	}
	if err := s.step(StepAudited); err != nil {
		return fail(err)
	}
	rec.Done = true
	if _, err := s.st.UpdateErasure(ctx, rec, rev); err != nil {
		return fail(err)
	}
	s.log.Info("repairer: erased", "session", id, "events", rec.Events, "by", by)
	return rec.Events, nil
}

// hashInto records the digest of the session's stored bodies in seq
// order, their number and the last seq.
func (s *Service) hashInto(ctx context.Context, rec *logstore.Erasure) error {
	h := sha256.New()
	var after, n, last uint64
	for {
		m, err := s.st.NextAfter(ctx, rec.SessionID, after)
		if err != nil {
			return err
		}
		if m == nil {
			break
		}
		h.Write(m.Data)
		n++
		last = n
		if v, err := strconv.ParseUint(m.Header.Get(logstore.HeaderSeq), 10, 64); err == nil {
			last = v
		}
		after = m.StreamSeq
	}
	rec.Hashed, rec.Events, rec.LastSeq, rec.SHA256 = true, n, last, hex.EncodeToString(h.Sum(nil))
	return nil
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
	out, err := s.Erase(ctx, req)
	if err != nil {
		s.respondErr(m.Reply, errorDetail(err))
		return
	}
	body, _ := json.Marshal(out)
	if wire.Answerable(m.Reply) {
		if err := s.nc.Publish(m.Reply, body); err != nil {
			s.log.Warn("repairer: reply", "err", err)
		}
	}
}

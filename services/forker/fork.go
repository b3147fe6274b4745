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
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
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
	cut, err := s.check(&r)
	if err != nil {
		return Reply{}, err
	}
	k, depth, err := s.resolve(ctx, r.ParentID, cut)
	if err != nil {
		return Reply{}, err
	}
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
	}
	// A child id that holds another session (or another fork) is taken.
	// The same fork asked again (a retry) finds its own events and is
	// finished or answered as done.
	if err := s.claimChild(ctx, p); err != nil {
		return Reply{}, err
	}
	if !s.markInflight(p.ChildID) {
		return Reply{}, schema.Errorf(schema.CodeConflict, "child %s is being forked right now", p.ChildID)
	}
	defer s.doneInflight(p.ChildID)
	s.m.inflight.Inc()
	defer s.m.inflight.Dec()
	if err := s.finish(ctx, p); err != nil {
		if errors.Is(err, errNotOurs) {
			s.dropRecord(p)
			return Reply{}, schema.Errorf(schema.CodeConflict, "child id %s is taken", p.ChildID)
		}
		var nw *nothingWritten
		if errors.As(err, &nw) {
			s.dropRecord(p)
			return Reply{}, nw.err
		}
		var perm *permanentError
		if errors.As(err, &perm) {
			s.abandon(ctx, p, err)
			return Reply{}, perm.err
		}
		// The record stays: a sweep finishes the copy.
		s.log.Warn("fork copy interrupted; a sweep will finish it", "child", p.ChildID, "parent", p.ParentID, "err", err)
		return Reply{}, err
	}
	s.dropRecord(p)
	return p.reply(), nil
}

// check validates the request and fills its defaults.
func (s *Service) check(r *Request) (session.Cut, error) {
	var cut session.Cut
	if r.ParentID == "" {
		return cut, badRequest("parentId is required")
	}
	if !schema.ValidSessionID(r.ParentID) {
		return cut, badRequest("parentId %q is not a valid session id", clip(r.ParentID))
	}
	if r.ChildID == "" {
		r.ChildID = s.cfg.NewID()
	}
	if !schema.ValidSessionID(r.ChildID) {
		return cut, badRequest("childId %q is not a valid session id", clip(r.ChildID))
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
		return cut, badRequest("workspace must be %q or %q, got %q", schema.WorkspaceShared, schema.WorkspaceIsolated, clip(r.Workspace))
	}
	if r.At != nil {
		if r.At.Seq != nil && r.At.TurnID != "" {
			return cut, badRequest("at is a seq or a turnId, not both")
		}
		if r.At.TurnID != "" && !schema.ValidItemID(r.At.TurnID) {
			return cut, badRequest("at.turnId %q is not a valid id", clip(r.At.TurnID))
		}
		cut.Seq, cut.TurnID = r.At.Seq, r.At.TurnID
	}
	return cut, nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// resolve scans the parent (only as far as the cut needs) and returns the
// seed length and the child's depth.
func (s *Service) resolve(ctx context.Context, parent string, cut session.Cut) (uint64, int, error) {
	sp := session.NewSafePoints(parent)
	tail, err := readDecoded(ctx, s.st, parent, nil, func(m *logstore.Msg, e schema.Envelope, err error) error {
		if err != nil {
			return schema.Errorf(schema.CodeUnreadable, "parent %s at stream seq %d: %v", parent, m.StreamSeq, err)
		}
		if err := sp.Add(&e); err != nil {
			return schema.Errorf(schema.CodeUnreadable, "parent %s cannot be folded at seq %d: %v", parent, e.Seq, err)
		}
		if sp.Decided(cut) {
			return logstore.ErrStop
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	if !tail.Exists() {
		return 0, 0, schema.Errorf(schema.CodeNotFound, "parent session %s does not exist", parent)
	}
	k, err := sp.Resolve(cut)
	if err != nil {
		return 0, 0, err
	}
	depth := 1
	if pp := sp.State().Meta.Parent; pp != nil {
		depth = pp.Depth + 1
	}
	return k, depth, nil
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
func (s *Service) claimChild(ctx context.Context, p *plan) error {
	first, err := s.st.NextAfter(ctx, p.ChildID, 0)
	if err != nil {
		return fmt.Errorf("forker: read child %s: %w", p.ChildID, err)
	}
	if first != nil && !p.ours(eventIDOf(first)) {
		t, err := s.st.Tail(ctx, p.ChildID)
		if err != nil {
			return err
		}
		cur := t.Seq
		return &schema.Error{Code: schema.CodeConflict, Index: -1, CurrentSeq: &cur,
			Message: fmt.Sprintf("child id %s is taken: that session has %d events", p.ChildID, t.Seq)}
	}
	b, _ := json.Marshal(p)
	if _, err := s.bucket().Create(ctx, p.ChildID, b); err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("forker: record %s: %w", p.ChildID, err)
		}
		e, gerr := s.bucket().Get(ctx, p.ChildID)
		if gerr != nil {
			return fmt.Errorf("forker: record %s: %w", p.ChildID, gerr)
		}
		var other plan
		if json.Unmarshal(e.Value(), &other) != nil || other.OpID != p.OpID {
			return schema.Errorf(schema.CodeConflict, "child id %s is being forked from %s", p.ChildID, other.ParentID)
		}
		// The same fork, left by a crash or asked again: take it on.
		if _, err := s.bucket().Put(ctx, p.ChildID, b); err != nil {
			return fmt.Errorf("forker: record %s: %w", p.ChildID, err)
		}
	}
	return nil
}

func eventIDOf(m *logstore.Msg) string {
	id := m.Header.Get(logstore.HeaderMsgID)
	if i := strings.IndexByte(id, ':'); i >= 0 {
		return id[i+1:]
	}
	return id
}

func (s *Service) dropRecord(p *plan) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.bucket().Purge(ctx, p.ChildID); err != nil {
		s.log.Warn("drop fork record", "child", p.ChildID, "err", err)
	}
}

// finish brings the child to its fork/committed, from wherever it is: not
// written yet, part-copied by a forker that crashed, or done.
func (s *Service) finish(ctx context.Context, p *plan) error {
	cs := session.New(p.ChildID)
	var foreign bool
	tail, err := s.st.ReadSession(ctx, p.ChildID, 0, func(m *logstore.Msg) error {
		if !p.ours(eventIDOf(m)) {
			foreign = true
			return logstore.ErrStop
		}
		e, err := schema.Decode(m.Data)
		if err != nil {
			return &permanentError{schema.Errorf(schema.CodeUnreadable, "child %s at stream seq %d: %v", p.ChildID, m.StreamSeq, err)}
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
	return s.copyPrefix(ctx, p, cs, tail)
}

// copyPrefix appends the parent's events cs.LastSeq+1..SeedLength (or the
// whole seed when cs is empty) and fork/committed, in batches, reading the
// parent as a stream so memory stays at about two batches: the one being
// appended and the one being prepared. A batch's expected stream seq is the
// previous batch's last, so batches go one at a time, but the next one is
// read, decoded and folded while the store commits the last.
func (s *Service) copyPrefix(ctx context.Context, p *plan, cs *session.State, tail logstore.Tail) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fresh := cs.LastSeq == 0
	batches := make(chan []schema.Envelope)
	appended := make(chan error, 1)
	go func() { appended <- s.appendBatches(ctx, p, tail.StreamSeq, !fresh, batches) }()
	// send hands a full batch to the appender; an appender that failed
	// ends the copy.
	send := func(b []schema.Envelope) error {
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
	batch := make([]schema.Envelope, 0, s.cfg.BatchSize)
	add := func(e schema.Envelope) error {
		if err := cs.Apply(&e); err != nil {
			return &permanentError{schema.Errorf(schema.CodeUnreadable, "copy of %s seq %d does not fold into the child: %v", p.ParentID, e.Seq, err)}
		}
		batch = append(batch, e)
		if len(batch) >= s.cfg.BatchSize {
			full := batch
			batch = make([]schema.Envelope, 0, s.cfg.BatchSize)
			return send(full)
		}
		return nil
	}
	// Seqs already in the child are skipped by header, before decoding.
	have := cs.LastSeq
	pre := func(m *logstore.Msg) (skip, stop bool) {
		seq, err := strconv.ParseUint(m.Header.Get(logstore.HeaderSeq), 10, 64)
		if err != nil {
			return false, false // the body tells
		}
		return seq <= have, seq > p.SeedLength
	}
	_, err := readDecoded(ctx, s.st, p.ParentID, pre, func(m *logstore.Msg, e schema.Envelope, err error) error {
		if err != nil {
			return &permanentError{schema.Errorf(schema.CodeUnreadable, "parent %s at stream seq %d: %v", p.ParentID, m.StreamSeq, err)}
		}
		switch {
		case e.Seq <= cs.LastSeq:
			return nil
		case e.Seq > p.SeedLength:
			return logstore.ErrStop
		case e.Seq == 1:
			c, err := s.created(p, &e)
			if err != nil {
				return err
			}
			if err := add(c); err != nil {
				return err
			}
		default:
			e.SessionID, e.EventID, e.Synthetic = p.ChildID, p.eventID(e.Seq), true
			if err := add(e); err != nil {
				return err
			}
		}
		if e.Seq == p.SeedLength {
			return logstore.ErrStop
		}
		return nil
	})
	if err != nil {
		return finish(err)
	}
	if cs.LastSeq != p.SeedLength {
		return finish(&permanentError{schema.Errorf(schema.CodeNotFound, "parent %s ends before seq %d", p.ParentID, p.SeedLength)})
	}
	data, _ := json.Marshal(schema.ForkCommitted{SeedLength: p.SeedLength})
	commit := schema.Envelope{
		SchemaVersion: schema.Version, SessionID: p.ChildID, Seq: p.SeedLength + 1, EventID: p.eventID(p.SeedLength + 1),
		Time: s.cfg.Now().UTC(), Type: schema.TypeForkCommitted, Synthetic: true, Data: data,
	}
	if err := add(commit); err != nil {
		return finish(err)
	}
	if cs.ForkCommittedSeq != p.SeedLength+1 {
		return finish(&permanentError{schema.Errorf(schema.CodeInternal, "child %s would not commit at seq %d", p.ChildID, p.SeedLength+1)})
	}
	if len(batch) > 0 {
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

// appendBatches appends each batch after the previous one and renews the
// copy's record every StaleAfter/3. wrote says whether the child already
// has events of this copy (a conflict on the first batch of a fresh child
// means the child id is taken).
func (s *Service) appendBatches(ctx context.Context, p *plan, expected uint64, wrote bool, batches <-chan []schema.Envelope) error {
	lastBeat := time.Now()
	for batch := range batches {
		res, err := s.st.Append(ctx, logstore.AppendRequest{SessionID: p.ChildID, ExpectedStreamSeq: expected, Events: batch})
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
		s.m.events.Add(float64(len(batch)))
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
	if _, err := s.bucket().Put(ctx, p.ChildID, b); err != nil {
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
	if first == nil || !p.ours(eventIDOf(first)) {
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

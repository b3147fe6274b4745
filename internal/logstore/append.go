package logstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// AppendRequest is one atomic append to one session, as the store makes
// it: after the writer (or a copier) has judged the events against the
// session's state, with complete envelopes and the stream's per-subject
// expectation, and optionally their bodies and chain hashes made
// beforehand. It is not the wire's api.AppendRequest (what an agent asks
// for: an expected seq, a holder and its lease), which the writer turns
// into this one.
type AppendRequest struct {
	SessionID string
	// ExpectedStreamSeq is the stream sequence of the session's last event
	// (0: the session must have no event). It is sent as the plain
	// per-subject Nats-Expected-Last-Subject-Sequence on the first message.
	ExpectedStreamSeq uint64
	// Events are complete envelopes (schemaVersion, sessionId, seq,
	// eventId, time set), contiguous in seq.
	Events []schema.Envelope
	// Bodies, if set, holds each event's schema.Encode, made beforehand
	// (a copier that splices stored bodies): Append sends them as they
	// are, and of Events reads only the fields of the headers and ids.
	Bodies [][]byte
	// Hashes, if set, holds ChainHash of each of Bodies, made beforehand
	// (a copier hashes its next batch while the store commits the last):
	// Append then hashes no body itself.
	Hashes []string
	// PrevHash is ChainHash of the body stored as the session's event at
	// ExpectedStreamSeq (empty for a new session): the SL-Prev of the
	// first event. A caller that keeps the session's state passes it (the
	// writer: no read per append); left empty for an existing session,
	// Append takes it from its cached tail or reads that body.
	PrevHash string
}

// AppendResult describes a committed append.
type AppendResult struct {
	FirstSeq, LastSeq uint64
	// StreamSeq is the stream sequence of the last event.
	StreamSeq uint64
	// Duplicate: every event was already stored before this request.
	Duplicate bool
	// Resolved: an attempt went unanswered and the commit was established
	// by finding the request's event ids in the log. The events are
	// stored, but another writer sending the same ids (a repairer replica
	// planning the same state) may be the one that stored them.
	Resolved bool
	// Hash is ChainHash of the last event's stored body: the PrevHash of
	// the session's next append. Empty when the append was found stored
	// (Duplicate, Resolved): those bodies may be another sender's.
	Hash string
	// Bytes is the size of the events' stored bodies (what an erase of
	// them reads): the writer's count of a tenant's stored bytes.
	Bytes int
}

// Sentinels; errors.Is matches them on the code alone.
var (
	ErrConflict       = &schema.Error{Code: schema.CodeConflict, Index: -1}
	ErrNotCommitted   = &schema.Error{Code: schema.CodeNotCommitted, Index: -1}
	ErrOutcomeUnknown = &schema.Error{Code: schema.CodeOutcomeUnknown, Index: -1}
)

// ConflictError: the session's tail was not the expected one, so nothing
// of this request was stored.
type ConflictError struct {
	Tail     Tail
	Expected uint64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("conflict: expected the session's last event at stream seq %d, it is seq %d at stream seq %d", e.Expected, e.Tail.Seq, e.Tail.StreamSeq)
}

// Unwrap exposes the contract error (code conflict, currentSeq).
func (e *ConflictError) Unwrap() error {
	cur := e.Tail.Seq
	return &schema.Error{Code: schema.CodeConflict, Message: e.Error(), Index: -1, CurrentSeq: &cur}
}

// FaultStage names a point where tests inject faults.
type FaultStage string

// FaultAck runs after JetStream answered an append: a non-nil error from
// the hook throws the answer away, as if the reply was lost in transit.
const FaultAck FaultStage = "ack"

// errCodeDuplicateInProcess is JetStream's "duplicate message id is in
// process" (JSStreamDuplicateMessageConflict), which nats.go does not name.
const errCodeDuplicateInProcess jetstream.ErrorCode = 10158

// outcome is the classification of one publish attempt.
type outcome int

const (
	committed outcome = iota
	duplicate
	wrongSeq
	refused  // definite: nothing stored
	retrying // definite for this attempt, but retryable (inflight limit, no responders)
	unknown  // sent, no answer
)

func (o outcome) String() string {
	switch o {
	case committed:
		return "committed"
	case duplicate:
		return "duplicate"
	case wrongSeq:
		return "wrong_last_sequence"
	case refused:
		return "refused"
	case retrying:
		return "retrying"
	}
	return "unknown"
}

func classify(err error) outcome {
	if err == nil {
		return committed
	}
	if errors.Is(err, errRefusedLocally) {
		return retrying
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			return wrongSeq
		case jetstreamext.JSErrCodeBatchPublishDuplicateMsgID:
			return duplicate
		case jetstreamext.JSErrCodeAtomicPublishTooManyInflight, jetstreamext.JSErrCodeBatchPublishTooManyInflight,
			// Without flow control, a batch the server could not open
			// shows as incomplete at its commit.
			jetstreamext.JSErrCodeBatchPublishIncomplete:
			return retrying
		case errCodeDuplicateInProcess:
			// A message with one of these ids is being stored right now
			// (an earlier send of this append, or another process
			// sending the same ids): it may yet commit. Not a refusal.
			return unknown
		}
		if apiErr.Code == 503 || apiErr.Code == 429 {
			// No leader yet, or too many requests in flight.
			return retrying
		}
		return refused
	}
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse):
		return retrying
	case errors.Is(err, nats.ErrMaxPayload), errors.Is(err, nats.ErrBadSubject):
		return refused
	}
	return unknown
}

// Messages builds the messages Append sends for req: on the session's
// subject, each encoded event (or its given body) with its id, type, seq
// and schema headers, the plain per-subject expectation on the first only.
// A caller that commits several sessions' appends in one atomic batch
// builds them here. Bad requests are refused with the contract's codes.
func (s *Store) Messages(req *AppendRequest) ([]*nats.Msg, error) {
	_, msgs, _, err := s.located(req)
	return msgs, err
}

// located checks req, locates its session and builds its messages; last
// is ChainHash of the last one's body.
func (s *Store) located(req *AppendRequest) (_ Location, _ []*nats.Msg, last string, _ error) {
	if len(req.Events) == 0 {
		return Location{}, nil, "", schema.Errorf(schema.CodeBadRequest, "no events")
	}
	if len(req.Events) > schema.MaxBatchEvents {
		return Location{}, nil, "", schema.Errorf(schema.CodeTooLarge, "%d events, at most %d per append", len(req.Events), schema.MaxBatchEvents)
	}
	loc, err := s.Locate(req.SessionID)
	if err != nil {
		return Location{}, nil, "", err
	}
	prev, err := s.prevHash(req, loc)
	if err != nil {
		return Location{}, nil, "", err
	}
	msgs, last, err := s.chain(req, loc.Subject, prev)
	return loc, msgs, last, err
}

func (s *Store) messages(req *AppendRequest, subject, prev string) ([]*nats.Msg, error) {
	msgs, _, err := s.chain(req, subject, prev)
	return msgs, err
}

// chain is messages that also returns ChainHash of the last message's
// body (the SL-Prev of the session's next event), which it computes for
// the chain anyway: the caller need not hash that body again.
func (s *Store) chain(req *AppendRequest, subject, prev string) (msgs []*nats.Msg, last string, err error) {
	if req.Bodies != nil && len(req.Bodies) != len(req.Events) {
		return nil, "", schema.Errorf(schema.CodeBadRequest, "%d bodies for %d events", len(req.Bodies), len(req.Events))
	}
	if req.Hashes != nil && (req.Bodies == nil || len(req.Hashes) != len(req.Bodies)) {
		return nil, "", schema.Errorf(schema.CodeBadRequest, "%d hashes for %d bodies", len(req.Hashes), len(req.Bodies))
	}
	msgs = make([]*nats.Msg, len(req.Events))
	ems := make([]eventMsg, len(req.Events))
	for i := range req.Events {
		e := &req.Events[i]
		var body []byte
		if req.Bodies != nil {
			body = req.Bodies[i]
		} else if body, err = schema.Encode(e); err != nil {
			return nil, "", schema.Errorf(schema.CodeInvalidEvent, "encode event %d: %v", i, err).WithIndex(i)
		}
		if len(body) > s.cfg.MaxEventBytes {
			return nil, "", schema.Errorf(schema.CodeTooLarge, "event is %d bytes, limit %d", len(body), s.cfg.MaxEventBytes).WithIndex(i)
		}
		em := &ems[i]
		// The header's values share one array, and the strings this
		// append makes (the message id, the seq, the expectation and the
		// chain hash of body) one string: an allocation each, not one
		// per value.
		em.vals = [6]string{"", e.Type, "", strconv.Itoa(e.SchemaVersion), "", prev}
		expected := i == 0 // an expectation on a later message of the same subject fails the batch (10164): only the first carries it
		made := em.spell(req, e, body, expected)
		h := make(nats.Header, 6)
		h[HeaderMsgID], h[HeaderType], h[HeaderSeq], h[HeaderSchema] = em.vals[0:1:1], em.vals[1:2:2], em.vals[2:3:3], em.vals[3:4:4]
		if prev != "" {
			h[HeaderPrev] = em.vals[5:6:6]
		}
		if expected {
			h[HeaderExpectedSeq] = em.vals[4:5:5]
		}
		// The chain: the next event is written after this body.
		if req.Hashes != nil {
			prev = req.Hashes[i]
		} else {
			prev = made
		}
		em.m = nats.Msg{Subject: subject, Header: h, Data: body}
		msgs[i] = &em.m
	}
	return msgs, prev, nil
}

// eventMsg is one event's message and the values of its header,
// allocated together.
type eventMsg struct {
	m    nats.Msg
	vals [6]string
}

// spell sets em.vals' message id (0), seq (2) and, when expected, the
// expectation (4) as substrings of one string, which also holds body's
// ChainHash unless req brings the hashes; it returns that hash.
func (em *eventMsg) spell(req *AppendRequest, e *schema.Envelope, body []byte, expected bool) (hash string) {
	var b strings.Builder
	b.Grow(len(req.SessionID) + 1 + len(e.EventID) + 2*20 + 2*len(ChainSum{}))
	var num [20]byte
	b.WriteString(req.SessionID)
	b.WriteByte(':')
	b.WriteString(e.EventID)
	ends := [4]int{b.Len()}
	b.Write(strconv.AppendUint(num[:0], e.Seq, 10))
	ends[1] = b.Len()
	if expected {
		b.Write(strconv.AppendUint(num[:0], req.ExpectedStreamSeq, 10))
	}
	ends[2] = b.Len()
	if req.Hashes == nil {
		sum := ChainSumOf(body)
		var spelt [2 * len(ChainSum{})]byte
		hex.Encode(spelt[:], sum[:])
		b.Write(spelt[:])
	}
	ends[3] = b.Len()
	all := b.String()
	em.vals[0], em.vals[2] = all[:ends[0]], all[ends[0]:ends[1]]
	if expected {
		em.vals[4] = all[ends[1]:ends[2]]
	}
	return all[ends[2]:ends[3]]
}

// publish sends the messages once: a plain publish for one event, an
// atomic batch otherwise. It returns the stream seq of the last message.
func (s *Store) publish(ctx context.Context, msgs []*nats.Msg) (uint64, bool, error) {
	if err := s.cannotStore(); err != nil {
		// Refused before sending: the caller's answer is definite.
		return 0, false, fmt.Errorf("%w: %w", errRefusedLocally, err)
	}
	if len(msgs) == 1 {
		return s.publishOne(ctx, msgs[0])
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return 0, false, fmt.Errorf("%w: waiting for a batch slot: %w", errRefusedLocally, ctx.Err())
	}
	defer func() { <-s.sem }()
	b, err := jetstreamext.NewBatchPublisher(s.js, jetstreamext.BatchFlowControl{AckFirst: false})
	if err != nil {
		return 0, false, fmt.Errorf("%w: %w", errRefusedLocally, err)
	}
	for _, m := range msgs[:len(msgs)-1] {
		if err := b.AddMsg(m); err != nil {
			// The commit was never sent: the server abandons the batch.
			_ = b.Discard()
			return 0, false, fmt.Errorf("%w: %w", errRefusedLocally, err)
		}
	}
	ack, err := b.CommitMsg(ctx, msgs[len(msgs)-1])
	if err != nil {
		return 0, false, err
	}
	return ack.Sequence, false, nil
}

// cannotStore is Config.CannotStore's answer, nil without one.
func (s *Store) cannotStore() error {
	if s.cfg.CannotStore == nil {
		return nil
	}
	return s.cfg.CannotStore()
}

// errRefusedLocally marks failures before the commit left this process.
var errRefusedLocally = errors.New("not sent")

// Append stores the events of req atomically, after the session's event at
// req.ExpectedStreamSeq. It returns a *ConflictError (code conflict), an
// error with code not_committed or too_large (nothing stored), or one with
// code outcome_unknown (sent; no answer could be had, retry the same
// request). Unknown outcomes are first resolved here: the same messages are
// re-sent (same Nats-Msg-Id) and, where the stream answers "wrong last
// sequence", the stored events after the expected position are compared
// by event id.
func (s *Store) Append(ctx context.Context, req AppendRequest) (AppendResult, error) {
	loc, msgs, last, err := s.located(&req)
	if err != nil {
		return AppendResult{}, err
	}
	// The hash of the last body (req.Hashes' last when given).
	res := AppendResult{FirstSeq: req.Events[0].Seq, LastSeq: req.Events[len(req.Events)-1].Seq, Hash: last}
	for _, m := range msgs {
		res.Bytes += len(m.Data)
	}
	// Sealed once: a re-send sends the very bytes again.
	wire, err := s.sealed(ctx, req.SessionID, msgs)
	if err != nil {
		return AppendResult{}, err
	}
	var lastErr error
	for attempt := 0; ; attempt++ {
		streamSeq, dup, err := s.send(ctx, loc.Stream, wire)
		if err == nil && s.cfg.FaultHook != nil {
			if herr := s.cfg.FaultHook(FaultAck); herr != nil {
				err = herr
			}
		}
		oc := classify(err)
		if oc != committed {
			s.log.Debug("logstore: append not acknowledged", "session", req.SessionID, "expectedStreamSeq", req.ExpectedStreamSeq,
				"attempt", attempt, "outcome", oc.String(), "err", err)
		}
		switch oc {
		case committed:
			res.StreamSeq, res.Duplicate = streamSeq, dup && attempt == 0
			res.Resolved = dup && attempt > 0
			if dup {
				res.Hash = ""
			}
			s.committed(req, res)
			return res, nil
		case duplicate, wrongSeq:
			// Found in the log, r leaves Hash empty: the stored bodies
			// may be another sender's of the same ids.
			r, rerr := s.resolve(ctx, &req, loc)
			if rerr == nil {
				r.Duplicate = attempt == 0
				r.Resolved = attempt > 0
				s.committed(req, r)
				return r, nil
			}
			if definite(rerr) {
				// A different event after the expected position: this
				// append can never be stored.
				s.tails.Remove(req.SessionID)
				return AppendResult{}, rerr
			}
			// Nothing after the expected position (yet), so no conflict,
			// whatever the tail reads: whoever refused may be a former
			// leader cut off by a partition that still takes itself for
			// the leader (its refusal and its reads are stale, and the
			// real leader may have stored this very send), or a write to
			// the session is in flight at the leader (its check counts a
			// write it has not applied yet). Look again.
			lastErr = rerr
		case refused:
			if attempt == 0 {
				return AppendResult{}, notCommitted(err)
			}
			// A refusal of a re-send says nothing of the first attempt.
			lastErr = err
		case retrying:
			if attempt == 0 {
				return AppendResult{}, notCommitted(err)
			}
			lastErr = err
		case unknown:
			lastErr = err
		}
		if attempt+1 >= s.cfg.ResolveAttempts {
			break
		}
		// The first attempt may still land; the re-send carries the same
		// ids and expectation, so at most one of them is stored.
		select {
		case <-ctx.Done():
			return AppendResult{}, outcomeUnknown(ctx.Err())
		case <-time.After(backoff(attempt)):
		}
		if r, rerr := s.resolve(ctx, &req, loc); rerr == nil {
			r.Resolved = true
			s.committed(req, r)
			return r, nil
		} else if definite(rerr) {
			s.tails.Remove(req.SessionID)
			return AppendResult{}, rerr
		}
	}
	s.tails.Remove(req.SessionID)
	return AppendResult{}, outcomeUnknown(lastErr)
}

// definite reports whether resolve's answer ends the append: the position
// is taken (conflict), or by a message that is not an event (unreadable).
func definite(rerr error) bool {
	return errors.Is(rerr, ErrConflict) || schema.CodeOf(rerr) == schema.CodeUnreadable
}

func backoff(attempt int) time.Duration {
	d := 50 * time.Millisecond << attempt
	if d > 2*time.Second {
		d = 2 * time.Second
	}
	return d
}

func notCommitted(err error) error {
	return &schema.Error{Code: schema.CodeNotCommitted, Message: fmt.Sprintf("nothing was stored: %v", err), Index: -1}
}

func outcomeUnknown(err error) error {
	return &schema.Error{Code: schema.CodeOutcomeUnknown, Message: fmt.Sprintf("sent, but no acknowledgement came back: %v; retry the same request", err), Index: -1}
}

func (s *Store) committed(req AppendRequest, res AppendResult) {
	last := req.Events[len(req.Events)-1]
	s.tails.Add(req.SessionID, Tail{Seq: res.LastSeq, StreamSeq: res.StreamSeq, EventID: last.EventID, Hash: res.Hash})
}

// storedPast reports whether the stream's leader has stored stream seq
// seq (its last seq stays where it was when the last message is deleted).
func (s *Store) storedPast(ctx context.Context, stream string, seq uint64) bool {
	last, err := s.LastStreamSeq(ctx, stream)
	return err == nil && last >= seq
}

// errNotYet: the events are not stored after the expected position (yet).
var errNotYet = errors.New("logstore: not stored yet")

// resolve decides from the stored log whether req is committed: the first
// message of the session after the expected position carries the request's
// first event id (committed), another id (conflict: the position is taken,
// so this request can never commit), or there is none (not yet).
func (s *Store) resolve(ctx context.Context, req *AppendRequest, loc Location) (AppendResult, error) {
	first, err := s.NextAfter(ctx, req.SessionID, req.ExpectedStreamSeq)
	if err != nil {
		return AppendResult{}, err
	}
	if first == nil {
		if req.ExpectedStreamSeq > 0 {
			// The expected tail is gone from the leader though the stream
			// is past it: an erase deleted it (DESIGN.md section 14), and
			// the position after it can never be taken. Definite: the
			// caller reads the session again. (A tail not stored yet, as a
			// stale read shows, stays unknown.)
			if m, err := s.msgGet(ctx, loc.Stream, msgGetRequest{Seq: req.ExpectedStreamSeq}); err == nil && m == nil &&
				s.storedPast(ctx, loc.Stream, req.ExpectedStreamSeq) {
				t, terr := s.Tail(ctx, req.SessionID)
				if terr != nil && !errors.Is(terr, ErrUnreadable) {
					return AppendResult{}, terr
				}
				return AppendResult{}, &ConflictError{Tail: t, Expected: req.ExpectedStreamSeq}
			}
		}
		return AppendResult{}, errNotYet
	}
	if eventIDOf(first.Header.Get(HeaderMsgID)) != req.Events[0].EventID {
		s.log.Debug("logstore: position taken", "session", req.SessionID, "expectedStreamSeq", req.ExpectedStreamSeq,
			"next", first.Header.Get(HeaderMsgID), "nextStreamSeq", first.StreamSeq)
		t, terr := s.Tail(ctx, req.SessionID)
		if errors.Is(terr, ErrUnreadable) {
			// The position is taken, by a message that is not an event
			// (written around the writer): no append to the session can
			// commit, and saying so is definite.
			return AppendResult{}, schema.Errorf(schema.CodeUnreadable, "the session's position after stream seq %d is taken and its tail is not an event: %v", req.ExpectedStreamSeq, terr)
		}
		if terr != nil {
			return AppendResult{}, terr
		}
		return AppendResult{}, &ConflictError{Tail: t, Expected: req.ExpectedStreamSeq}
	}
	res := AppendResult{FirstSeq: req.Events[0].Seq, LastSeq: req.Events[len(req.Events)-1].Seq, StreamSeq: first.StreamSeq}
	// An atomic batch is stored contiguously; confirm its last event.
	if n := len(req.Events); n > 1 {
		last, err := s.NextAfter(ctx, req.SessionID, first.StreamSeq+uint64(n)-2)
		if err != nil {
			return AppendResult{}, err
		}
		if last == nil || eventIDOf(last.Header.Get(HeaderMsgID)) != req.Events[n-1].EventID {
			return AppendResult{}, fmt.Errorf("logstore: batch of %d found at stream seq %d but its last event is missing", n, first.StreamSeq)
		}
		res.StreamSeq = last.StreamSeq
	}
	return res, nil
}

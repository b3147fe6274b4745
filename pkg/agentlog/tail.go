package agentlog

import (
	"context"
	"fmt"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Log is what AppendSink needs of sessionlog: a session's stored tail, an
// append after it and a fork. ship appends through the Go client, the
// writer's source endpoints through its own append path.
type Log interface {
	// Tail is the session's last seq and the id of the event there (0
	// and "" for a session with none).
	Tail(ctx context.Context, sessionID string) (seq uint64, eventID string, err error)
	// Append appends events (one atomic batch) after seq expected: last
	// is the session's last seq after them, duplicate that the batch was
	// stored already.
	Append(ctx context.Context, sessionID string, expected uint64, events []schema.Envelope) (last uint64, duplicate bool, err error)
	// Fork makes child a fork of parent through seq; a child that exists
	// already is no error.
	Fork(ctx context.Context, parent, child string, seq uint64) error
}

// PreparingLog is a Log that can encode an append ahead of sending it.
// An AppendSink with InFlight prepares each batch before it takes a slot,
// so that a slot is held only while the batch is on its way and being
// stored, not while it is encoded.
type PreparingLog interface {
	Log
	// PrepareAppend encodes what Append(ctx, sessionID, expected, events)
	// sends; the returned send sends it (and resends it on an unknown
	// outcome, as Append does) and answers as Append answers.
	PrepareAppend(sessionID string, expected uint64, events []schema.Envelope) (send func(ctx context.Context) (last uint64, duplicate bool, err error), err error)
}

// DivergedError: the stored session is not a prefix of what the source
// maps to now (the file was rewritten, or its main path moved).
type DivergedError struct {
	Session string
	Seq     uint64
	Stored  string // the stored event id at Seq
	Source  string // the id the source gives that seq
}

func (e *DivergedError) Error() string {
	return fmt.Sprintf("session %s differs from the source at seq %d (stored event %s, the source gives %s)",
		e.Session, e.Seq, e.Stored, e.Source)
}

// DefaultAppendBatch is AppendSink's batch when it names none.
const DefaultAppendBatch = 500

// AppendSink is the step every writer of a source's sessions shares: for
// each session a source maps to, read the stored tail, check that the
// event the source gives that seq is the stored one, and append the events
// after it in batches; a fork child missing from the log is forked first.
// Mapping a source again therefore appends only what is new, and a source
// that no longer maps to what is stored is a *DivergedError.
type AppendSink struct {
	Ctx   context.Context
	Log   Log
	Batch int // events per append (0: DefaultAppendBatch)
	// Finished, when set, is told of each session when its events are in:
	// the session's last seq, the event id there, and how many events this
	// sink added to it.
	Finished func(p Plan, lastSeq uint64, lastID string, added int)
	// InFlight, when set, lets an append go out while the next batch is
	// mapped, holding one of its tokens while it is unanswered; sinks that
	// share it share the bound. A session has at most one append in
	// flight: the writer orders a session's appends by their expected
	// seq, not by their arrival. nil: each append is answered before the
	// sink takes the next event. Call Close when the source is read.
	InFlight chan struct{}

	plan     Plan
	tail     uint64 // stored last seq, as of the last answered append
	tailID   string // stored event id at tail
	pending  []schema.Envelope
	added    int
	inflight chan sentAppend // the append in flight; nil: none
}

// sentAppend is the answer to an append sent by flush: of its events it
// keeps only their number and the last one's id, so that a batch already
// encoded (PreparingLog) holds only its encoding while it waits for a slot
// and is in flight.
type sentAppend struct {
	n         int
	lastID    string
	last      uint64
	duplicate bool
	err       error
}

var _ Sink = (*AppendSink)(nil)

// Session reads the session's tail, forking it first when it is a fork
// child the log does not have.
func (s *AppendSink) Session(p Plan) error {
	// A session's fork or first append waits for the one before it: a
	// branch is forked only after its main session is in.
	if err := s.wait(); err != nil {
		return err
	}
	s.plan, s.pending, s.added = p, s.pending[:0], 0
	var err error
	if s.tail, s.tailID, err = s.Log.Tail(s.Ctx, p.ID); err != nil {
		return fmt.Errorf("read %s: %w", p.ID, err)
	}
	if p.Fork == nil {
		return nil
	}
	if s.tail == 0 {
		if err := s.Log.Fork(s.Ctx, p.Fork.ParentID, p.ID, p.Fork.Seq); err != nil {
			return fmt.Errorf("fork %s from %s at seq %d: %w", p.ID, p.Fork.ParentID, p.Fork.Seq, err)
		}
		if s.tail, s.tailID, err = s.Log.Tail(s.Ctx, p.ID); err != nil {
			return fmt.Errorf("read %s: %w", p.ID, err)
		}
	}
	if s.tail < p.FirstSeq-1 {
		// The forker is still copying (or a forker that restarted will
		// finish or abandon the copy): the next pass continues after it.
		return fmt.Errorf("fork %s holds %d events, %d once its copy is committed: try again", p.ID, s.tail, p.FirstSeq-1)
	}
	return nil
}

// Event passes over the events through the stored tail, checks the one at
// it, and queues the rest. An append in flight holds only events after
// that tail, so a tail it has not advanced yet changes nothing here.
func (s *AppendSink) Event(e schema.Envelope) error {
	switch {
	case e.Seq < s.tail:
		return nil
	case e.Seq == s.tail:
		if e.EventID != s.tailID {
			return &DivergedError{Session: s.plan.ID, Seq: e.Seq, Stored: s.tailID, Source: e.EventID}
		}
		return nil
	}
	e.Seq, e.SessionID = 0, ""
	s.pending = append(s.pending, e)
	if len(s.pending) >= s.batchSize() {
		return s.flush()
	}
	return nil
}

func (s *AppendSink) batchSize() int {
	if s.Batch <= 0 {
		return DefaultAppendBatch
	}
	return s.Batch
}

// flush sends the queued events once the append before them is answered;
// with InFlight it returns without waiting for their answer.
func (s *AppendSink) flush() error {
	if err := s.wait(); err != nil {
		return err
	}
	if len(s.pending) == 0 {
		return nil
	}
	events := s.pending
	if s.InFlight == nil {
		last, dup, err := s.Log.Append(s.Ctx, s.plan.ID, s.tail, events)
		return s.answered(sentAppend{n: len(events), lastID: events[len(events)-1].EventID, last: last, duplicate: dup, err: err})
	}
	id, expected, n, lastID := s.plan.ID, s.tail, len(events), events[len(events)-1].EventID
	batch := events
	send := func(ctx context.Context) (uint64, bool, error) {
		return s.Log.Append(ctx, id, expected, batch)
	}
	if pl, ok := s.Log.(PreparingLog); ok {
		// Encoded before taking a slot: the slot is for the store.
		var err error
		if send, err = pl.PrepareAppend(id, expected, events); err != nil {
			return s.answered(sentAppend{n: n, lastID: lastID, err: err})
		}
	}
	// The batch in flight keeps its array (when it is not encoded yet);
	// the next is mapped into another.
	s.pending = make([]schema.Envelope, 0, cap(events))
	select {
	case s.InFlight <- struct{}{}:
	case <-s.Ctx.Done():
		return s.Ctx.Err()
	}
	done := make(chan sentAppend, 1)
	s.inflight = done
	go func() {
		last, dup, err := send(s.Ctx)
		<-s.InFlight
		done <- sentAppend{n: n, lastID: lastID, last: last, duplicate: dup, err: err}
	}()
	return nil
}

// wait takes the answer of the append in flight, if any.
func (s *AppendSink) wait() error {
	if s.inflight == nil {
		return nil
	}
	a := <-s.inflight
	s.inflight = nil
	return s.answered(a)
}

// answered moves the tail past an append's events.
func (s *AppendSink) answered(a sentAppend) error {
	if a.err != nil {
		return fmt.Errorf("append to %s after seq %d: %w", s.plan.ID, s.tail, a.err)
	}
	s.tail, s.tailID = a.last, a.lastID
	if !a.duplicate {
		s.added += a.n
	}
	if s.InFlight == nil {
		s.pending = s.pending[:0]
	}
	return nil
}

// Done appends what is queued, waits for its answer and reports the
// session.
func (s *AppendSink) Done() error {
	if err := s.flush(); err != nil {
		return err
	}
	if err := s.wait(); err != nil {
		return err
	}
	if s.Finished != nil {
		s.Finished(s.plan, s.tail, s.tailID, s.added)
	}
	return nil
}

// Close waits for an append an error elsewhere left in flight, so nothing
// of the sink outlives the read of its source.
func (s *AppendSink) Close() {
	_ = s.wait()
}

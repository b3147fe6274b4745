package logstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Verdict is what a reader makes of one stored message of a session, read
// in stream order after the events it judged before (DESIGN.md section
// 5, "Reading stored messages"). Every reader of stored events (the
// writer's fold and its read API, the projector, the repairer, the
// forker, the command line) takes it from Judge, so the same stored bytes
// get the same verdict, with the same reason, on every path.
type Verdict int

const (
	// VerdictOK: the session's next event.
	VerdictOK Verdict = iota
	// VerdictCopy: an exact copy of the event judged just before it
	// (same seq, same event id, the same body), as a publish retried past
	// the stream's duplicate window stores it. It is skipped: the event
	// counts once.
	VerdictCopy
	// VerdictUnreadable: not a valid event of the session at this
	// place. Reading stops there; the session is unreadable.
	VerdictUnreadable
)

// Kinds of unreadable message (UnreadableError.Kind).
const (
	KindGarbage     = "garbage"      // the body is not an event
	KindUnopened    = "unopened"     // a sealed body that does not open with its session's key
	KindNewer       = "newer_schema" // an event of a newer schema version than this reader's
	KindForeign     = "foreign"      // an event that names another session
	KindHeaderSeq   = "header_seq"   // the SL-Seq header contradicts the body's seq
	KindUnknownType = "unknown_type" // a type this reader does not know, not marked ignorable
	KindGap         = BreakGap       // seqs are missing before it
	KindReordered   = BreakReordered // a seq at or before one read already
	KindChanged     = BreakChanged   // the previous body is not the one it was written after (SL-Prev)
)

// UnreadableError is the verdict on a stored message that is not the
// session's next valid event. Its text is the same on every path that
// reads the session: "session <id> is unreadable at stream seq <n>:
// <reason>". It is ErrUnreadable, and a schema error of code unreadable.
type UnreadableError struct {
	SessionID string
	// StreamSeq is where the message is stored; AfterSeq the seq of the
	// last event read before it (0: none).
	StreamSeq, AfterSeq uint64
	// GotSeq is the seq the message claims (its body, else its SL-Seq
	// header); 0 when it claims none.
	GotSeq uint64
	Kind   string
	Reason string
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("session %s is unreadable at stream seq %d: %s", e.SessionID, e.StreamSeq, e.Reason)
}

// Unwrap makes the verdict ErrUnreadable and a contract error of code
// unreadable (schema.CodeOf), whatever path returns it.
func (e *UnreadableError) Unwrap() []error {
	return []error{ErrUnreadable, &schema.Error{Code: schema.CodeUnreadable, Message: e.Error()}}
}

// Judge judges a session's stored messages one after the other, in
// stream order. Last is the last event it found (or a copy of it): the
// zero Tail before the session's first message, or where a reader that
// keeps the session's state resumes (a Tail without Hash does not check
// the next SL-Prev; one without EventID takes no message as a copy).
type Judge struct {
	SessionID string
	Last      Tail
	// Unspelled: Last.Hash stays empty, and LastSum is the hash of
	// Last's body instead (the zero ChainSum: unknown, the next SL-Prev
	// is not checked). For a reader that keeps the hash of each session's
	// last event and shows it seldom (the projector's fold).
	Unspelled bool
	LastSum   ChainSum
}

// Next decodes m and judges it (Judged); a Follower's message whose
// sealed body did not open (Msg.Unopened) is judged as a body that does
// not decode, for that reason.
func (j *Judge) Next(m *Msg) (schema.Envelope, Verdict, error) {
	if m.Unopened != nil {
		var ev schema.Envelope
		v, jerr := j.Judged(m, &ev, m.Unopened)
		return ev, v, jerr
	}
	ev, err := schema.Decode(m.Data)
	v, jerr := j.Judged(m, &ev, err)
	return ev, v, jerr
}

// Judged judges m, stored after j.Last, whose body decoded to ev (decErr:
// it did not). The message is the session's next event when it is an
// event (of this schema version or an older one) that names the session,
// whose SL-Seq header (when it has one) is its seq, whose seq is 1 for
// the session's first message and otherwise the one after j.Last's, whose
// SL-Prev (when it has one) is the hash of j.Last's body, and whose type
// this reader knows or may skip. An exact copy of j.Last is VerdictCopy.
// Anything else is VerdictUnreadable with an *UnreadableError; j.Last
// moves on for the other two verdicts.
func (j *Judge) Judged(m *Msg, ev *schema.Envelope, decErr error) (Verdict, error) {
	// The header is read once: the lookup is a map access per event of
	// every reader that judges.
	h := m.Header.Get(HeaderSeq)
	hdr, hdrErr := strconv.ParseUint(h, 10, 64)
	bad := func(kind string, got uint64, reason string) (Verdict, error) {
		return VerdictUnreadable, &UnreadableError{SessionID: j.SessionID, StreamSeq: m.StreamSeq, AfterSeq: j.Last.Seq, GotSeq: got, Kind: kind, Reason: reason}
	}
	if decErr != nil {
		if ue, ok := unopenedVerdict(decErr); ok {
			return VerdictUnreadable, j.after(ue)
		}
		if hdrErr != nil {
			hdr = 0
		}
		if errors.Is(decErr, schema.ErrNewerSchema) {
			return bad(KindNewer, hdr, fmt.Sprintf("the stored event is of a newer schema than this reader's (%v): upgrade the reader", decErr))
		}
		return bad(KindGarbage, hdr, fmt.Sprintf("the stored message is not an event: %v", decErr))
	}
	if ev.SessionID != j.SessionID {
		return bad(KindForeign, ev.Seq, fmt.Sprintf("event %q names session %q", schema.Clip(ev.EventID, 64), schema.Clip(ev.SessionID, 64)))
	}
	if h != "" && (hdrErr != nil || hdr != ev.Seq) {
		return bad(KindHeaderSeq, ev.Seq, fmt.Sprintf("event %q holds seq %d but its %s header says %q", schema.Clip(ev.EventID, 64), ev.Seq, HeaderSeq, schema.Clip(h, 64)))
	}
	sum, hash := ChainSumOf(m.Data), ""
	if !j.Unspelled {
		hash = sum.String()
	}
	last, link := j.Last, j.link()
	if last.StreamSeq != 0 && ev.Seq == last.Seq && last.EventID != "" && ev.EventID == last.EventID && link.is(sum, hash) {
		j.Last.StreamSeq = m.StreamSeq
		return VerdictCopy, nil
	}
	switch {
	case last.StreamSeq == 0 && ev.Seq != 1:
		if ev.Seq == 0 {
			return bad(KindReordered, 0, chainReason(KindReordered, ev.Seq, m, fmt.Sprintf("event %q holds seq 0", schema.Clip(ev.EventID, 64))))
		}
		return bad(KindGap, ev.Seq, chainReason(KindGap, ev.Seq, m, fmt.Sprintf("seq %d is the session's first stored event: %s missing", ev.Seq, seqRange(1, ev.Seq-1))))
	case last.StreamSeq != 0 && ev.Seq <= last.Seq:
		return bad(KindReordered, ev.Seq, chainReason(KindReordered, ev.Seq, m, fmt.Sprintf("event %q holds seq %d but is stored after seq %d (stream seq %d)", schema.Clip(ev.EventID, 64), ev.Seq, last.Seq, last.StreamSeq)))
	}
	if b := CheckLink(link, m, ev.Seq); b != nil {
		return bad(b.Kind, ev.Seq, b.Error())
	}
	if !schema.Known(ev) {
		return bad(KindUnknownType, ev.Seq, fmt.Sprintf("event seq %d has type %q, which this reader does not know and which is not marked ignorable: upgrade the reader", ev.Seq, schema.Clip(ev.Type, 64)))
	}
	j.Last = Tail{Seq: ev.Seq, StreamSeq: m.StreamSeq, EventID: ev.EventID, Hash: hash}
	if j.Unspelled {
		j.LastSum = sum
	}
	return VerdictOK, nil
}

// link is the chain's state after j.Last.
func (j *Judge) link() Link {
	l := Link{Seq: j.Last.Seq, StreamSeq: j.Last.StreamSeq, Hash: j.Last.Hash}
	if j.Unspelled && j.LastSum != (ChainSum{}) {
		l.sum = &j.LastSum
	}
	return l
}

// chainReason is the reason of a break of the session's sequence or hash
// chain (DESIGN.md section 2) at m, holding seq, as CheckLink words it.
func chainReason(kind string, seq uint64, m *Msg, msg string) string {
	return (&ChainBreak{Kind: kind, Seq: seq, StreamSeq: m.StreamSeq, Message: msg}).Error()
}

// ReadJudged reads the session's stored messages after j.Last (the zero
// Tail: from its start), judges each and calls fn with every event found
// the session's next (copies are skipped). The first unreadable message
// ends the read with its *UnreadableError, after fn saw every event before
// it. fn may return ErrStop to end early. A session whose last stored
// message is not an event is read up to it too, so that the verdict names
// the first bad message, wherever it is. j.Last is where reading ended.
// A read from the session's start records j.Last as the prefix judged
// (JudgedThrough), with the first message it read and the copies it
// skipped (none recorded past maxJudgedCopies), replacing any other.
func (s *Store) ReadJudged(ctx context.Context, j *Judge, fn func(m *Msg, ev *schema.Envelope) error) (Tail, error) {
	var bad error
	fromStart := j.Last.StreamSeq == 0
	var (
		first  FirstStored
		copies []uint64
	)
	judge := func(m *Msg) error {
		if fromStart && first.StreamSeq == 0 {
			first = firstStored(m)
		}
		ev, v, err := j.Next(m)
		switch v {
		case VerdictUnreadable:
			bad = err
			return ErrStop
		case VerdictCopy:
			if fromStart {
				copies = append(copies, ev.Seq)
			}
			return nil
		}
		if fn == nil {
			return nil
		}
		return fn(m, &ev)
	}
	tail, err := s.readThrough(ctx, j.SessionID, j.Last.StreamSeq, j.Last.Seq, judge)
	if fromStart && len(copies) <= maxJudgedCopies && j.Last.StreamSeq != 0 {
		s.judged.Add(j.SessionID, JudgedPrefix{Tail: j.Last, First: first, Copies: copies})
	}
	if bad != nil && err == nil {
		return tail, bad
	}
	if ue, ok := unopenedVerdict(err); ok && bad == nil {
		// A message the read could not hand to the judge: the verdict on
		// it follows the judge's last event.
		return tail, j.after(ue)
	}
	return tail, err
}

// unopenedVerdict is err's verdict on a sealed body that does not open
// (open), if err holds one.
func unopenedVerdict(err error) (*UnreadableError, bool) {
	var ue *UnreadableError
	return ue, errors.As(err, &ue) && ue.Kind == KindUnopened
}

// after is ue, a verdict on the message stored after j's last event,
// saying so.
func (j *Judge) after(ue *UnreadableError) *UnreadableError {
	u := *ue
	u.AfterSeq = j.Last.Seq
	return &u
}

// JudgeAfter returns a judge of the session's messages stored after
// stream seq at, for a reader that reads on from there (ReadJudged with
// it): its Last is the session's last stored event at or before at, the
// zero Tail when it has none. That event is found with one direct get,
// which any replica may answer: one behind the leader gives an earlier
// event of the session, and ReadJudged then judges the events after it
// too. The event itself is taken as stored, not judged (the reader judged
// it before, or reads only what follows it); a message there that is not
// an event gets the judge's verdict.
func (s *Store) JudgeAfter(ctx context.Context, sessionID string, at uint64) (Judge, error) {
	j := Judge{SessionID: sessionID}
	loc, err := s.Locate(sessionID)
	if err != nil || at == 0 {
		return j, err
	}
	msgs, eob, err := s.directBatch(ctx, loc.Stream, directGetRequest{LastFor: []string{loc.Subject}, UpTo: at, Batch: 1})
	if err != nil {
		return j, fmt.Errorf("logstore: read %s at stream seq %d: %w", loc.Subject, at, err)
	}
	if len(msgs) == 0 {
		if eob == nil {
			return j, nil // 404: no message of the session there
		}
		return j, fmt.Errorf("logstore: read %s at stream seq %d: no answer", loc.Subject, at)
	}
	m := msgs[0]
	streamSeq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil || streamSeq > at || m.Header.Get(jetstream.SubjectHeader) != loc.Subject {
		return j, fmt.Errorf("logstore: read %s at stream seq %d: answered %q at stream seq %q", loc.Subject, at, m.Header.Get(jetstream.SubjectHeader), m.Header.Get(jetstream.SequenceHeader))
	}
	tm := &Msg{StreamSeq: streamSeq, Subject: loc.Subject, Header: m.Header, Data: m.Data}
	if err := s.open(ctx, tm); err != nil {
		return j, err
	}
	t, err := tailOf(sessionID, tm)
	j.Last = t
	return j, err
}

// ReadStored is ReadSession from the session's start for a reader that
// judges every message itself (verify): a session whose last stored
// message is not an event is read up to it too (fn sees it), and then
// its *UnreadableError is returned.
func (s *Store) ReadStored(ctx context.Context, sessionID string, fn func(*Msg) error) (Tail, error) {
	return s.readThrough(ctx, sessionID, 0, 0, fn)
}

// readThrough is ReadSessionFrom that reads up to a last stored message
// that is not an event (where Tail fails with its verdict). A verdict
// met after the tail was read (a sealed body that does not open) is the
// read's answer.
func (s *Store) readThrough(ctx context.Context, sessionID string, afterStreamSeq, afterSeq uint64, fn func(*Msg) error) (Tail, error) {
	tail, err := s.ReadSessionFrom(ctx, sessionID, afterStreamSeq, afterSeq, fn)
	var last *UnreadableError
	if tail.StreamSeq != 0 || !errors.As(err, &last) || last.StreamSeq <= afterStreamSeq {
		return tail, err
	}
	loc, lerr := s.Locate(sessionID)
	if lerr != nil {
		return Tail{}, lerr
	}
	tail = Tail{StreamSeq: last.StreamSeq}
	stopped := false // fn ended the read: what follows is not its to judge
	_, rerr := s.readUpTo(ctx, loc, sessionID, afterStreamSeq, tail, func(m *Msg) error {
		err := fn(m)
		stopped = errors.Is(err, ErrStop)
		return err
	})
	if rerr != nil || stopped {
		return tail, rerr
	}
	return tail, last
}

// FirstUnreadable reads the whole session and returns the verdict on its
// first unreadable message (nil: none).
func (s *Store) FirstUnreadable(ctx context.Context, sessionID string) error {
	_, err := s.ReadJudged(ctx, &Judge{SessionID: sessionID}, nil)
	return err
}

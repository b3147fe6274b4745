package writer

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync/atomic"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// entry is a session as this writer last saw it. It is only read or
// changed under the session's stripe lock.
type entry struct {
	state *session.State
	// tail is the stream position of state.LastSeq: the expectation of
	// the next append.
	tail logstore.Tail
	// ids indexes every event id of the session (an event id is unique in
	// its session for the session's whole life): the 64-bit hash of the
	// id (Service.hashID) to the stream seq of its event. A hit is only a
	// candidate, confirmed by reading the stored event; a miss is certain.
	// The index costs 16 bytes of key and value per event in the map's
	// slots (about 20 to 40 bytes with the map's load and growth), and
	// only a hash and a map lookup per appended event.
	ids map[uint64]uint64
	// more holds, by the id itself, the events whose hash an earlier id
	// of the session took already (a collision, or an id stored twice).
	more map[string]uint64
	// snapIDs are the id parts of the snapshot the entry was loaded from
	// (snapshot.go): the ids of the events it covers, which ids and more
	// then do not hold.
	snapIDs [][]byte
	// snapSeq is the seq of the snapshot last loaded or begun (0: none);
	// pending the ids indexed after it, which the next snapshot stores;
	// snapStored the head last loaded or stored (set by the snapshot's
	// goroutine, read by the next, which begins after it ended).
	snapSeq    uint64
	pending    []idRec
	snapStored atomic.Pointer[logstore.SnapshotHead]
	// snapping: a snapshot is being written; snapFailed: one was not, and
	// this entry writes no more.
	snapping, snapFailed atomic.Bool
}

func newEntry(sessionID string) *entry {
	return &entry{state: session.New(sessionID), ids: make(map[uint64]uint64)}
}

// index adds a stored event's id.
func (e *entry) index(h uint64, eventID string, streamSeq uint64) {
	if _, taken := e.ids[h]; !taken {
		e.ids[h] = streamSeq
		return
	}
	if e.more == nil {
		e.more = make(map[string]uint64)
	}
	if _, ok := e.more[eventID]; !ok {
		e.more[eventID] = streamSeq
	}
}

// candidates appends to dst the stream seqs where an event id may be
// stored: the index's entry for its hash, its own entry among the
// collisions, and the snapshot's entries for its id hash.
func (e *entry) candidates(dst []uint64, h uint64, eventID string) []uint64 {
	if ss := e.ids[h]; ss != 0 {
		dst = append(dst, ss)
	}
	if ss := e.more[eventID]; ss != 0 {
		dst = append(dst, ss)
	}
	if len(e.snapIDs) > 0 {
		xh := idHash(eventID)
		for _, p := range e.snapIDs {
			dst = snapCandidates(dst, p, xh)
		}
	}
	return dst
}

// index adds a stored event's id to the entry, and to the ids the next
// snapshot stores.
func (s *Service) index(e *entry, eventID string, streamSeq uint64) {
	e.index(s.hashID(eventID), eventID, streamSeq)
	if s.cfg.SnapshotEvery > 0 {
		e.pending = append(e.pending, idRec{idHash(eventID), streamSeq})
	}
}

// hashID is the index's key for an event id.
func (s *Service) hashID(eventID string) uint64 { return maphash.String(s.seed, eventID) }

// entryFor returns the session's cached entry, or folds it from the log.
// refresh brings a cached entry up to the stream leader's tail first
// (reading only the events it lacks). fresh reports that the entry is
// known to match the leader's tail as of this call.
func (s *Service) entryFor(ctx context.Context, sessionID string, refresh bool) (ent *entry, fresh bool, err error) {
	e, ok := s.cache.Get(sessionID)
	if ok && !refresh {
		s.hits.Inc()
		return e, false, nil
	}
	if ok {
		if err := s.catchUp(ctx, sessionID, e); err == nil {
			return e, true, nil
		} else if schema.CodeOf(err) == schema.CodeNotCommitted {
			return nil, true, err
		}
		// Anything else (an event that does not follow the cached state
		// included): fold from the start, which gives the answer.
	}
	s.misses.Inc()
	s.cache.Remove(sessionID)
	if e, err = s.load(ctx, sessionID); err != nil {
		return nil, true, err
	}
	s.cache.Add(sessionID, e)
	return e, true, nil
}

// catchUpDirect is how many missing events are read one by one from the
// leader rather than through a consumer.
const catchUpDirect = 16

// catchUp applies to e the events stored after it. The cache holds only
// prefixes of the log (an entry changes only after an acknowledged append
// or a read), so the missing events follow e.tail.
func (s *Service) catchUp(ctx context.Context, sessionID string, e *entry) error {
	t, err := s.st.Tail(ctx, sessionID)
	if err != nil {
		return readErr(sessionID, err)
	}
	if t.StreamSeq == e.tail.StreamSeq {
		return nil
	}
	if t.StreamSeq < e.tail.StreamSeq || t.Seq < e.tail.Seq {
		return fmt.Errorf("writer: cached state of %s is ahead of the log", sessionID)
	}
	apply := func(m *logstore.Msg) error { return s.applyStored(sessionID, e, m) }
	if t.Seq-e.tail.Seq <= catchUpDirect {
		for e.tail.StreamSeq < t.StreamSeq {
			m, err := s.st.NextAfter(ctx, sessionID, e.tail.StreamSeq)
			if err != nil {
				s.cache.Remove(sessionID)
				return schema.Errorf(schema.CodeNotCommitted, "cannot read the session: %v", err)
			}
			if m == nil {
				break
			}
			if err := apply(m); err != nil {
				s.cache.Remove(sessionID)
				return err
			}
		}
	} else {
		j := logstore.Judge{SessionID: sessionID, Last: e.tail}
		_, err := s.st.ReadJudged(ctx, &j, func(m *logstore.Msg, ev *schema.Envelope) error {
			if err := s.applyEvent(e, ev, m); err != nil {
				return err
			}
			e.tail = j.Last
			return nil
		})
		if err != nil {
			s.cache.Remove(sessionID)
			return readErr(sessionID, err)
		}
		e.tail = j.Last
	}
	if e.tail.StreamSeq < t.StreamSeq {
		s.cache.Remove(sessionID)
		return fmt.Errorf("writer: %s: read ended at stream seq %d before the tail at %d", sessionID, e.tail.StreamSeq, t.StreamSeq)
	}
	return nil
}

// readErr is the contract error of a failed read of a session: a stored
// message the store cannot read makes the session unreadable (a definite
// answer: retrying changes nothing); contract errors pass as they are;
// anything else is a read that failed, nothing was stored.
func readErr(sessionID string, err error) error {
	var se *schema.Error
	switch {
	case errors.As(err, &se):
		return err
	case errors.Is(err, logstore.ErrUnreadable):
		return schema.Errorf(schema.CodeUnreadable, "session %s holds a stored message that is not an event: %v", sessionID, err)
	}
	return schema.Errorf(schema.CodeNotCommitted, "cannot read the session: %v", err)
}

// applyStored folds one stored message into e: the verdict is
// logstore.Judge's (an exact copy of the event before is skipped; any
// message that is not the session's next event makes the session
// unreadable, never guessed at or skipped), and the event must be one
// pkg/session's rules accept.
func (s *Service) applyStored(sessionID string, e *entry, m *logstore.Msg) error {
	j := logstore.Judge{SessionID: sessionID, Last: e.tail}
	ev, v, err := j.Next(m)
	if err != nil {
		return err
	}
	if v == logstore.VerdictOK {
		if err := s.applyEvent(e, &ev, m); err != nil {
			return err
		}
	}
	e.tail = j.Last
	return nil
}

// applyEvent folds an event the judge found the session's next into e.
func (s *Service) applyEvent(e *entry, ev *schema.Envelope, m *logstore.Msg) error {
	if err := e.state.Apply(ev); err != nil {
		return schema.Errorf(schema.CodeUnreadable, "session %s is unreadable at stream seq %d: seq %d does not fold: %v", ev.SessionID, m.StreamSeq, ev.Seq, err)
	}
	s.index(e, ev.EventID, m.StreamSeq)
	return nil
}

// load rebuilds a session's state: from its snapshot and the events after
// it when it has a snapshot that matches the log, else from the start.
// Both give the same state, so the same answers.
func (s *Service) load(ctx context.Context, sessionID string) (*entry, error) {
	if s.cfg.SnapshotEvery > 0 {
		e, err := s.loadSnapshot(ctx, sessionID)
		if err != nil {
			s.m.snapLoads.WithLabelValues("ignored").Inc()
			s.log.Warn("writer: snapshot ignored, folding the session from its start", "session", sessionID, "err", err)
		}
		if e != nil {
			s.m.snapLoads.WithLabelValues("used").Inc()
			return s.fold(ctx, e)
		}
	}
	return s.fold(ctx, newEntry(sessionID))
}

// fold folds into e (a new entry, or one loaded from a snapshot) the
// session's events after e.tail, consistent up to the tail the stream
// leader reported. A session that holds a message the judge finds
// unreadable, or an event that does not fold, is refused.
func (s *Service) fold(ctx context.Context, e *entry) (*entry, error) {
	sessionID := e.state.SessionID
	j := logstore.Judge{SessionID: sessionID, Last: e.tail}
	tail, err := s.st.ReadJudged(ctx, &j, func(m *logstore.Msg, ev *schema.Envelope) error {
		s.m.folded.Inc()
		return s.applyEvent(e, ev, m)
	})
	if err != nil {
		return nil, readErr(sessionID, err)
	}
	e.tail = j.Last
	if e.tail.StreamSeq != tail.StreamSeq {
		return nil, schema.Errorf(schema.CodeNotCommitted, "read of the session ended at stream seq %d before its tail at %d", e.tail.StreamSeq, tail.StreamSeq)
	}
	return e, nil
}

// storedEvent reads the stored event at a stream seq, for an event id the
// index names there; nil when no event of the session is stored there.
func (s *Service) storedEvent(ctx context.Context, sessionID string, streamSeq uint64) (*logstore.Event, error) {
	loc, err := s.st.Locate(sessionID)
	if err != nil {
		return nil, err
	}
	m, err := s.st.MsgAt(ctx, loc.Stream, streamSeq)
	if err != nil {
		return nil, schema.Errorf(schema.CodeNotCommitted, "cannot read the stored event at stream seq %d: %v", streamSeq, err)
	}
	if m == nil || m.Subject != loc.Subject {
		return nil, nil
	}
	ev, err := schema.Decode(m.Data)
	if err != nil {
		return nil, schema.Errorf(schema.CodeUnreadable, "session holds an undecodable event at stream seq %d: %v", streamSeq, err)
	}
	return &logstore.Event{Envelope: ev, StreamSeq: streamSeq}, nil
}

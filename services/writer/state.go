package writer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

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
	// recent holds the last recentIDs events (by seq) so a retried request
	// is recognized without reading the log.
	recent [recentIDs]stored
}

// stored is one stored event's identity.
type stored struct {
	seq       uint64
	streamSeq uint64
	eventID   string
}

func (e *entry) remember(seq, streamSeq uint64, eventID string) {
	e.recent[seq%recentIDs] = stored{seq: seq, streamSeq: streamSeq, eventID: eventID}
}

// at returns the remembered event at seq.
func (e *entry) at(seq uint64) (stored, bool) {
	r := e.recent[seq%recentIDs]
	return r, seq > 0 && r.seq == seq
}

// find returns the remembered seq of an event id.
func (e *entry) find(eventID string) (stored, bool) {
	for _, r := range e.recent {
		if r.seq > 0 && r.eventID == eventID {
			return r, true
		}
	}
	return stored{}, false
}

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
		// Anything else: fold from the start.
	}
	s.misses.Inc()
	s.cache.Delete(sessionID)
	if e, err = s.fold(ctx, sessionID); err != nil {
		return nil, true, err
	}
	s.cache.Put(sessionID, e)
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
		return schema.Errorf(schema.CodeNotCommitted, "cannot read the session's tail: %v", err)
	}
	if t.StreamSeq == e.tail.StreamSeq {
		return nil
	}
	if t.StreamSeq < e.tail.StreamSeq || t.Seq <= e.tail.Seq {
		return fmt.Errorf("writer: cached state of %s is ahead of the log", sessionID)
	}
	apply := func(m *logstore.Msg) error {
		ev, err := schema.Decode(m.Data)
		if err != nil {
			return err
		}
		if err := e.state.Apply(&ev); err != nil {
			return err
		}
		e.remember(ev.Seq, m.StreamSeq, ev.EventID)
		e.tail = logstore.Tail{Seq: ev.Seq, StreamSeq: m.StreamSeq, EventID: ev.EventID}
		return nil
	}
	if t.Seq-e.tail.Seq <= catchUpDirect {
		for e.tail.StreamSeq < t.StreamSeq {
			m, err := s.st.NextAfter(ctx, sessionID, e.tail.StreamSeq)
			if err != nil {
				s.cache.Delete(sessionID)
				return schema.Errorf(schema.CodeNotCommitted, "cannot read the session: %v", err)
			}
			if m == nil {
				break
			}
			if err := apply(m); err != nil {
				s.cache.Delete(sessionID)
				return err
			}
		}
	} else if _, err := s.st.ReadSession(ctx, sessionID, e.tail.StreamSeq, apply); err != nil {
		s.cache.Delete(sessionID)
		return err
	}
	if e.tail.StreamSeq < t.StreamSeq {
		s.cache.Delete(sessionID)
		return fmt.Errorf("writer: %s: read ended at stream seq %d before the tail at %d", sessionID, e.tail.StreamSeq, t.StreamSeq)
	}
	return nil
}

// fold rebuilds a session's state from the log, consistent up to the tail
// the stream leader reported. A session that holds an event this writer
// cannot read or fold is refused, never guessed at.
func (s *Service) fold(ctx context.Context, sessionID string) (*entry, error) {
	e := &entry{state: session.New(sessionID)}
	tail, err := s.st.ReadSession(ctx, sessionID, 0, func(m *logstore.Msg) error {
		ev, err := schema.Decode(m.Data)
		if err != nil {
			if errors.Is(err, schema.ErrNewerSchema) {
				return schema.Errorf(schema.CodeUnknownType, "session holds an event at stream seq %d this writer cannot read (%v): upgrade the writer", m.StreamSeq, err)
			}
			return schema.Errorf(schema.CodeUnreadable, "session holds an undecodable event at stream seq %d: %v", m.StreamSeq, err)
		}
		if err := e.state.Apply(&ev); err != nil {
			if schema.CodeOf(err) == schema.CodeUnknownType {
				return schema.Errorf(schema.CodeUnknownType, "session holds event seq %d of type %q this writer does not know: upgrade the writer", ev.Seq, ev.Type)
			}
			return schema.Errorf(schema.CodeUnreadable, "session cannot be folded at seq %d: %v", ev.Seq, err)
		}
		e.remember(ev.Seq, m.StreamSeq, ev.EventID)
		e.tail = logstore.Tail{Seq: ev.Seq, StreamSeq: m.StreamSeq, EventID: ev.EventID}
		return nil
	})
	if err != nil {
		var se *schema.Error
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, schema.Errorf(schema.CodeNotCommitted, "cannot read the session: %v", err)
	}
	if e.tail.StreamSeq != tail.StreamSeq {
		return nil, schema.Errorf(schema.CodeNotCommitted, "read of the session ended at stream seq %d before its tail at %d", e.tail.StreamSeq, tail.StreamSeq)
	}
	return e, nil
}

// storedAt reads the event ids at seqs from..from+n-1 from the log, for a
// retry older than the remembered events. It is used only when a request
// conflicts, so reading the session is acceptable.
func (s *Service) storedAt(ctx context.Context, sessionID string, from uint64, n int) ([]stored, error) {
	out := make([]stored, 0, n)
	last := from + uint64(n) - 1
	_, err := s.st.ReadSession(ctx, sessionID, 0, func(m *logstore.Msg) error {
		seq, err := strconv.ParseUint(m.Header.Get(logstore.HeaderSeq), 10, 64)
		if err != nil {
			ev, derr := schema.Decode(m.Data)
			if derr != nil {
				return derr
			}
			seq = ev.Seq
		}
		if seq >= from && seq <= last {
			_, id, _ := strings.Cut(m.Header.Get(logstore.HeaderMsgID), ":")
			out = append(out, stored{seq: seq, streamSeq: m.StreamSeq, eventID: id})
		}
		if seq >= last {
			return logstore.ErrStop
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("writer: read stored ids: %w", err)
	}
	return out, nil
}

package logstore

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// What the operator tools ask of the log as a whole: which sessions it
// holds and what each one stored last, and how many replicas its streams
// already have.

// SessionCount is a session found in a stream's per-subject state.
type SessionCount struct {
	Stream string
	ID     string
	// Messages is the number of messages stored under the session's subject.
	Messages uint64
}

// ListSessions lists every session with its number of stored messages,
// sorted by id. It reads each stream's per-subject state (no consumer).
func (s *Store) ListSessions(ctx context.Context) ([]SessionCount, error) {
	var out []SessionCount
	for _, name := range s.Streams() {
		st, err := s.js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
		if err != nil {
			return nil, fmt.Errorf("stream %s subjects: %w", name, err)
		}
		for subj, n := range info.State.Subjects {
			if id, ok := SessionFromSubject(subj); ok {
				out = append(out, SessionCount{Stream: name, ID: id, Messages: n})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// lastPage is how many subjects' last messages eachLastPerSubject pulls
// at once.
const lastPage = 1000

// EachLastStored calls fn with the last stored message of every session
// (its headers and stored time; no body), stream by stream, a page of
// sessions pulled at a time and the next page only once fn has taken the
// last one: memory stays at a page whatever the number of sessions, where
// ListSessions holds every id. fn's error stops the walk and is returned.
// A message stored during the walk may be delivered after its session's
// last: a caller that acts on what it is given reads it again
// (LastStoredOf) first.
func (s *Store) EachLastStored(ctx context.Context, fn func(sessionID string, last *Msg) error) error {
	for _, name := range s.Streams() {
		err := s.eachLastPerSubject(ctx, name, "", func(m *Msg) error {
			if id, ok := SessionFromSubject(m.Subject); ok {
				return fn(id, m)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
	}
	return nil
}

// eachLastPerSubject calls fn with the last message (headers and stored
// time; no body) of each subject of stream matching subject (every one
// if empty), a page pulled at a time, as one flow of pulls (Next) of the
// one consumer created to deliver the last message per subject (Fetch
// recreates an ordered consumer after each page, from the next stream
// sequence). fn's error stops the walk and is returned.
func (s *Store) eachLastPerSubject(ctx context.Context, stream, subject string, fn func(*Msg) error) error {
	return s.walk(ctx, FollowSpec{Stream: stream, Subject: subject, PageEvents: lastPage, lastPerSubject: true, headersOnly: true}, false, fn)
}

// walk calls fn with each message spec delivers until none is pending
// or, with cut, past the stream's last message when the walk starts.
// fn's error stops the walk and is returned.
func (s *Store) walk(ctx context.Context, spec FollowSpec, cut bool, fn func(*Msg) error) error {
	st, err := s.StreamStatus(ctx, spec.Stream)
	if err != nil || st.Msgs == 0 {
		return err
	}
	f, err := s.Follow(ctx, spec)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		m, err := f.Next(ctx)
		if err != nil {
			return err
		}
		if cut && m.StreamSeq > st.LastSeq {
			return nil
		}
		if err := fn(m); err != nil {
			return err
		}
		if m.Pending == 0 || cut && m.StreamSeq == st.LastSeq {
			return nil
		}
	}
}

// LastStored is a session's last stored message and when the stream
// stored it.
type LastStored struct {
	Msg
	Stored time.Time
}

// LastStoredOf reads the last stored message of a session (whatever it
// is: Tail refuses a message that is not an event, this does not).
// A session with no message is an error wrapping jetstream.ErrMsgNotFound.
func (s *Store) LastStoredOf(ctx context.Context, sessionID string) (*LastStored, error) {
	loc, err := s.Locate(sessionID)
	if err != nil {
		return nil, err
	}
	st, err := s.js.Stream(ctx, loc.Stream)
	if err != nil {
		return nil, err
	}
	m, err := st.GetLastMsgForSubject(ctx, loc.Subject)
	if err != nil {
		return nil, err
	}
	last := &LastStored{Msg: Msg{StreamSeq: m.Sequence, Subject: m.Subject, Header: m.Header, Data: m.Data}, Stored: m.Time}
	return last, s.open(ctx, &last.Msg)
}

// ProvisionedReplicas reports the replicas of each of the log's streams
// (of a layout of the given partitions) that exists and answers, before a
// store is opened: a process must never provision a stream with fewer
// replicas than it has.
func ProvisionedReplicas(ctx context.Context, nc *nats.Conn, partitions int) map[string]int {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil
	}
	out := map[string]int{}
	l, _ := NewLayout(partitions)
	for _, name := range l.Streams() {
		st, err := js.Stream(ctx, name)
		if err != nil {
			continue // absent or unreachable (Open reports it)
		}
		out[name] = st.CachedInfo().Config.Replicas
	}
	return out
}

package logstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// StoredReader is what WalkStored reads a session with: the store's own
// reads (Store), or another log's that keeps them the same way
// (internal/memlog).
type StoredReader interface {
	ReadSessionTo(ctx context.Context, sessionID string, afterStreamSeq uint64, tail Tail, fn func(*Msg) error) (Tail, error)
	NextAfter(ctx context.Context, sessionID string, after uint64) (*Msg, error)
}

// ReadVerdicts is WalkStored on this store.
func (s *Store) ReadVerdicts(ctx context.Context, sessionID string, afterStreamSeq uint64, tail Tail, fn func(m *Msg, verdict error) error) error {
	return WalkStored(ctx, s, sessionID, afterStreamSeq, tail, fn)
}

// WalkStored gives fn every message stored on the session's subject after
// stream seq afterStreamSeq up to tail's stream seq, in order, each with
// its verdict: nil for an event (with an SL-Seq header, or a body that
// decodes as one, of a newer schema too: NotAnEvent); for any other
// message what a read refuses in it, and the walk goes on after it:
// ErrKeyGone for a sealed body whose session key is gone, the opening's
// error (code unreadable, an *UnreadableError of KindUnopened) for a
// sealed body that does not open, and an *UnreadableError of KindGarbage
// for a plain body that is not an event. A message with a verdict has its
// body as stored (Data). The reads go in pages (ReadSessionTo) and, past
// a message they refuse, on from it; once a key is gone, every message
// after is read from the leader one at a time (no key opens the rest of
// the session's sealed bodies, and each would stop a page). An error of
// fn ends the walk with it; so does any failure of a read.
func WalkStored(ctx context.Context, r StoredReader, sessionID string, afterStreamSeq uint64, tail Tail, fn func(m *Msg, verdict error) error) error {
	after := afterStreamSeq
	keyGone := false
	for after < tail.StreamSeq {
		if !keyGone {
			var fnErr error
			_, err := r.ReadSessionTo(ctx, sessionID, after, tail, func(m *Msg) error {
				after = m.StreamSeq
				fnErr = fn(m, verdictOf(sessionID, m, nil))
				return fnErr
			})
			if err == nil || fnErr != nil || !openFailed(err) {
				return err
			}
		}
		// The read stopped at the next message, whose body does not
		// open (or whose key is gone): it goes with its verdict, and the
		// walk goes on after it.
		m, err := r.NextAfter(ctx, sessionID, after)
		if err != nil && (m == nil || !openFailed(err)) {
			return err
		}
		if m == nil || m.StreamSeq > tail.StreamSeq {
			return nil // deleted meanwhile, or nothing left up to tail
		}
		keyGone = errors.Is(err, ErrKeyGone)
		after = m.StreamSeq
		if err := fn(m, verdictOf(sessionID, m, err)); err != nil {
			return err
		}
	}
	return nil
}

// verdictOf is WalkStored's verdict on m, read with the opening's error
// openErr (nil: its body is open, or plain).
func verdictOf(sessionID string, m *Msg, openErr error) error {
	if openErr != nil {
		return openErr
	}
	why := NotAnEvent(m)
	if why == nil {
		return nil
	}
	seq, _ := strconv.ParseUint(m.Header.Get(HeaderSeq), 10, 64)
	return &UnreadableError{SessionID: sessionID, StreamSeq: m.StreamSeq, GotSeq: seq, Kind: KindGarbage,
		Reason: fmt.Sprintf("the stored message is not an event: %v", why)}
}

// NotAnEvent is the reason m is not an event, as Tail judges a session's
// last message (TailOf): it has no SL-Seq header and its body does not
// decode, for another reason than a newer schema (an event this reader
// cannot read is an event all the same). nil: m is an event. m's sealed
// body is open (or m is a plain one).
func NotAnEvent(m *Msg) error {
	if _, err := strconv.ParseUint(m.Header.Get(HeaderSeq), 10, 64); err == nil {
		return nil
	}
	if _, err := schema.Decode(m.Data); err != nil && !errors.Is(err, schema.ErrNewerSchema) {
		return err
	}
	return nil
}

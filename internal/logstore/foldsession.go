package logstore

import (
	"context"
	"errors"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// SnapshotLoader is what SnapshotFor needs of a log: *Store, and the
// in-memory log of the services' rule scripts (internal/memlog).
type SnapshotLoader interface {
	LoadSnapshot(ctx context.Context, sessionID string) (*SnapshotBase, error)
}

// SessionFolder is what FoldSession needs of a log: *Store, and
// internal/memlog.
type SessionFolder interface {
	SnapshotLoader
	ReadJudged(ctx context.Context, j *Judge, fn func(m *Msg, ev *schema.Envelope) error) (Tail, error)
}

var _ SessionFolder = (*Store)(nil)

// SnapshotUse is what became of a session's snapshot for a reader.
type SnapshotUse int

const (
	// SnapshotNone: the session has no snapshot, or none was read.
	SnapshotNone SnapshotUse = iota
	// SnapshotUsed: the snapshot matches the log; the reader reads on
	// from it.
	SnapshotUsed
	// SnapshotIgnored: the snapshot does not match the log or did not
	// read; the reader reads the session from its start.
	SnapshotIgnored
)

// String is the use as the services' snapshot_loads_total metrics name
// it (result="used", "ignored").
func (u SnapshotUse) String() string {
	switch u {
	case SnapshotUsed:
		return "used"
	case SnapshotIgnored:
		return "ignored"
	}
	return "none"
}

// SnapshotLoad is a session's snapshot as a reader that reads on from it
// loaded it.
type SnapshotLoad struct {
	// Base is the snapshot, checked against the log (LoadSnapshot), when
	// Use is SnapshotUsed; nil otherwise.
	Base *SnapshotBase
	Use  SnapshotUse
	// Why is LoadSnapshot's error when Use is SnapshotIgnored: the reader
	// logs it.
	Why error
}

// SnapshotFor loads the session's snapshot (DESIGN.md section 2,
// "Snapshots") for a reader that reads on from it. A snapshot that does
// not match the log, or that does not read, is not an error of the
// read: it is ignored (Use SnapshotIgnored, Why says why) and the
// session read from its start, since a snapshot is only a shortcut.
func SnapshotFor(ctx context.Context, l SnapshotLoader, sessionID string) SnapshotLoad {
	b, err := l.LoadSnapshot(ctx, sessionID)
	switch {
	case err != nil:
		return SnapshotLoad{Use: SnapshotIgnored, Why: err}
	case b == nil:
		return SnapshotLoad{}
	}
	return SnapshotLoad{Base: b, Use: SnapshotUsed}
}

// FoldStart is a state a fold goes on from instead of the session's
// snapshot: one folded before (a cache's), whose events were judged when
// read.
type FoldStart struct {
	State *session.State
	// Last is State's last event as the judge left it (Judge.Last).
	Last Tail
	// Shared: State is not the fold's own (a cache holds it): the first
	// event folded after it folds into a clone.
	Shared bool
}

// FoldOptions says where FoldSession starts and what an event that does
// not fold does.
type FoldOptions struct {
	// From: the fold goes on from this state, the snapshot not read;
	// nil: from the session's snapshot (SnapshotFor), else its start.
	From *FoldStart
	// NoSnapshot: with From nil, the fold starts at the session's start,
	// its snapshot not read.
	NoSnapshot bool
	// UpToUnfoldable: an event that does not fold (session.State.Apply
	// fails) ends the fold without an error, the state as Apply left it.
	// Otherwise the fold fails there with code unreadable.
	UpToUnfoldable bool
	// Through: events stored after this stream seq are not folded (the
	// read ends at the first), nor a snapshot taken after it; 0: none.
	Through uint64
}

// Folded is a session's state as FoldSession folded it, and where from.
type Folded struct {
	// State is the folded state: From.State itself when no event
	// followed it (shared, then, as From is), else the fold's own.
	State *session.State
	// Tail is the session's tail where the read ended (ReadJudged's).
	Tail Tail
	// Start is where the fold started: the last event of From, or of the
	// snapshot used; the zero Tail: the session's start.
	Start Tail
	// Snapshot is what became of the session's snapshot (SnapshotNone
	// when From or NoSnapshot kept it from being read).
	Snapshot SnapshotLoad
	// Events counts the events read and folded after Start (an event
	// that did not fold included).
	Events int
	// Last is the last event folded as the judge left it (Start when
	// none was): a Judge with it judges the events after the fold.
	Last Tail
	// Stopped: the fold ended at a message that is unreadable or at an
	// event that does not fold, after which no event counts for a reader.
	Stopped bool
}

// FoldSession folds the session's state as every reader that holds none
// folds it: from its snapshot when it has one that matches the log (or
// from o.From), then the events after it, each judged as on a read from
// the start (ReadJudged, Judge.Last = where the fold started); from the
// session's start when the snapshot is ignored. The error is the read's
// (the first unreadable message's *UnreadableError, after every event
// before it was folded), or that an event did not fold; Folded is
// filled in either way with what was folded up to there.
func FoldSession(ctx context.Context, l SessionFolder, sessionID string, o FoldOptions) (Folded, error) {
	var f Folded
	var st *session.State
	shared := false
	switch {
	case o.From != nil:
		st, f.Start, shared = o.From.State, o.From.Last, o.From.Shared
	case !o.NoSnapshot:
		f.Snapshot = SnapshotFor(ctx, l, sessionID)
		if b := f.Snapshot.Base; b != nil && o.Through != 0 && b.Tail.StreamSeq > o.Through {
			f.Snapshot = SnapshotLoad{} // taken after the fold's end: not read on from
		} else if b != nil {
			// A state loaded for this fold alone: no copy (a clone of a
			// long session's state costs more than the load).
			st, f.Start = b.State, b.Tail
		}
	}
	j := Judge{SessionID: sessionID, Last: f.Start}
	f.Last = f.Start
	tail, err := l.ReadJudged(ctx, &j, func(m *Msg, ev *schema.Envelope) error {
		if o.Through != 0 && m.StreamSeq > o.Through {
			return ErrStop
		}
		f.Events++
		switch {
		case st == nil:
			st = session.New(sessionID)
		case shared:
			st, shared = st.Clone(), false
		}
		if err := st.Apply(ev); err != nil {
			f.Stopped = true
			if o.UpToUnfoldable {
				return ErrStop
			}
			return schema.Errorf(schema.CodeUnreadable, "session %s is unreadable at stream seq %d: seq %d does not fold: %v", sessionID, m.StreamSeq, ev.Seq, err)
		}
		f.Last = j.Last
		return nil
	})
	if errors.Is(err, ErrUnreadable) {
		f.Stopped = true
	}
	if st == nil {
		st = session.New(sessionID)
	}
	f.State, f.Tail = st, tail
	return f, err
}

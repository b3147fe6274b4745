package eraser

import (
	"context"
	"errors"
	"slices"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// ownerFold carries the fold of an erasure record's Owner and Grants over
// the messages the job adds to the digest after where the record's fold
// stands (logstore.OwnerFold: set where the fold of the request ended),
// so that the audit record names whoever an event of the digest granted
// the session to: an append that landed after the request read the
// session (the writer had not seen the record yet) and before the seal.
// Each message is judged after the last one folded (logstore.Judge, as
// every reader judges it) and folded with session.State's rules; from
// the first that is unreadable or does not fold on, nothing counts. The
// record is written with the digest, so a resumed job goes on from where
// the digest stands.
type ownerFold struct {
	rec *logstore.Erasure
	j   logstore.Judge
	// st is the session's state at j.Last. nil when the job could not
	// fold it again: a job cut short once the seal had deleted events
	// (their bodies are gone; the record holds ids only). A session/granted
	// is then folded into a state holding the record's owner and grants at
	// the seq before it, other events are judged only: the writer stored
	// only events that folded, so this differs from the full fold only for
	// messages written around it that the judge accepts.
	st *session.State
}

// ownerFold returns the fold from where rec's stands (nil: stopped, or a
// record of an eraser that did not fold in the job). Unless the session
// is sealed, it folds the session's state again up to there (from its
// snapshot when it has one that matches the log, as the request did), so
// that appends that land before the seal fold as every reader folds them.
func (s *Service) ownerFold(ctx context.Context, rec *logstore.Erasure) (*ownerFold, error) {
	at := rec.OwnerFold
	if at == nil || at.Stopped {
		return nil, nil
	}
	f := &ownerFold{rec: rec, j: logstore.Judge{SessionID: rec.SessionID, Last: at.Tail()}}
	switch {
	case at.StreamSeq == 0:
		f.st = session.New(rec.SessionID)
		return f, nil
	case rec.Sealed:
		return f, nil
	}
	got, err := logstore.FoldSession(ctx, s.st, rec.SessionID, logstore.FoldOptions{UpToUnfoldable: true, Through: at.StreamSeq})
	if err != nil && !errors.Is(err, logstore.ErrUnreadable) && schema.CodeOf(err) != schema.CodeNotFound {
		return nil, err
	}
	if !got.Stopped && got.Last.Seq == at.Seq && got.Last.Hash == at.Hash && got.State.LastSeq == at.Seq {
		f.st = got.State
	} else {
		s.log.Warn("eraser: the events the owner fold stands after are gone (a job cut short in its seal): later grants fold without the session's state", "session", rec.SessionID, "seq", at.Seq)
	}
	return f, nil
}

// next folds m, the message the job adds to the digest after the one
// before it (stream order), when it comes after where the fold stands.
func (f *ownerFold) next(m *logstore.Msg) {
	if f == nil || f.rec.OwnerFold.Stopped || m.StreamSeq <= f.rec.OwnerFold.StreamSeq {
		return
	}
	ev, v, _ := f.j.Next(m)
	switch v {
	case logstore.VerdictUnreadable:
		f.rec.OwnerFold.Stopped = true
		return
	case logstore.VerdictCopy:
		return
	}
	st := f.st
	if st == nil {
		if ev.Type != schema.TypeSessionGranted {
			*f.rec.OwnerFold = logstore.FoldedTo(f.j.Last)
			return
		}
		st = &session.State{SessionID: f.rec.SessionID, LastSeq: ev.Seq - 1,
			Meta: schema.SessionCreated{Owner: f.rec.Owner, Grants: slices.Clone(f.rec.Grants)}}
	}
	if err := st.Apply(&ev); err != nil {
		f.rec.OwnerFold.Stopped = true
		return
	}
	f.rec.Owner, f.rec.Grants = st.Meta.Owner, slices.Clone(st.Meta.Grants)
	*f.rec.OwnerFold = logstore.FoldedTo(f.j.Last)
}

// unreadable stops the fold at m, a message the job deletes without
// hashing it (its sealed body does not open): nothing after it counts, as
// after any message that is unreadable.
func (f *ownerFold) unreadable(m *logstore.Msg) {
	if f == nil || m.StreamSeq <= f.rec.OwnerFold.StreamSeq {
		return
	}
	f.rec.OwnerFold.Stopped = true
}

package sre

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// Tail prints new events live until ctx ends: session id's (after its
// stored ones with seq > after, when after >= 0), or every session's when
// id is ""; transient ones too unless noLive.
func Tail(ctx context.Context, st *logstore.Store, id string, after int64, noLive bool, stdout, stderr io.Writer) (err error) {
	if id != "" {
		// Following a session that has no events yet is allowed (its
		// agent may not have started), but never silently: an erased one
		// gets none ever, a typo none either.
		tail, err := st.Tail(ctx, id)
		if err != nil {
			return err
		}
		if !tail.Exists() {
			if err := Missing(ctx, st, id); errors.Is(err, ErrErased) {
				return err
			}
			fmt.Fprintf(stderr, "sessionlog tail: session %s has no events yet; waiting for its first (Ctrl-C to stop)\n", id)
		}
	}
	return tailEvents(ctx, st, id, after, !noLive, stdout, stderr)
}

// liveLine is how tail prints a transient event.
type liveLine struct {
	Transient bool            `json:"transient"`
	SessionID string          `json:"sessionId"`
	Event     json.RawMessage `json:"event"`
}

// tailLine is a durable event's stored message, or a transient event.
type tailLine struct {
	durable *logstore.Msg
	live    *logstore.LiveMsg
}

// tailJudges judges the stored messages tail prints as every reader
// judges them (logstore.Judge, DESIGN.md section 5): each session's in
// stream order. A session first met partway (a message after its first)
// is judged from where it was met, not from its start: the judge starts
// at the session's event stored last before that message
// (logstore.JudgeAfter, one direct get; a replica behind gives an
// earlier event, and the messages between are read and judged, not
// printed). An exact copy is not printed; an unreadable message is
// reported with the judge's text and nothing more of its session is
// printed.
type tailJudges struct {
	st     *logstore.Store
	judges map[string]*logstore.Judge
	bad    map[string]bool
}

// judge says whether m is printed. err is the verdict on m or on a
// message of its session before it (an *logstore.UnreadableError, once
// per session), or a read that failed.
func (t *tailJudges) judge(ctx context.Context, m *logstore.Msg) (bool, error) {
	id, ok := logstore.SessionFromSubject(m.Subject)
	if !ok || t.bad[id] {
		return false, nil
	}
	j := t.judges[id]
	if j == nil {
		var err error
		if j, err = t.judgeBefore(ctx, id, m.StreamSeq); err != nil {
			if ue := (*logstore.UnreadableError)(nil); errors.As(err, &ue) {
				t.bad[id] = true
			}
			return false, err
		}
		t.judges[id] = j
	}
	switch _, v, err := j.Next(m); v {
	case logstore.VerdictUnreadable:
		t.bad[id] = true
		return false, err
	case logstore.VerdictCopy:
		return false, nil
	}
	return true, nil
}

// judgeBefore is a judge of the session's messages from stream seq at
// on: its Last is the session's event stored last before at. The event
// JudgeAfter finds is taken as stored; the messages after it and before
// at (a replica behind answered) are judged, and a verdict on one of
// them, or on a message there that is not an event, is the error.
func (t *tailJudges) judgeBefore(ctx context.Context, id string, at uint64) (*logstore.Judge, error) {
	j, err := t.st.JudgeAfter(ctx, id, at-1)
	if err != nil {
		return nil, err
	}
	var bad error
	_, err = t.st.ReadSessionFrom(ctx, id, j.Last.StreamSeq, j.Last.Seq, func(p *logstore.Msg) error {
		if p.StreamSeq >= at {
			return logstore.ErrStop
		}
		if _, v, err := j.Next(p); v == logstore.VerdictUnreadable {
			bad = err
			return logstore.ErrStop
		}
		return nil
	})
	if bad != nil {
		return nil, bad
	}
	return &j, err
}

// judgeAt is a judge of session id whose Last is its event of seq after,
// or its last event when it has no more: where `tail --after` starts.
// The event is found where the read API finds a page's lead (one batched
// read, logstore.ReadChained) and read with logstore.JudgeAfter, so the
// events before it are not read; it is taken as stored, and the events
// printed after it are judged against it. A store that cannot place it
// so (no stream seq known for it, or another event there) has the
// session judged from its start up to it.
func judgeAt(ctx context.Context, st *logstore.Store, id string, after uint64) (*logstore.Judge, error) {
	tail, err := st.Tail(ctx, id)
	if err != nil {
		return nil, err
	}
	at := tail.StreamSeq
	if after < tail.Seq {
		ch, err := st.ReadChained(ctx, id, tail, after, 1, 1)
		if err != nil && !errors.Is(err, logstore.ErrNotOnePerSeq) {
			return nil, err
		}
		at = ch.LeadStreamSeq
	}
	if at != 0 {
		j, err := st.JudgeAfter(ctx, id, at)
		if err != nil {
			return nil, err
		}
		if j.Last.Seq == min(after, tail.Seq) {
			return &j, nil
		}
	}
	j := &logstore.Judge{SessionID: id}
	if _, err := st.ReadJudged(ctx, j, func(_ *logstore.Msg, e *schema.Envelope) error {
		if e.Seq == after {
			return logstore.ErrStop
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return j, nil
}

// liveWriters decides which transient events tail prints: those whose
// publisher, as the server names it, may write to the session
// (api.Authorize: its owner, an agent its grants name, or an operator).
// The owner and grants of a session are folded from its log (from its
// snapshot on) when its first transient event of an agent comes, and
// kept up to date from the durable events tail follows.
type liveWriters struct {
	st      *logstore.Store
	states  map[string]*session.State
	dropped int
}

// observe folds a durable event into the state of its session, if held.
// One that is not the next leaves the state to be folded again.
func (w *liveWriters) observe(body []byte) {
	if len(w.states) == 0 {
		return
	}
	e, err := schema.Decode(body)
	if err != nil {
		return
	}
	s := w.states[e.SessionID]
	if s == nil || e.Seq <= s.LastSeq {
		return
	}
	if e.Seq != s.LastSeq+1 || s.Apply(&e) != nil {
		delete(w.states, e.SessionID)
	}
}

// shown says whether m is printed.
func (w *liveWriters) shown(ctx context.Context, m *logstore.LiveMsg) bool {
	if m.Caller.Operator() {
		return true
	}
	s := w.states[m.SessionID]
	if s == nil {
		// Folded as the services fold a session they do not hold: from
		// its snapshot when it has one that matches the log, then the
		// events after it (logstore.FoldSession), so a long session is
		// not read from its start. A session that cannot be read whole
		// keeps what was read of it; one not read at all is asked again
		// at its next event.
		f, err := logstore.FoldSession(ctx, w.st, m.SessionID, logstore.FoldOptions{UpToUnfoldable: true})
		if err != nil && !errors.Is(err, logstore.ErrUnreadable) {
			w.dropped++
			return false
		}
		s = f.State
		w.states[m.SessionID] = s
	}
	if s.LastSeq == 0 || api.Authorize(m.Caller, m.SessionID, &s.Meta) != nil {
		w.dropped++
		return false
	}
	return true
}

// tailEvents prints durable events (a follower per stream, from now or
// after a seq) and transient ones until ctx ends: only those whose
// publisher may write to the session (liveWriters); how many others were
// dropped is said on stderr at the end.
func tailEvents(ctx context.Context, st *logstore.Store, id string, after int64, live bool, stdout, stderr io.Writer) error {
	lines := make(chan tailLine, 1024)
	writers := &liveWriters{st: st, states: map[string]*session.State{}}
	judges := &tailJudges{st: st, judges: map[string]*logstore.Judge{}, bad: map[string]bool{}}
	defer func() {
		if writers.dropped > 0 {
			fmt.Fprintf(stderr, "sessionlog tail: %d transient events not shown: their publisher may not write to the session (or the session could not be read)\n", writers.dropped)
		}
	}()
	var streams []string
	var subject string
	if id != "" {
		loc, err := st.Locate(id)
		if err != nil {
			return err
		}
		streams, subject = []string{loc.Stream}, loc.Subject
	} else {
		streams = st.Streams()
	}
	if live {
		sub, err := st.Live(id, 0, func(m logstore.LiveMsg) {
			select {
			case lines <- tailLine{live: &m}:
			default: // a slow terminal drops transient events, never durable ones
			}
		})
		if err != nil {
			return err
		}
		defer sub.Close()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(streams))
	for _, name := range streams {
		spec := logstore.FollowSpec{Stream: name, Subject: subject, OnlyNew: true}
		if after >= 0 {
			// Start right after the stored event with seq == after.
			spec.OnlyNew = false
			if after > 0 {
				// The judge of the events printed starts at the event
				// with seq == after (the last, with fewer events).
				j, err := judgeAt(ctx, st, id, uint64(after))
				if err != nil {
					return err
				}
				spec.StartAfter = j.Last.StreamSeq
				judges.judges[id] = j
			}
		}
		fol, err := st.Follow(ctx, spec)
		if err != nil {
			return fmt.Errorf("tail %s: %w", name, err)
		}
		go func() {
			defer fol.Close()
			for {
				m, err := fol.Next(ctx)
				if err != nil {
					if ctx.Err() == nil {
						errc <- fmt.Errorf("tail %s: %w", name, err)
					}
					return
				}
				select {
				case lines <- tailLine{durable: m}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return err
		case l := <-lines:
			var b []byte
			if m := l.durable; m != nil {
				shown, err := judges.judge(ctx, m)
				var ue *logstore.UnreadableError
				switch {
				case errors.As(err, &ue) && id == "":
					// The other sessions go on.
					fmt.Fprintf(stderr, "sessionlog tail: %v\n", ue)
				case err != nil:
					return err
				}
				if !shown {
					continue
				}
				b = m.Data
			}
			if m := l.live; m != nil {
				if !writers.shown(ctx, m) {
					continue
				}
				ev := json.RawMessage(m.Data)
				if !json.Valid(m.Data) {
					ev, _ = json.Marshal(string(m.Data))
				}
				b, _ = json.Marshal(liveLine{Transient: true, SessionID: m.SessionID, Event: ev})
			} else {
				writers.observe(b)
			}
			if err := WriteLine(stdout, b); err != nil {
				return err
			}
		}
	}
}

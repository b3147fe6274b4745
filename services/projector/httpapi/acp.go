package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/acp"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// ACPError is the _meta.sessionlog.error of the last line of an ACP
// stream that ends at a stored message the session cannot be read past
// (unreadable, gap): nothing of that message or after it is sent.
type ACPError struct {
	Code        string `json:"code"`
	Message     string `json:"message"`
	ResumeAfter uint64 `json:"resumeAfter"`
}

// handleACP is GET /v1/sessions/{id}/acp?after=N&follow=1 (or
// afterEventId=E for after= the seq of event E): the session as
// newline-delimited JSON-RPC 2.0 session/update notifications (pkg/acp,
// docs/acp.md), for the events after seq N (default 0: the whole session,
// as ACP's session/load replays it). Without follow the response ends
// at the session's last event when the request came; with follow=1 it
// stays open and adds the notifications of each new event. Each update's
// _meta.sessionlog.seq is the event it comes from: a client that
// reconnects with after= the last seq it saw misses and doubles nothing.
//
// It reads the log as the watch does (followDurable: a page at a time,
// as fast as the client takes it, each write bounded by the watch's
// WriteTimeout), and judges each message as /events does.
func (s *Server) handleACP(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionID(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	after, err := parseSeq(q.Get("after"))
	if err != nil {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, "after "+err.Error())
		return
	}
	if eid := q.Get("afterEventId"); eid != "" {
		if q.Has("after") {
			apiError(w, http.StatusBadRequest, schema.CodeBadRequest, "give after or afterEventId, not both")
			return
		}
		seq, ok := s.seqOfEvent(w, r, id, eid)
		if !ok {
			return
		}
		after = seq
	}
	var follow bool
	switch q.Get("follow") {
	case "", "0", "false":
	case "1", "true":
		follow = true
	default:
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, "follow must be 1 or 0")
		return
	}
	ctx := r.Context()
	fs, ok := s.startFollow(w, r, id, after)
	if !ok {
		return
	}
	durCh, stop, err := s.followDurable(ctx, id, fs.loc, fs.from)
	if err != nil {
		s.internal(w, err)
		return
	}
	defer stop()
	// What a rewind abandoned (as the views hold it now) is not replayed:
	// a client shows the conversation the model continues. A rewind that
	// comes later is a notification of its own.
	// Only the ranges of what was abandoned are held (Abandoned), not
	// the session's context.
	var skip skipper
	if err := s.view(func(rd reader) error {
		sum, err := rd.summary(id)
		if err != nil || sum == nil || sum.Rewinds == 0 {
			return err
		}
		skip.ranges, err = rd.snap.Abandoned(id, 1, sum.LastSeq)
		return err
	}); err != nil {
		s.internal(w, err)
		return
	}
	skipCalls := map[string]bool{}

	rc, done := s.openStream(w, "application/x-ndjson")
	defer done()
	enc := json.NewEncoder(w)
	last := fs.last
	n := namesOf(r)
	name := n.wire(id)
	write := func(n acp.Notification) error {
		rc.SetWriteDeadline(time.Now().Add(s.watch.lim.WriteTimeout))
		return enc.Encode(n)
	}
	if !follow && fs.from >= fs.tailStreamSeq {
		return
	}
	for {
		// Flush only when no message is waiting: a replay goes out in
		// large writes, a live event at once.
		var lm *logstore.Msg
		var ok bool
		select {
		case lm, ok = <-durCh:
		default:
			if rc.Flush() != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case lm, ok = <-durCh:
			}
		}
		if !ok {
			return
		}
		// Without follow the response ends at the message that was the
		// session's last when the request came.
		done := !follow && lm.StreamSeq >= fs.tailStreamSeq
		seq, v, why := judgeStored(id, last, fs.vouched, lm)
		switch {
		case v == storedCopy || (v == storedNext && seq == 0):
			if done {
				rc.Flush()
				return
			}
			continue
		case v == storedBad || v == storedGap:
			e := ACPError{Code: string(schema.CodeUnreadable), Message: n.text(fmt.Sprintf("stored message at stream seq %d: %s", lm.StreamSeq, why)), ResumeAfter: last}
			if v == storedGap {
				e.Code, e.Message = store.StatusGap, fmt.Sprintf("the session's events after seq %d are missing from the log", last)
			}
			_ = write(acp.Notify(name, acp.Update{SessionUpdate: acp.SessionInfoUpdate, Meta: map[string]any{acp.MetaKey: map[string]any{"error": e}}}))
			rc.Flush()
			return
		}
		last = seq
		if seq > after {
			ev, err := schema.Decode(lm.Data)
			if err != nil {
				// Folded by the projector, so it decoded then: a store
				// that changed under us.
				s.log.Error("projector: acp: decode", "session", id, "seq", seq, "err", err)
				return
			}
			if skip.skip(seq) && abandonable(ev.Type) || ev.Type == schema.TypeToolStarted && skipCalls[ev.ToolCallID] {
				if ev.Type == schema.TypeToolRequested {
					skipCalls[ev.ToolCallID] = true
				}
				if done {
					rc.Flush()
					return
				}
				continue
			}
			for _, u := range acp.Map(&ev) {
				if write(acp.Notify(name, u)) != nil {
					return
				}
			}
		}
		if done {
			rc.Flush()
			return
		}
	}
}

// seqOfEvent finds the seq of the session's event eventID by reading its
// log (the views index events by seq only); on a problem it has answered
// the request and returns false.
func (s *Server) seqOfEvent(w http.ResponseWriter, r *http.Request, id, eventID string) (uint64, bool) {
	if !schema.ValidItemID(eventID) {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, "afterEventId must match ^[A-Za-z0-9_.:-]{1,128}$")
		return 0, false
	}
	want := id + ":" + eventID
	var seq uint64
	tail, err := s.ls.ReadSession(r.Context(), id, 0, func(m *logstore.Msg) error {
		if m.Header.Get(logstore.HeaderMsgID) != want {
			return nil
		}
		if n, ok := seqOf(m); ok {
			seq = n
			return logstore.ErrStop
		}
		return nil
	})
	switch {
	case err != nil:
		s.readFailed(w, err)
		return 0, false
	case !tail.Exists():
		apiError(w, http.StatusNotFound, schema.CodeNotFound, "no session "+id)
		return 0, false
	case seq == 0:
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, fmt.Sprintf("session %s has no event %q", id, eventID))
		return 0, false
	}
	return seq, true
}

// abandonable: an event of this type leaves the context when a rewind
// abandons it (it is model-visible).
func abandonable(typ string) bool {
	role := store.ContextRole(typ)
	return role != "" && role != "rewind"
}

package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/agentlog/formats"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// handleExport is GET /v1/sessions/{id}/export?format=NAME: the session as
// a file of an agent's own format (DESIGN.md section 13), read from the
// log, offered as a download; without a format (or format=sessionlog),
// sessionlog's own JSON lines.
func (s *Server) handleExport(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionID(w, r)
	if !ok {
		return
	}
	name := r.URL.Query().Get("format")
	own := name == "" || name == "sessionlog"
	f, ok := formats.Lookup(name)
	if !ok && !own {
		apiError(w, http.StatusBadRequest, schema.CodeBadRequest, "format must be one of: "+strings.Join(formats.Names(), ", "))
		return
	}
	sum, ok := s.answerKnown(w, r, id)
	if !ok {
		return
	}
	if sum != nil && stoppedStatus(sum.Status) {
		// A file an agent would resume must hold the whole session.
		apiError(w, http.StatusConflict, schema.CodeUnreadable, "session "+id+" cannot be read to its end ("+sum.Status+")")
		return
	}
	n := namesOf(r)
	header := http.Header{"Content-Type": {"application/x-ndjson"}, "Content-Disposition": {`attachment; filename="` + n.wire(id) + `.jsonl"`}}
	st := s.stream(w, header)
	failed := func(err error) { st.fail(func() { s.readFailed(w, err) }) }
	if own {
		// sessionlog's own JSON lines: the stored envelopes, what
		// sessionlog export writes for one session, a page at a time.
		if err := s.readPaged(r.Context(), id, func(m *logstore.Msg) error {
			if _, err := st.Write(m.Data); err != nil {
				return err
			}
			_, err := st.Write(newline)
			return err
		}); err != nil {
			failed(err)
			return
		}
		st.end()
		return
	}
	// An agent's format reads the session twice, a page at a time: once
	// for what it must know before it writes (its fold, where its source
	// lines end), then as it writes (agentlog.Export). Four at a time: the
	// others wait their turn holding nothing.
	select {
	case s.agentExports <- struct{}{}:
		defer func() { <-s.agentExports }()
	case <-r.Context().Done():
		return
	}
	x, err := agentlog.NewExport(f.Name(), s.exportEvents(r.Context(), id, n))
	var re readError
	switch {
	case errors.As(err, &re):
		s.readFailed(w, re.err)
		return
	case err != nil: // the session does not fold
		apiError(w, http.StatusConflict, schema.CodeUnreadable, err.Error())
		return
	}
	if err := f.Export(st, x); err != nil {
		if errors.As(err, &re) {
			st.fail(func() { s.readFailed(w, re.err) })
		} else {
			st.fail(func() { s.internal(w, err) })
		}
		return
	}
	st.end()
}

// exportEvents reads the session for an export: each read from the
// stored message of the event after seq after (found by the index, else
// from the start), a page at a time (readPaged). The events name their
// session as n does: a file of an agent's format takes its ids from it
// (an imported session's own), so a tenant's is its agents' file.
func (s *Server) exportEvents(ctx context.Context, id string, n names) agentlog.Events {
	return func(after uint64, fn func(*schema.Envelope) error) error {
		var from uint64
		if after > 0 {
			if err := s.view(func(rd reader) (err error) {
				from, _, err = rd.startAt(id, after)
				return err
			}); err != nil {
				return readError{err}
			}
		}
		var fnErr error // what fn said: it is returned as it is
		err := s.readPagedFrom(ctx, id, from, func(m *logstore.Msg) error {
			e, err := schema.Decode(m.Data)
			if err != nil {
				return fmt.Errorf("projector: %s at stream seq %d: %w", id, m.StreamSeq, err)
			}
			if e.Seq <= after {
				return nil
			}
			e.SessionID = n.wire(e.SessionID)
			fnErr = fn(&e)
			return fnErr
		})
		switch {
		case err == nil || errors.Is(err, agentlog.ErrStop):
			return nil
		case err == fnErr:
			return err
		}
		return readError{err}
	}
}

// readError is a failure to read the log for an export; anything else
// NewExport returns says that the session does not fold.
type readError struct{ err error }

func (e readError) Error() string { return e.err.Error() }
func (e readError) Unwrap() error { return e.err }

var newline = []byte{'\n'}

// readPaged calls fn for each stored message of the session, in order, up
// to its last message when the call began: a page at a time
// (followDurable), the next read only when fn took this one, so a reader
// as slow as its client holds one page.
func (s *Server) readPaged(ctx context.Context, id string, fn func(*logstore.Msg) error) error {
	return s.readPagedFrom(ctx, id, 0, fn)
}

// readPagedFrom is readPaged from the message after stream seq from.
func (s *Server) readPagedFrom(ctx context.Context, id string, from uint64, fn func(*logstore.Msg) error) error {
	tail, err := s.ls.Tail(ctx, id)
	if err != nil || !tail.Exists() || tail.StreamSeq <= from {
		return err
	}
	loc, err := s.ls.Locate(id)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, stop, err := s.followDurable(ctx, id, loc, from)
	if err != nil {
		return err
	}
	defer stop()
	for m := range ch {
		if err := fn(m); err != nil {
			return err
		}
		if m.StreamSeq >= tail.StreamSeq {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("projector: %s: the log's read ended before stream seq %d", id, tail.StreamSeq)
}

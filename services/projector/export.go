package projector

import (
	"context"
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
func (s *Service) handleExport(w http.ResponseWriter, r *http.Request) {
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
	sum, exists, err := s.known(r.Context(), id)
	if err != nil {
		s.readFailed(w, err)
		return
	}
	if !exists {
		apiError(w, http.StatusNotFound, schema.CodeNotFound, "no session "+id)
		return
	}
	if sum != nil && stoppedStatus(sum.Status) {
		// A file an agent would resume must hold the whole session.
		apiError(w, http.StatusConflict, schema.CodeUnreadable, "session "+id+" cannot be read to its end ("+sum.Status+")")
		return
	}
	header := http.Header{"Content-Type": {"application/x-ndjson"}, "Content-Disposition": {`attachment; filename="` + id + `.jsonl"`}}
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
	// An agent's format is made from the whole session (its fold, its
	// source lines, what follows them): those exports are built one at a
	// time, the others wait their turn, so together they hold one
	// session's events. What they write streams like the rest.
	select {
	case s.wholeExports <- struct{}{}:
		defer func() { <-s.wholeExports }()
	case <-r.Context().Done():
		return
	}
	// Decoded straight into the slice the export takes (ReadEvents'
	// copy would be a second one).
	var events []schema.Envelope
	if err := s.readPaged(r.Context(), id, func(m *logstore.Msg) error {
		e, err := schema.Decode(m.Data)
		if err != nil {
			return fmt.Errorf("projector: %s at stream seq %d: %w", id, m.StreamSeq, err)
		}
		events = append(events, e)
		return nil
	}); err != nil {
		s.readFailed(w, err)
		return
	}
	x, err := agentlog.NewExport(f.Name(), events)
	if err != nil {
		apiError(w, http.StatusConflict, schema.CodeUnreadable, err.Error())
		return
	}
	events = nil
	if err := f.Export(st, x); err != nil {
		st.fail(func() { s.internal(w, err) })
		return
	}
	st.end()
}

var newline = []byte{'\n'}

// readPaged calls fn for each stored message of the session, in order, up
// to its last message when the call began: a page at a time
// (followDurable), the next read only when fn took this one, so a reader
// as slow as its client holds one page.
func (s *Service) readPaged(ctx context.Context, id string, fn func(*logstore.Msg) error) error {
	tail, err := s.ls.Tail(ctx, id)
	if err != nil || !tail.Exists() {
		return err
	}
	loc, err := s.ls.Locate(id)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, stop, err := s.followDurable(ctx, id, loc, 0)
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

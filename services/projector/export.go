package projector

import (
	"bytes"
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
	if own {
		// sessionlog's own JSON lines: the stored envelopes, what
		// sessionlog export writes for one session.
		var buf bytes.Buffer
		if _, err := s.ls.ReadSession(r.Context(), id, 0, func(m *logstore.Msg) error {
			buf.Write(m.Data)
			return buf.WriteByte('\n')
		}); err != nil {
			s.readFailed(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("Content-Disposition", `attachment; filename="`+id+`.jsonl"`)
		_, _ = w.Write(buf.Bytes())
		return
	}
	stored, _, err := s.ls.ReadEvents(r.Context(), id, 0)
	if err != nil {
		s.readFailed(w, err)
		return
	}
	events := make([]schema.Envelope, len(stored))
	for i, e := range stored {
		events[i] = e.Envelope
	}
	x, err := agentlog.NewExport(f.Name(), events)
	if err != nil {
		apiError(w, http.StatusConflict, schema.CodeUnreadable, err.Error())
		return
	}
	var buf bytes.Buffer
	if err := f.Export(&buf, x); err != nil {
		s.internal(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", `attachment; filename="`+id+`.jsonl"`)
	_, _ = w.Write(buf.Bytes())
}

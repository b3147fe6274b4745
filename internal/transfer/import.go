package transfer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/progress"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// Session is one session read from an export.
type Session struct {
	id     string
	events []schema.Envelope
}

// ReadExport parses an export and checks each session completely before
// anything is written: every line decodes and validates, seqs run 1..n,
// and the session folds under pkg/session's rules.
func ReadExport(r io.Reader) ([]*Session, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 2*schema.DefaultMaxEventBytes+(64<<10))
	var out []*Session
	byID := map[string]*Session{}
	states := map[string]*session.State{}
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		e, err := schema.Decode(b)
		if err != nil {
			if f := agentFormatOf(b); f != "" {
				return nil, fmt.Errorf("line %d: %w; this looks like a %s session file, not a sessionlog export: sessionlog import --from %s FILE", line, err, f, f)
			}
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if err := schema.Validate(&e, schema.ValidateOptions{Origin: schema.OriginService, MaxEventBytes: -1, Stored: true}); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		s := byID[e.SessionID]
		if s == nil {
			s = &Session{id: e.SessionID}
			byID[e.SessionID] = s
			out = append(out, s)
			states[e.SessionID] = session.New(e.SessionID)
		}
		if want := uint64(len(s.events)) + 1; e.Seq != want {
			return nil, fmt.Errorf("line %d: session %s: seq %d where %d was expected", line, e.SessionID, e.Seq, want)
		}
		if err := states[e.SessionID].Apply(&e); err != nil {
			return nil, fmt.Errorf("line %d: session %s seq %d: %w", line, e.SessionID, e.Seq, err)
		}
		s.events = append(s.events, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	return out, nil
}

// errExists: import never writes into a session that has other events.
var errExists = errors.New("exists with different events")

// Import writes sessions, read from an export (ReadExport), into the
// store, batch events per append. Every target is checked first: a
// session that exists is refused unless it holds exactly a prefix of the
// export (an import cut short, resumed); an erased id is left out (the
// others go in), and so is a session over its tenant's bounds.
func Import(ctx context.Context, st *logstore.Store, sessions []*Session, batch int, stdout, stderr io.Writer) error {
	// Check every target first: a session that exists is refused unless it
	// holds exactly a prefix of the export (an import cut short, resumed).
	start := make([]int, len(sessions))
	tails := make([]logstore.Tail, len(sessions))
	// An erased id is refused for good (section 14): that session is left
	// out, said with how to import it under another id, and the others go
	// in; the command exits 1.
	var erased []string
	for i, s := range sessions {
		// Import appends around the writer: it checks the erased ids itself.
		if gone, err := st.Erased(ctx, s.id); err != nil {
			return fmt.Errorf("import: nothing written: %w", err)
		} else if gone {
			fmt.Fprintf(stderr, "import: session %s not imported: %s (its id cannot be used again; import it under another with --as %s=NEW_ID)\n", s.id, schema.CodeErased, s.id)
			erased = append(erased, s.id)
			start[i] = -1
			continue
		}
		events, tail, err := st.ReadEvents(ctx, s.id, 0)
		if err != nil {
			return fmt.Errorf("import: nothing written: read %s: %w", s.id, err)
		}
		if len(events) > len(s.events) {
			return fmt.Errorf("import: nothing written: session %s %w (%d stored, %d in the file)", s.id, errExists, len(events), len(s.events))
		}
		for j, e := range events {
			if e.EventID != s.events[j].EventID || e.Seq != s.events[j].Seq {
				return fmt.Errorf("import: nothing written: session %s %w (seq %d is event %s here, %s in the file)", s.id, errExists, e.Seq, e.EventID, s.events[j].EventID)
			}
		}
		start[i], tails[i] = len(events), tail
	}
	var wrote, skipped int
	var refused []string                       // over their tenant's bounds
	bar := progress.New(stderr, len(sessions)) // on a terminal only
	bar.Unit = "sessions"
	defer bar.Clear()
	for i, s := range sessions {
		bar.Set(i, wrote)
		if start[i] < 0 {
			continue // erased
		}
		if start[i] == len(s.events) {
			skipped++
			continue
		}
		n, err := importSessionEvents(ctx, st, s, start[i], tails[i], batch)
		wrote += n
		if schema.CodeOf(err) == schema.CodeQuotaExceeded {
			fmt.Fprintf(stderr, "import: session %s not imported: %v\n", s.id, err)
			refused = append(refused, s.id)
			continue
		}
		if err != nil {
			return err
		}
	}
	bar.Clear()
	left := ""
	if len(erased) > 0 {
		left = fmt.Sprintf(", %d erased left out", len(erased))
	}
	if len(refused) > 0 {
		left += fmt.Sprintf(", %d over their tenant's bounds left out", len(refused))
	}
	fmt.Fprintf(stdout, "imported %d sessions, %d events (%d sessions already present%s)\n", len(sessions)-skipped-len(erased)-len(refused), wrote, skipped, left)
	var errs []error
	if len(erased) > 0 {
		errs = append(errs, fmt.Errorf("import: %d erased sessions not imported: %s", len(erased), strings.Join(erased, ", ")))
	}
	if len(refused) > 0 {
		errs = append(errs, schema.Errorf(schema.CodeQuotaExceeded, "import: %d sessions over their tenant's bounds not imported: %s", len(refused), strings.Join(refused, ", ")))
	}
	return errors.Join(errs...)
}

// importSessionEvents appends s's events from index from, after tail, in
// batches, and counts what it stored in the tenant's usage (DESIGN.md
// section 16, "Per-tenant limits": an import appends around the writer).
// A new session is first reserved under the tenant's bounds the writers
// recorded: past them it is refused quota_exceeded and nothing of it is
// stored. A session resumed (from > 0) is counted already and only its
// bytes are added. It returns the events written.
func importSessionEvents(ctx context.Context, st *logstore.Store, s *Session, from int, tail logstore.Tail, batch int) (wrote int, err error) {
	tenant := logstore.UsageTenant(s.id)
	var d logstore.TenantUsage
	reserved := false
	// Each body is encoded once: its size for the reservation, then
	// appended as it is (AppendRequest.Bodies). If one does not encode,
	// Append encodes them itself and says which.
	var size int64
	bodies, whole := make([][]byte, len(s.events)), true
	for i := from; i < len(s.events); i++ {
		b, err := schema.Encode(&s.events[i])
		whole = whole && err == nil
		bodies[i], size = b, size+int64(len(b))
	}
	if !whole {
		bodies = nil
	}
	if from == 0 {
		if reserved, err = st.ReserveStored(ctx, tenant, size, "session "+s.id+" not imported"); err != nil {
			return 0, err
		}
	}
	defer func() {
		switch {
		case wrote > 0 && from == 0 && !reserved:
			d.Sessions = 1
		case wrote == 0 && reserved && schema.CodeOf(err) != schema.CodeOutcomeUnknown:
			d.Sessions = -1 // nothing stored: the reservation is given back
		}
		if cerr := st.CountUsage(context.WithoutCancel(ctx), tenant, d); cerr != nil {
			err = errors.Join(err, fmt.Errorf("import: session %s is stored, counting it in tenant %s's usage failed (sessionlog tenants --recount puts it right): %w", s.id, tenant, cerr))
		}
	}()
	expected := tail.StreamSeq
	for i := from; i < len(s.events); i += batch {
		to := min(i+batch, len(s.events))
		req := logstore.AppendRequest{SessionID: s.id, ExpectedStreamSeq: expected, Events: s.events[i:to]}
		if bodies != nil {
			req.Bodies = bodies[i:to]
		}
		res, err := st.Append(ctx, req)
		if err != nil {
			return wrote, fmt.Errorf("import: session %s seq %d..%d (sessions before it are imported; re-run to resume): %w", s.id, i+1, to, err)
		}
		expected = res.StreamSeq
		wrote += to - i
		d.Bytes += int64(res.Bytes)
	}
	return wrote, nil
}

// zstdMagic starts every zstd frame.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// MaybeZstd decompresses r if it is zstd (a retention archive).
func MaybeZstd(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	head, _ := br.Peek(len(zstdMagic))
	if !bytes.Equal(head, zstdMagic) {
		return br, nil
	}
	zr, err := zstd.NewReader(br)
	if err != nil {
		return nil, err
	}
	return zr.IOReadCloser(), nil
}

// RenameSessions gives sessions of an export other ids: as is NEW (the
// file's one session) or OLD=NEW pairs separated by commas.
func RenameSessions(sessions []*Session, as string) error {
	renames := map[string]string{}
	if !strings.Contains(as, "=") {
		if len(sessions) != 1 {
			return fmt.Errorf("the file holds %d sessions: name each, OLD=NEW[,OLD=NEW...]", len(sessions))
		}
		renames[sessions[0].id] = as
	} else {
		for _, pair := range strings.Split(as, ",") {
			old, id, ok := strings.Cut(pair, "=")
			if !ok || old == "" {
				return fmt.Errorf("%q: want OLD=NEW", pair)
			}
			renames[old] = id
		}
	}
	have := map[string]*Session{}
	for _, s := range sessions {
		have[s.id] = s
	}
	taken := map[string]bool{}
	for _, s := range sessions {
		if _, renamed := renames[s.id]; !renamed {
			taken[s.id] = true
		}
	}
	for old, id := range renames {
		if have[old] == nil {
			return fmt.Errorf("the file holds no session %s", old)
		}
		if !schema.ValidSessionID(id) {
			return fmt.Errorf("session id %q must match ^[A-Za-z0-9_-]{1,128}$", id)
		}
		if taken[id] {
			return fmt.Errorf("two sessions of the file would be %s", id)
		}
		taken[id] = true
	}
	for old, id := range renames {
		s := have[old]
		s.id = id
		for i := range s.events {
			s.events[i].SessionID = id
		}
	}
	return nil
}

// agentFormatOf names the agent format a line that is not a sessionlog
// envelope looks like ("" when none): a Claude Code line has a uuid and a
// sessionId (or is a summary, file-history-snapshot or queue-operation
// line), a codex rollout line a type and a payload, a pi line a
// session header or an entry with an id and a parentId.
func agentFormatOf(line []byte) string {
	var l struct {
		Type      string          `json:"type"`
		UUID      string          `json:"uuid"`
		SessionID string          `json:"sessionId"`
		Payload   json.RawMessage `json:"payload"`
		ID        string          `json:"id"`
		ParentID  *string         `json:"parentId"`
		Version   *int            `json:"version"`
		Cwd       string          `json:"cwd"`
	}
	if json.Unmarshal(line, &l) != nil {
		return ""
	}
	switch {
	case l.UUID != "" && l.SessionID != "", l.Type == "summary" && l.SessionID == "",
		l.Type == "file-history-snapshot", l.Type == "queue-operation":
		return "claude-code"
	case len(l.Payload) > 0 && l.Type != "":
		return "codex"
	case l.Type == "session" && l.ID != "" && l.Cwd != "", l.ID != "" && l.ParentID != nil:
		return "pi"
	}
	return ""
}

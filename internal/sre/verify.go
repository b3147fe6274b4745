package sre

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// Verify checks every stored session (only that one, when only is set)
// and prints each problem, as a line or as JSON; with base, also what
// the projector at that URL shows. When it found problems it returns
// ErrSilent, having said them.
func Verify(ctx context.Context, st *logstore.Store, only string, asJSON bool, base, token string, stdout, stderr io.Writer) (err error) { // What the projector shows is read before the log: every session it
	// shows was stored by then, so one the log holds less of now lost
	// events (or was erased meanwhile, which its record says).
	var shown []projectedSession
	if base != "" {
		if shown, err = projectorSessions(ctx, base, token); err != nil {
			return fmt.Errorf("verify: the projector at %s: %w", base, err)
		}
	}
	refs, err := ListSessions(ctx, st)
	if err != nil {
		return err
	}
	if only != "" {
		var keep []SessionRef
		for _, r := range refs {
			if r.ID == only {
				keep = append(keep, r)
			}
		}
		if len(keep) == 0 {
			return fmt.Errorf("session %s: %w", only, ErrNotFound)
		}
		refs = keep
	}
	var events uint64
	nprob := 0
	enc := json.NewEncoder(stdout)
	report := func(p problem) {
		nprob++
		if asJSON {
			_ = enc.Encode(p)
		} else {
			fmt.Fprintln(stdout, p.String())
		}
	}
	// What nats-server lost of a stream when it recovered its files may
	// be any session's events, this one's too: the chain of a session
	// that lost its last events is whole.
	for _, name := range st.Streams() {
		if ld, err := st.StreamLost(ctx, name); err != nil {
			report(problem{Stream: name, Kind: ProbRead, Message: err.Error()})
		} else if ld != nil {
			report(problem{Stream: name, Kind: ProbServerLost, Message: "nats-server " + ld.Describe() + ": the sessions whose events were stored there lost them (one that lost only its last events still has a whole chain)"})
		}
	}
	erasing := 0
	lastOf := make(map[string]uint64, len(refs)) // the last seq stored, of each session verified
	erasingIDs := map[string]bool{}
	for _, r := range refs {
		// A session being erased has lost its oldest events on purpose:
		// named as an erasure under way, not checked for gaps.
		if rec, _, err := st.ErasureOf(ctx, r.ID); err == nil && rec != nil {
			erasing++
			erasingIDs[r.ID] = true
			if asJSON {
				_ = enc.Encode(map[string]any{"session": r.ID, "erasing": true, "phase": rec.Phase, "deleted": rec.Deleted, "total": rec.Total, "erasedAt": rec.ErasedAt})
			} else {
				fmt.Fprintf(stdout, "ERASING session=%s phase=%s deleted=%d of %d: an erasure under way since %s (not a problem: the eraser finishes it by itself)\n",
					r.ID, rec.Phase, rec.Deleted, max(rec.Total, rec.Deleted), rec.ErasedAt)
			}
			continue
		}
		n, last, probs := verifySession(ctx, st, r.ID, r.Events)
		events += n
		lastOf[r.ID] = last
		for _, p := range probs {
			report(p)
		}
	}
	for _, ps := range shown {
		if only != "" && ps.SessionID != only {
			continue
		}
		last, verified := lastOf[ps.SessionID]
		if ps.LastSeq <= last {
			continue
		}
		if !verified {
			if erasingIDs[ps.SessionID] {
				continue // being erased, said above
			}
			if rec, _, err := st.ErasureOf(ctx, ps.SessionID); err == nil && rec != nil {
				continue // erased since the projector was read
			}
			report(problem{Session: ps.SessionID, Seq: 1, Kind: ProbLost,
				Message: fmt.Sprintf("the projector shows %d events of it; the log holds none", ps.LastSeq)})
			continue
		}
		report(problem{Session: ps.SessionID, Seq: last + 1, Kind: ProbLost,
			Message: fmt.Sprintf("the projector folded up to seq %d; the log holds up to seq %d: %s gone", ps.LastSeq, last, seqSpan(last+1, ps.LastSeq))})
	}
	summary := fmt.Sprintf("verified %d sessions, %d events: %d problems", len(refs)-erasing, events, nprob)
	if erasing > 0 {
		summary += fmt.Sprintf(" (%d being erased)", erasing)
	}
	if asJSON {
		_ = enc.Encode(map[string]any{"sessions": len(refs) - erasing, "events": events, "problems": nprob, "erasing": erasing})
	} else {
		fmt.Fprintln(stdout, summary)
	}
	if nprob > 0 {
		fmt.Fprintln(stderr, "sessionlog verify: "+summary)
		return ErrSilent
	}
	return nil
}

// problem is one finding of verify: of a session, or of a whole stream
// (Stream set, Session empty).
type problem struct {
	Session   string `json:"session"`
	Stream    string `json:"stream,omitempty"`
	Seq       uint64 `json:"seq,omitempty"`
	StreamSeq uint64 `json:"streamSeq,omitempty"`
	Kind      string `json:"kind"`
	Message   string `json:"message"`
}

func (p problem) String() string {
	if p.Session == "" && p.Stream != "" {
		return fmt.Sprintf("PROBLEM stream=%s kind=%s: %s", p.Stream, p.Kind, p.Message)
	}
	return fmt.Sprintf("PROBLEM session=%s seq=%d stream_seq=%d kind=%s: %s", p.Session, p.Seq, p.StreamSeq, p.Kind, p.Message)
}

// verifySession checks one session's stored events: each decodes (a newer
// schema or an unknown required type makes the session unreadable),
// validates as a stored event, names this session, has seq prev+1 (no gap,
// no duplicate), follows the hash chain (SL-Prev: no event missing,
// changed or reordered), carries an event id no earlier event of the session has
// (an id is unique in its session for the session's whole life), and
// folds with pkg/session's rules (pairing, structure). Seq checks go on
// after a fold error, so every gap is reported.
func verifySession(ctx context.Context, st *logstore.Store, id string, expectEvents uint64) (n, last uint64, probs []problem) {
	state := session.New(id)
	folding := true
	var prev uint64
	ids := make(map[string]uint64) // event id -> the seq that first holds it
	// The hash chain's last link; the seqs stored; the problems that are
	// gaps, each a reordering if its first missing seq is stored later.
	var link logstore.Link
	seen := make(map[uint64]bool)
	type gap struct {
		prob    int
		missing uint64
	}
	var gaps []gap
	add := func(seq, sseq uint64, kind, format string, args ...any) {
		probs = append(probs, problem{Session: id, Seq: seq, StreamSeq: sseq, Kind: kind, Message: fmt.Sprintf(format, args...)})
	}
	// The judge every reader of the session uses (logstore.Judge): its
	// verdict on the first unreadable message is a problem of its own,
	// worded as the writer, the projector and the other verbs word it.
	judge := &logstore.Judge{SessionID: id}
	tail, err := st.ReadStored(ctx, id, func(m *logstore.Msg) error {
		n++
		e, err := schema.Decode(m.Data)
		if judge != nil {
			var ue *logstore.UnreadableError
			if _, jerr := judge.Judged(m, &e, err); errors.As(jerr, &ue) {
				add(ue.GotSeq, m.StreamSeq, ProbUnreadable, "%v", ue)
				judge = nil
			}
		}
		if err != nil {
			kind := ProbInvalid
			if errors.Is(err, schema.ErrNewerSchema) {
				kind = ProbUnreadable
			}
			hseq, _ := strconv.ParseUint(m.Header.Get(logstore.HeaderSeq), 10, 64)
			add(hseq, m.StreamSeq, kind, "does not decode: %v", err)
			if hseq > 0 {
				prev = hseq
			}
			link = logstore.Link{} // not chained to what follows
			folding = false
			return nil
		}
		seqStored := e.Seq <= prev // reported below as a seq stored again
		seen[e.Seq] = true
		switch {
		case e.Seq == prev:
			add(e.Seq, m.StreamSeq, ProbDuplicate, "seq %d stored again (event %s)", e.Seq, e.EventID)
		case e.Seq > prev+1 && link.StreamSeq == 0:
			add(e.Seq, m.StreamSeq, ProbGap, "seq %d follows seq %d: %d missing", e.Seq, prev, e.Seq-prev-1)
		default:
			// The hash chain: a gap, a changed event, a reordered one.
			if b := logstore.CheckLink(link, m, e.Seq); b != nil {
				if b.Kind == ProbGap {
					gaps = append(gaps, gap{len(probs), link.Seq + 1})
				}
				add(b.Seq, b.StreamSeq, b.Kind, "%s", b.Message)
			}
		}
		if e.Seq > prev {
			prev = e.Seq
			link = logstore.LinkOf(m, e.Seq)
		}
		if first, dup := ids[e.EventID]; dup && !seqStored {
			add(e.Seq, m.StreamSeq, ProbDuplicateID, "event id %s is stored again: first at seq %d", e.EventID, first)
		} else if !dup {
			ids[e.EventID] = e.Seq
		}
		if e.SessionID != id {
			add(e.Seq, m.StreamSeq, ProbMismatch, "event names session %q", e.SessionID)
		}
		if h := m.Header.Get(logstore.HeaderSeq); h != "" && h != strconv.FormatUint(e.Seq, 10) {
			add(e.Seq, m.StreamSeq, ProbMismatch, "header %s=%s, body seq %d", logstore.HeaderSeq, h, e.Seq)
		}
		if err := schema.Validate(&e, schema.ValidateOptions{Origin: schema.OriginService, MaxEventBytes: -1, Stored: true}); err != nil {
			kind := ProbInvalid
			if schema.CodeOf(err) == schema.CodeUnknownType {
				kind = ProbUnreadable
			}
			add(e.Seq, m.StreamSeq, kind, "%v", err)
			folding = false
			return nil
		}
		if !folding {
			return nil
		}
		if err := state.Apply(&e); err != nil {
			kind := ProbStructure
			if schema.CodeOf(err) == schema.CodeUnknownType {
				kind = ProbUnreadable
			}
			add(e.Seq, m.StreamSeq, kind, "%v", err)
			folding = false
		}
		return nil
	})
	var ue *logstore.UnreadableError
	switch {
	case errors.As(err, &ue) && ue.Kind == logstore.KindUnopened:
		// A sealed body that does not open: the read ends at it, which fn
		// never saw.
		if judge != nil {
			add(ue.GotSeq, ue.StreamSeq, ProbUnreadable, "%v", ue)
		}
	case err != nil && !errors.Is(err, logstore.ErrUnreadable): // the last message, judged above
		add(0, 0, ProbRead, "%v", err)
		return n, prev, probs
	}
	for _, g := range gaps {
		if p := &probs[g.prob]; seen[g.missing] {
			p.Kind, p.Message = ProbReordered, fmt.Sprintf("%s, and seq %d is stored later", p.Message, g.missing)
		}
	}
	if expectEvents > 0 && n < expectEvents && tail.Exists() {
		add(0, tail.StreamSeq, ProbRead, "read %d events, the stream holds %d", n, expectEvents)
	}
	return n, prev, probs
}

// seqSpan names seqs from..to.
func seqSpan(from, to uint64) string {
	if from == to {
		return fmt.Sprintf("seq %d", from)
	}
	return fmt.Sprintf("seqs %d..%d", from, to)
}

// projectedSession is what verify reads of a session the projector shows.
type projectedSession struct {
	SessionID string `json:"sessionId"`
	LastSeq   uint64 `json:"lastSeq"`
}

// projectorSessions pages through the projector's list of sessions
// (GET /v1/sessions, most recent activity first).
func projectorSessions(ctx context.Context, base, token string) ([]projectedSession, error) {
	base = strings.TrimRight(base, "/")
	cl := &http.Client{Timeout: 30 * time.Second}
	var out []projectedSession
	seen := map[string]bool{}
	after := ""
	for {
		u := base + "/v1/sessions?limit=1000"
		if after != "" {
			u += "&after=" + url.QueryEscape(after)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := cl.Do(req)
		if err != nil {
			return nil, err
		}
		var page struct {
			Sessions []projectedSession `json:"sessions"`
			Next     string             `json:"next"`
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			return nil, fmt.Errorf("GET /v1/sessions: %s: %s", resp.Status, strings.TrimSpace(string(b)))
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("GET /v1/sessions: %w", err)
		}
		for _, ps := range page.Sessions {
			// A session whose activity moved while paging comes again:
			// the first answer stands.
			if !seen[ps.SessionID] {
				seen[ps.SessionID] = true
				out = append(out, ps)
			}
		}
		if page.Next == "" || len(page.Sessions) == 0 {
			return out, nil
		}
		after = page.Next
	}
}

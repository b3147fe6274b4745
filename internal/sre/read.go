// Package sre holds the logic of the SRE verbs of the command: the
// read-only tools over the log store, which the command opens without
// provisioning (ls, show, replay, tail, verify, verify-projection,
// tenants, locate), and the operator's requests to the services (repair,
// erase) and fork. The command parses each verb's flags, connects, and
// calls it here.
package sre

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Kinds of problems verify reports (ReadProblem.Kind is one).
const (
	ProbGap         = logstore.BreakGap
	ProbChanged     = logstore.BreakChanged   // the hash chain: a stored body is not the one written
	ProbReordered   = logstore.BreakReordered // the hash chain: an event stored after a later one
	ProbDuplicate   = "duplicate"
	ProbDuplicateID = "duplicate_id"
	ProbUnreadable  = "unreadable"
	ProbInvalid     = "invalid"
	ProbStructure   = "structure"
	ProbLost        = "lost"        // with --http-url: the projector folded events the log no longer holds
	ProbServerLost  = "server_lost" // nats-server lost stored messages of a stream when it recovered its files
	ProbMismatch    = "mismatch"
	ProbRead        = "read"
)

// ErrNotFound: a session with no events.
var ErrNotFound = errors.New("not found")

// ErrErased: the session was erased (section 14); its id is refused for
// good, where a session never written is only not found.
var ErrErased = errors.New("erased")

// Missing is the error for a session with no events: erased, with when,
// by whom and why, when its erasure record says so; else not found. A
// record that cannot be read (a user without the bucket's permission)
// leaves it not found.
func Missing(ctx context.Context, st *logstore.Store, id string) error {
	if er, _, err := st.ErasureOf(ctx, id); err == nil && er != nil {
		state := ""
		if !er.Done {
			state = fmt.Sprintf("; the erasure is under way (%s, %d of %d events deleted): the eraser finishes it by itself", er.Phase, er.Deleted, max(er.Total, er.Deleted))
		}
		return fmt.Errorf("session %s: %w at %s by %s (%s)%s", id, ErrErased, er.ErasedAt, er.By, er.Reason, state)
	}
	return fmt.Errorf("session %s: %w", id, ErrNotFound)
}

// SessionRef is a session found in a stream's subject state.
type SessionRef struct {
	Stream string
	ID     string
	Events uint64
}

// ListSessions enumerates sessions from each stream's per-subject state
// (no consumer), sorted by id.
func ListSessions(ctx context.Context, st *logstore.Store) ([]SessionRef, error) {
	list, err := st.ListSessions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]SessionRef, len(list))
	for i, s := range list {
		out[i] = SessionRef{Stream: s.Stream, ID: s.ID, Events: s.Messages}
	}
	return out, nil
}

// ReadProblem is why a session cannot be read past a stored message:
// Kind is ProbUnreadable (logstore.Judge's verdict on the message, or an
// event the session's rules refuse) or ProbGap (the judge found seqs
// missing before it).
type ReadProblem struct {
	Kind      string
	StreamSeq uint64
	AfterSeq  uint64
	Err       error
}

func (p *ReadProblem) Error() string {
	var ue *logstore.UnreadableError
	if errors.As(p.Err, &ue) {
		return ue.Error() // the judge's words, as every reader gives them
	}
	return fmt.Sprintf("at stream seq %d (after seq %d): %v", p.StreamSeq, p.AfterSeq, p.Err)
}

func (p *ReadProblem) Unwrap() error { return p.Err }

// ReadValid reads a session's stored messages in order, judged
// (logstore.ReadJudged), and calls fn with each event of it; a stored
// copy of the event before is skipped. It stops at the first unreadable
// message and returns a *ReadProblem naming it, after fn saw every event
// before it.
func ReadValid(ctx context.Context, st *logstore.Store, id string, fn func(m *logstore.Msg, e *schema.Envelope) error) (logstore.Tail, error) {
	j := logstore.Judge{SessionID: id}
	tail, err := st.ReadJudged(ctx, &j, fn)
	var ue *logstore.UnreadableError
	if errors.As(err, &ue) {
		kind := ProbUnreadable
		if ue.Kind == logstore.KindGap {
			kind = ProbGap
		}
		if !tail.Exists() {
			tail.StreamSeq = ue.StreamSeq
		}
		return tail, &ReadProblem{Kind: kind, StreamSeq: ue.StreamSeq, AfterSeq: ue.AfterSeq, Err: ue}
	}
	return tail, err
}

// WriteLine prints a stored body as one JSON line exactly as stored, only
// compacted if it has newlines.
func WriteLine(w io.Writer, body []byte) error {
	if bytes.ContainsAny(body, "\r\n") {
		var buf bytes.Buffer
		if err := json.Compact(&buf, body); err == nil {
			body = buf.Bytes()
		} else {
			body = bytes.ReplaceAll(bytes.ReplaceAll(body, []byte("\r"), nil), []byte("\n"), nil)
		}
	}
	if _, err := w.Write(body); err != nil {
		return err
	}
	_, err := w.Write([]byte("\n"))
	return err
}

// ErrSilent: a verb said on its output all it had to say of its failure
// (verify's problems); the command exits 1 without a message.
var ErrSilent = errors.New("sessionlog: failed")

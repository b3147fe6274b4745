package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// The SRE verbs: read-only tools (and import) against --nats-url. They
// never provision the stream: an SRE tool pointed at the wrong server must
// not create an empty SESSIONS there.

func init() {
	register(&command{Name: "ls", Summary: "list sessions: id, events, last seq, last type, last time", Run: runLs})
	register(&command{Name: "show", Summary: "show <id>: a session's folded state (status, open work, goal, lease)", Run: runShow})
	register(&command{Name: "replay", Summary: "replay <id>: print a session's stored events as JSON lines", Run: runReplay})
	register(&command{Name: "tail", Summary: "tail [<id>]: follow new events live, durable and transient", Run: runTail})
	register(&command{Name: "verify", Summary: "check every session: seq contiguity, decoding, pairing and structure, readability", Run: runVerify})
}

// sre is what a verb needs after its flags are parsed.
type sre struct {
	store *logstore.Store
	log   *slog.Logger
	// ctx is the verb's context, bounded by --timeout and by the
	// connection (natsFlags.verbContext); explain turns the errors its end
	// causes into the reason.
	ctx   context.Context
	close func()
}

// explain wraps a verb's error: deferred as `defer func() { err = c.explain(err) }()`.
func (c *sre) explain(err error) error { return verbError(c.ctx, err) }

// verbTimeouts are the verbs' default --timeout: tail follows until
// interrupted; the others read or write up to the whole stream.
var verbTimeouts = map[string]time.Duration{
	"ls": defaultVerbTimeout, "show": defaultVerbTimeout, "tail": 0,
}

// sreFlags adds the connection flags to a verb's flag set.
func sreFlags(name string, stderr io.Writer) (*flag.FlagSet, *natsFlags) {
	fs := newFlags(name)
	fs.SetOutput(stderr)
	nf := addNATSFlags(fs)
	def, ok := verbTimeouts[name]
	if !ok {
		def = defaultBulkVerbTimeout
	}
	nf.addTimeoutFlag(fs, def)
	return fs, nf
}

// openSRE connects and opens the store without provisioning.
func openSRE(ctx context.Context, name string, fs *flag.FlagSet, nf *natsFlags, stderr io.Writer) (*sre, error) {
	log, err := newLogger(fs, stderr)
	if err != nil {
		return nil, err
	}
	nf.Log = log
	ctx, cancel := nf.verbContext(ctx, name)
	nc, err := nf.connect("sessionlog-" + name)
	if err != nil {
		cancel()
		return nil, err
	}
	st, err := logstore.Open(ctx, nc, logstore.Config{NoProvision: true, Logger: log.With("component", "logstore")})
	if err != nil {
		nc.Close()
		err = verbError(ctx, err)
		cancel()
		return nil, fmt.Errorf("open log store at %s: %w", redactURL(nf.URL), err)
	}
	return &sre{store: st, log: log, ctx: ctx, close: func() { nc.Close(); cancel() }}, nil
}

// sessionRef is a session found in a stream's subject state.
type sessionRef struct {
	Stream string
	ID     string
	Events uint64
}

// listSessions enumerates sessions from each stream's per-subject state
// (no consumer), sorted by id.
func listSessions(ctx context.Context, st *logstore.Store) ([]sessionRef, error) {
	var out []sessionRef
	for _, name := range logstore.Streams() {
		s, err := st.JetStream().Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
		if err != nil {
			return nil, fmt.Errorf("stream %s subjects: %w", name, err)
		}
		for subj, n := range info.State.Subjects {
			if id, ok := logstore.SessionFromSubject(subj); ok {
				out = append(out, sessionRef{Stream: name, ID: id, Events: n})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// lastEvent is the summary `ls` prints per session.
type lastEvent struct {
	SessionID string    `json:"sessionId"`
	Events    uint64    `json:"events"`
	LastSeq   uint64    `json:"lastSeq"`
	LastType  string    `json:"lastType"`
	LastTime  time.Time `json:"lastTime"`
	StreamSeq uint64    `json:"streamSeq"`
}

func runLs(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs, nf := sreFlags("ls", stderr)
	asJSON := fs.Bool("json", false, "print JSON lines instead of a table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("ls takes no arguments")
	}
	c, err := openSRE(ctx, "ls", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	defer func() { err = c.explain(err) }()
	ctx = c.ctx
	refs, err := listSessions(ctx, c.store)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	if !*asJSON {
		fmt.Fprintln(tw, "SESSION\tEVENTS\tLAST SEQ\tLAST TYPE\tLAST TIME")
	}
	enc := json.NewEncoder(stdout)
	for _, r := range refs {
		le := lastEvent{SessionID: r.ID, Events: r.Events}
		if err := c.lastOf(ctx, r, &le); err != nil {
			return err
		}
		if *asJSON {
			if err := enc.Encode(le); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", le.SessionID, le.Events, le.LastSeq, le.LastType, le.LastTime.UTC().Format(time.RFC3339Nano))
	}
	if !*asJSON {
		return tw.Flush()
	}
	return nil
}

// lastOf fills the last event of a session from its headers (and body for
// the time).
func (c *sre) lastOf(ctx context.Context, r sessionRef, le *lastEvent) error {
	loc, err := logstore.Locate(r.ID)
	if err != nil {
		return err
	}
	s, err := c.store.JetStream().Stream(ctx, loc.Stream)
	if err != nil {
		return err
	}
	m, err := s.GetLastMsgForSubject(ctx, loc.Subject)
	if err != nil {
		return fmt.Errorf("last event of %s: %w", r.ID, err)
	}
	le.StreamSeq = m.Sequence
	le.LastType = m.Header.Get(logstore.HeaderType)
	le.LastSeq, _ = strconv.ParseUint(m.Header.Get(logstore.HeaderSeq), 10, 64)
	le.LastTime = m.Time
	if e, err := schema.Decode(m.Data); err == nil {
		le.LastTime, le.LastType, le.LastSeq = e.Time, e.Type, e.Seq
	}
	return nil
}

// oneID parses a verb's single session id argument.
func oneID(fs *flag.FlagSet, verb string) (string, error) {
	if fs.NArg() != 1 {
		return "", usageErrorf("usage: sessionlog %s <sessionId> [flags]", verb)
	}
	id := fs.Arg(0)
	if _, err := logstore.Locate(id); err != nil {
		return "", usageErrorf("%v", err)
	}
	return id, nil
}

func runShow(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs, nf := sreFlags("show", stderr)
	asJSON := fs.Bool("json", false, "print the folded state as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	id, err := oneID(fs, "show")
	if err != nil {
		return err
	}
	c, err := openSRE(ctx, "show", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	defer func() { err = c.explain(err) }()
	ctx = c.ctx
	st := session.New(id)
	var foldErr error
	tail, err := readValid(ctx, c.store, id, func(m *logstore.Msg, e *schema.Envelope) error {
		if err := st.Apply(e); err != nil {
			foldErr = &readProblem{kind: probUnreadable, streamSeq: m.StreamSeq, afterSeq: st.LastSeq, err: err}
			return logstore.ErrStop
		}
		return nil
	})
	var rp *readProblem
	if errors.As(err, &rp) {
		foldErr, err = rp, nil
	}
	if err != nil {
		return err
	}
	if !tail.Exists() {
		return fmt.Errorf("session %s: %w", id, errNotFound)
	}
	lease, _, lerr := c.store.GetLease(ctx, id)
	if *asJSON {
		out := map[string]any{"state": st, "openWork": st.OpenWork(), "status": showStatus(st, foldErr), "streamSeq": tail.StreamSeq}
		if lease != nil {
			out["lease"] = lease
		}
		if foldErr != nil {
			out["error"] = foldErr.Error()
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		printState(stdout, st, tail, foldErr, lease, lerr)
	}
	if foldErr != nil {
		return fmt.Errorf("session %s is %s: %w", id, showStatus(st, foldErr), foldErr)
	}
	return nil
}

var errNotFound = errors.New("not found")

func showStatus(st *session.State, foldErr error) string {
	var rp *readProblem
	switch {
	case errors.As(foldErr, &rp):
		return string(rp.kind)
	case foldErr != nil:
		return "unreadable"
	case st.Closed:
		return "closed"
	case st.Forking:
		return "forking"
	case st.Paused:
		return "paused"
	case st.HasOpenWork():
		return "active"
	}
	return "idle"
}

func printState(w io.Writer, st *session.State, tail logstore.Tail, foldErr error, lease *logstore.Lease, leaseErr error) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintf(tw, "session\t%s\n", st.SessionID)
	fmt.Fprintf(tw, "status\t%s\n", showStatus(st, foldErr))
	fmt.Fprintf(tw, "last seq\t%d (stream seq %d, event %s, %s)\n", st.LastSeq, tail.StreamSeq, st.LastEventID, st.LastTime.UTC().Format(time.RFC3339Nano))
	if foldErr != nil {
		fmt.Fprintf(tw, "error\t%v\n", foldErr)
	}
	if st.Meta.Title != "" {
		fmt.Fprintf(tw, "title\t%s\n", st.Meta.Title)
	}
	if st.Meta.Agent != "" {
		fmt.Fprintf(tw, "agent\t%s\n", st.Meta.Agent)
	}
	if p := st.Meta.Parent; p != nil {
		fmt.Fprintf(tw, "parent\t%s at seq %d (depth %d)\n", p.SessionID, p.SeedLength, p.Depth)
	}
	if st.Paused {
		fmt.Fprintf(tw, "paused\t%s\n", st.PauseReason)
	}
	if st.Closed {
		fmt.Fprintf(tw, "closed\t%s\n", st.CloseReason)
	}
	fmt.Fprintf(tw, "turns\t%d\n", st.Turns)
	if st.Turn != nil {
		fmt.Fprintf(tw, "open turn\t%s since seq %d\n", st.Turn.ID, st.Turn.StartSeq)
	}
	for _, it := range st.OpenWork() {
		fmt.Fprintf(tw, "open\t%s %s (turn %s, since seq %d)\n", it.Kind, it.ID, it.TurnID, it.StartSeq)
	}
	if g := st.Goal; g != nil {
		fmt.Fprintf(tw, "goal\trevision %d, %s: %s\n", g.Revision, g.Status, oneLine(g.Objective, 100))
	}
	if st.Repairs > 0 {
		fmt.Fprintf(tw, "repairs\t%d (last at seq %d)\n", st.Repairs, st.LastRepairSeq)
	}
	switch {
	case leaseErr != nil:
		fmt.Fprintf(tw, "lease\t(unknown: %v)\n", leaseErr)
	case lease != nil:
		fmt.Fprintf(tw, "lease\t%s, renewed %s\n", lease.Holder, lease.RenewedAt.UTC().Format(time.RFC3339Nano))
	default:
		fmt.Fprintf(tw, "lease\tnone\n")
	}
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs, nf := sreFlags("replay", stderr)
	after := fs.Uint64("after", 0, "print only events with seq > N")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	id, err := oneID(fs, "replay")
	if err != nil {
		return err
	}
	c, err := openSRE(ctx, "replay", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	defer func() { err = c.explain(err) }()
	ctx = c.ctx
	tail, err := readValid(ctx, c.store, id, func(m *logstore.Msg, e *schema.Envelope) error {
		if e.Seq <= *after {
			return nil
		}
		return writeLine(stdout, m.Data)
	})
	var rp *readProblem
	if errors.As(err, &rp) {
		return fmt.Errorf("session %s is %s: %w", id, rp.kind, rp)
	}
	if err != nil {
		return err
	}
	if !tail.Exists() {
		return fmt.Errorf("session %s: %w", id, errNotFound)
	}
	return nil
}

// readProblem is why a session cannot be read past a stored message:
// kind is probUnreadable (not an event, another session's event, a seq
// that goes backwards or repeats with another event id, a newer schema,
// or an event the session's rules refuse) or probGap (a seq missing).
type readProblem struct {
	kind      string
	streamSeq uint64
	afterSeq  uint64
	err       error
}

func (p *readProblem) Error() string {
	return fmt.Sprintf("at stream seq %d (after seq %d): %v", p.streamSeq, p.afterSeq, p.err)
}

func (p *readProblem) Unwrap() error { return p.err }

// readValid reads a session's stored messages in order and calls fn with
// each event of it; a stored copy of the event before (same seq, same
// event id) is skipped. It stops at the first message that is not the
// next event and returns a *readProblem naming it, after fn saw every
// event before it. Unlike ReadSession it reads a session whose last
// stored message is not an event (message by message from the leader).
func readValid(ctx context.Context, st *logstore.Store, id string, fn func(m *logstore.Msg, e *schema.Envelope) error) (logstore.Tail, error) {
	var last uint64
	var lastID string
	var bad *readProblem
	started := false
	check := func(m *logstore.Msg) error {
		started = true
		fail := func(kind string, err error) error {
			bad = &readProblem{kind: kind, streamSeq: m.StreamSeq, afterSeq: last, err: err}
			return logstore.ErrStop
		}
		e, err := schema.Decode(m.Data)
		switch {
		case err != nil:
			return fail(probUnreadable, err)
		case e.SessionID != id:
			return fail(probUnreadable, fmt.Errorf("event %q names session %q", e.EventID, e.SessionID))
		case e.Seq == last && e.EventID == lastID:
			return nil
		case e.Seq <= last:
			return fail(probUnreadable, fmt.Errorf("event %q claims seq %d after seq %d", e.EventID, e.Seq, last))
		case e.Seq > last+1:
			return fail(probGap, fmt.Errorf("seq %d follows seq %d", e.Seq, last))
		}
		if err := fn(m, &e); err != nil {
			return err
		}
		last, lastID = e.Seq, e.EventID
		return nil
	}
	tail, err := st.ReadSession(ctx, id, 0, check)
	if err != nil && !started && schema.CodeOf(err) == schema.CodeUnreadable {
		// The tail is not an event: walk the session from the leader.
		tail, err = logstore.Tail{}, nil
		for cur := uint64(0); ; {
			m, merr := st.NextAfter(ctx, id, cur)
			if merr != nil {
				return tail, merr
			}
			if m == nil {
				break
			}
			tail.StreamSeq = m.StreamSeq
			if err = check(m); err != nil {
				break
			}
			cur = m.StreamSeq
		}
		if errors.Is(err, logstore.ErrStop) {
			err = nil
		}
	}
	if err != nil {
		return tail, err
	}
	if bad != nil {
		return tail, bad
	}
	return tail, nil
}

// writeLine prints a stored body as one JSON line exactly as stored, only
// compacted if it has newlines.
func writeLine(w io.Writer, body []byte) error {
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

// problem is one finding of verify.
type problem struct {
	Session   string `json:"session"`
	Seq       uint64 `json:"seq,omitempty"`
	StreamSeq uint64 `json:"streamSeq,omitempty"`
	Kind      string `json:"kind"`
	Message   string `json:"message"`
}

func (p problem) String() string {
	return fmt.Sprintf("PROBLEM session=%s seq=%d stream_seq=%d kind=%s: %s", p.Session, p.Seq, p.StreamSeq, p.Kind, p.Message)
}

// Kinds of problems verify reports.
const (
	probGap         = "gap"
	probDuplicate   = "duplicate"
	probDuplicateID = "duplicate_id"
	probUnreadable  = "unreadable"
	probInvalid     = "invalid"
	probStructure   = "structure"
	probMismatch    = "mismatch"
	probRead        = "read"
)

// verifySession checks one session's stored events: each decodes (a newer
// schema or an unknown required type makes the session unreadable),
// validates as a stored event, names this session, has seq prev+1 (no gap,
// no duplicate), carries an event id no earlier event of the session has
// (an id is unique in its session for the session's whole life), and
// folds with pkg/session's rules (pairing, structure). Seq checks go on
// after a fold error, so every gap is reported.
func verifySession(ctx context.Context, st *logstore.Store, id string, expectEvents uint64) (n uint64, probs []problem) {
	state := session.New(id)
	folding := true
	var prev uint64
	ids := make(map[string]uint64) // event id -> the seq that first holds it
	add := func(seq, sseq uint64, kind, format string, args ...any) {
		probs = append(probs, problem{Session: id, Seq: seq, StreamSeq: sseq, Kind: kind, Message: fmt.Sprintf(format, args...)})
	}
	tail, err := st.ReadSession(ctx, id, 0, func(m *logstore.Msg) error {
		n++
		e, err := schema.Decode(m.Data)
		if err != nil {
			kind := probInvalid
			if errors.Is(err, schema.ErrNewerSchema) {
				kind = probUnreadable
			}
			hseq, _ := strconv.ParseUint(m.Header.Get(logstore.HeaderSeq), 10, 64)
			add(hseq, m.StreamSeq, kind, "does not decode: %v", err)
			if hseq > 0 {
				prev = hseq
			}
			folding = false
			return nil
		}
		seqStored := e.Seq <= prev // reported below as a seq stored again
		switch {
		case e.Seq == prev:
			add(e.Seq, m.StreamSeq, probDuplicate, "seq %d stored again (event %s)", e.Seq, e.EventID)
		case e.Seq < prev:
			add(e.Seq, m.StreamSeq, probDuplicate, "seq %d after seq %d", e.Seq, prev)
		case e.Seq > prev+1:
			add(e.Seq, m.StreamSeq, probGap, "seq %d follows seq %d: %d missing", e.Seq, prev, e.Seq-prev-1)
		}
		if e.Seq > prev {
			prev = e.Seq
		}
		if first, dup := ids[e.EventID]; dup && !seqStored {
			add(e.Seq, m.StreamSeq, probDuplicateID, "event id %s is stored again: first at seq %d", e.EventID, first)
		} else if !dup {
			ids[e.EventID] = e.Seq
		}
		if e.SessionID != id {
			add(e.Seq, m.StreamSeq, probMismatch, "event names session %q", e.SessionID)
		}
		if h := m.Header.Get(logstore.HeaderSeq); h != "" && h != strconv.FormatUint(e.Seq, 10) {
			add(e.Seq, m.StreamSeq, probMismatch, "header %s=%s, body seq %d", logstore.HeaderSeq, h, e.Seq)
		}
		if err := schema.Validate(&e, schema.ValidateOptions{Origin: schema.OriginService, MaxEventBytes: -1, Stored: true}); err != nil {
			kind := probInvalid
			if schema.CodeOf(err) == schema.CodeUnknownType {
				kind = probUnreadable
			}
			add(e.Seq, m.StreamSeq, kind, "%v", err)
			folding = false
			return nil
		}
		if !folding {
			return nil
		}
		if err := state.Apply(&e); err != nil {
			kind := probStructure
			if schema.CodeOf(err) == schema.CodeUnknownType {
				kind = probUnreadable
			}
			add(e.Seq, m.StreamSeq, kind, "%v", err)
			folding = false
		}
		return nil
	})
	if err != nil {
		add(0, 0, probRead, "%v", err)
		return n, probs
	}
	if expectEvents > 0 && n < expectEvents && tail.Exists() {
		add(0, tail.StreamSeq, probRead, "read %d events, the stream holds %d", n, expectEvents)
	}
	return n, probs
}

func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs, nf := sreFlags("verify", stderr)
	only := fs.String("session", "", "verify only this session")
	asJSON := fs.Bool("json", false, "print problems as JSON lines")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("verify takes no arguments (use --session)")
	}
	c, err := openSRE(ctx, "verify", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	defer func() { err = c.explain(err) }()
	ctx = c.ctx
	refs, err := listSessions(ctx, c.store)
	if err != nil {
		return err
	}
	if *only != "" {
		var keep []sessionRef
		for _, r := range refs {
			if r.ID == *only {
				keep = append(keep, r)
			}
		}
		if len(keep) == 0 {
			return fmt.Errorf("session %s: %w", *only, errNotFound)
		}
		refs = keep
	}
	var events uint64
	nprob := 0
	enc := json.NewEncoder(stdout)
	for _, r := range refs {
		n, probs := verifySession(ctx, c.store, r.ID, r.Events)
		events += n
		nprob += len(probs)
		for _, p := range probs {
			if *asJSON {
				_ = enc.Encode(p)
			} else {
				fmt.Fprintln(stdout, p.String())
			}
		}
	}
	summary := fmt.Sprintf("verified %d sessions, %d events: %d problems", len(refs), events, nprob)
	if *asJSON {
		_ = enc.Encode(map[string]any{"sessions": len(refs), "events": events, "problems": nprob})
	} else {
		fmt.Fprintln(stdout, summary)
	}
	if nprob > 0 {
		fmt.Fprintln(stderr, "sessionlog verify: "+summary)
		return errSilent
	}
	return nil
}

func runTail(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs, nf := sreFlags("tail", stderr)
	after := fs.Int64("after", -1, "with a session: also print its stored events with seq > N first (-1: only new ones)")
	noLive := fs.Bool("no-live", false, "do not print transient events (sessions.live.*)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var id string
	switch fs.NArg() {
	case 0:
	case 1:
		var err error
		if id, err = oneID(fs, "tail"); err != nil {
			return err
		}
	default:
		return usageErrorf("usage: sessionlog tail [<sessionId>] [flags]")
	}
	if *after >= 0 && id == "" {
		return usageErrorf("--after needs a session id")
	}
	c, err := openSRE(ctx, "tail", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	defer func() { err = c.explain(err) }()
	ctx = c.ctx
	ctx, cancel := signalContext(ctx)
	defer cancel()
	return tailEvents(ctx, c.store, id, *after, !*noLive, stdout)
}

// liveLine is how tail prints a transient event.
type liveLine struct {
	Transient bool            `json:"transient"`
	SessionID string          `json:"sessionId"`
	Event     json.RawMessage `json:"event"`
}

// tailEvents prints durable events (a follower per stream, from now or
// after a seq) and transient ones until ctx ends.
func tailEvents(ctx context.Context, st *logstore.Store, id string, after int64, live bool, stdout io.Writer) error {
	lines := make(chan []byte, 1024)
	var streams []string
	var subject string
	if id != "" {
		loc, err := logstore.Locate(id)
		if err != nil {
			return err
		}
		streams, subject = []string{loc.Stream}, loc.Subject
	} else {
		streams = logstore.Streams()
	}
	if live {
		sub, err := st.Live(id, 0, func(m logstore.LiveMsg) {
			ev := json.RawMessage(m.Data)
			if !json.Valid(m.Data) {
				ev, _ = json.Marshal(string(m.Data))
			}
			b, _ := json.Marshal(liveLine{Transient: true, SessionID: m.SessionID, Event: ev})
			select {
			case lines <- b:
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
				var found uint64
				tail, err := st.ReadSession(ctx, id, 0, func(m *logstore.Msg) error {
					if e, err := schema.Decode(m.Data); err == nil && e.Seq == uint64(after) {
						found = m.StreamSeq
						return logstore.ErrStop
					}
					return nil
				})
				if err != nil {
					return err
				}
				if found == 0 {
					found = tail.StreamSeq // fewer events than --after: only new ones
				}
				spec.StartAfter = found
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
				case lines <- m.Data:
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
		case b := <-lines:
			if err := writeLine(stdout, b); err != nil {
				return err
			}
		}
	}
}

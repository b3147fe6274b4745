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
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The SRE verbs: read-only tools (and import) against --nats-url. They
// never provision the stream: an SRE tool pointed at the wrong server must
// not create an empty SESSIONS there.

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
	"ls": defaultVerbTimeout, "show": defaultVerbTimeout, "tail": 0, "ship": 0,
}

// agentVerbs are the verbs an agent runs (as well as an operator): ship,
// import --from and export --to go through the agents' API (pkg/client).
// They take --inbox-prefix (addInboxFlag); so does fork.
var agentVerbs = map[string]bool{"ship": true, "import": true, "export": true}

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
	if agentVerbs[name] {
		nf.addInboxFlag(fs)
	}
	return fs, nf
}

// openSRE connects and opens the store without provisioning.
func openSRE(ctx context.Context, name string, fs *flag.FlagSet, nf *natsFlags, stderr io.Writer) (*sre, error) {
	v, err := nf.openVerb(ctx, name, fs, stderr)
	if err != nil {
		return nil, err
	}
	st, err := logstore.Open(v.ctx, v.nc, logstore.Config{NoProvision: true, Logger: v.log.With("component", "logstore")})
	if err != nil {
		err = verbError(v.ctx, err)
		v.close()
		return nil, fmt.Errorf("open log store at %s: %w", redactURL(nf.URL), err)
	}
	return &sre{store: st, log: v.log, ctx: v.ctx, close: v.close}, nil
}

// oneID parses a verb's single session id argument.
func oneID(fs *flag.FlagSet, verb string) (string, error) {
	if fs.NArg() != 1 {
		return "", usageErrorf("usage: sessionlog %s <sessionId> [flags]", verb)
	}
	id := fs.Arg(0)
	if err := logstore.ValidateSessionID(id); err != nil {
		return "", usageErrorf("%v", err)
	}
	return id, nil
}

// readProblem is why a session cannot be read past a stored message:
// kind is probUnreadable (logstore.Judge's verdict on the message, or an
// event the session's rules refuse) or probGap (the judge found seqs
// missing before it).
type readProblem struct {
	kind      string
	streamSeq uint64
	afterSeq  uint64
	err       error
}

func (p *readProblem) Error() string {
	var ue *logstore.UnreadableError
	if errors.As(p.err, &ue) {
		return ue.Error() // the judge's words, as every reader gives them
	}
	return fmt.Sprintf("at stream seq %d (after seq %d): %v", p.streamSeq, p.afterSeq, p.err)
}

func (p *readProblem) Unwrap() error { return p.err }

// readValid reads a session's stored messages in order, judged
// (logstore.ReadJudged), and calls fn with each event of it; a stored
// copy of the event before is skipped. It stops at the first unreadable
// message and returns a *readProblem naming it, after fn saw every event
// before it.
func readValid(ctx context.Context, st *logstore.Store, id string, fn func(m *logstore.Msg, e *schema.Envelope) error) (logstore.Tail, error) {
	j := logstore.Judge{SessionID: id}
	tail, err := st.ReadJudged(ctx, &j, fn)
	var ue *logstore.UnreadableError
	if errors.As(err, &ue) {
		kind := probUnreadable
		if ue.Kind == logstore.KindGap {
			kind = probGap
		}
		if !tail.Exists() {
			tail.StreamSeq = ue.StreamSeq
		}
		return tail, &readProblem{kind: kind, streamSeq: ue.StreamSeq, afterSeq: ue.AfterSeq, err: ue}
	}
	return tail, err
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

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natsconn"
)

// The SRE verbs: read-only tools (and import) against --nats-url. They
// never provision the stream: an SRE tool pointed at the wrong server must
// not create an empty SESSIONS there.

// sreConn is what a verb needs after its flags are parsed.
type sreConn struct {
	store *logstore.Store
	log   *slog.Logger
	// ctx is the verb's context, bounded by --timeout and by the
	// connection (natsconn.Config.VerbContext); explain turns the errors its end
	// causes into the reason.
	ctx   context.Context
	close func()
}

// explain wraps a verb's error: deferred as `defer func() { err = c.explain(err) }()`.
func (c *sreConn) explain(err error) error { return natsconn.VerbError(c.ctx, err) }

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
func openSRE(ctx context.Context, name string, fs *flag.FlagSet, nf *natsFlags, stderr io.Writer) (*sreConn, error) {
	v, err := nf.openVerb(ctx, name, fs, stderr)
	if err != nil {
		return nil, err
	}
	return nf.openStore(v)
}

// openStore opens the store without provisioning on a verb's connection;
// v is closed when it fails.
func (nf *natsFlags) openStore(v *verbConn) (*sreConn, error) {
	st, err := logstore.Open(v.ctx, v.nc, logstore.Config{NoProvision: true, Logger: v.log.With("component", "logstore")})
	if err != nil {
		err = natsconn.VerbError(v.ctx, err)
		v.close()
		return nil, fmt.Errorf("open log store at %s: %w", natsconn.RedactURL(nf.URL), err)
	}
	return &sreConn{store: st, log: v.log, ctx: v.ctx, close: v.close}, nil
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

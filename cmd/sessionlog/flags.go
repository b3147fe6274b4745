package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/bytesize"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natsconn"
	"github.com/sessionlog/sessionlog/internal/suggest"
)

// Defaults shared by several commands.
const (
	defaultNATSURL  = "nats://127.0.0.1:4222"
	defaultLogLevel = "info"
	envPrefix       = "SESSIONLOG_"
)

// newFlags returns the flag set of a subcommand. Every flag set gets
// --log-level; call newLogger after parseFlags to use it.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("sessionlog "+name, flag.ContinueOnError)
	fs.String("log-level", defaultLogLevel, "log level: debug, info, warn, error (JSON logs on stderr)")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage of %s:\n", fs.Name())
		fs.PrintDefaults()
		fmt.Fprintf(w, "\nEvery flag can also be set with %s<FLAG> (upper case, dashes as underscores).\n", envPrefix)
	}
	return fs
}

// envName is the environment variable of a flag: --nats-url = SESSIONLOG_NATS_URL.
func envName(flagName string) string {
	r := strings.NewReplacer("-", "_", ".", "_")
	return envPrefix + strings.ToUpper(r.Replace(flagName))
}

// parseFlags parses args, allowing flags after positional arguments
// (`show s-1 --nats-url ...`), then sets every flag not given on the
// command line from its SESSIONLOG_ environment variable. fs.Args() holds
// the positional arguments afterwards.
func parseFlags(fs *flag.FlagSet, args []string) error {
	return parseFlagsEnv(fs, args, os.LookupEnv)
}

func parseFlagsEnv(fs *flag.FlagSet, args []string, lookup func(string) (string, bool)) error {
	var positional []string
	rest := args
	// The flag package prints a bad flag's error and the whole usage
	// itself; Main prints the error once, with a hint, and only -h prints
	// the usage.
	out := fs.Output()
	fs.SetOutput(io.Discard)
	defer fs.SetOutput(out)
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(out)
				fs.Usage()
				return err
			}
			return &usageError{msg: flagHint(fs, err)}
		}
		rem := fs.Args()
		consumed := len(rest) - len(rem)
		if consumed > 0 && rest[consumed-1] == "--" {
			positional = append(positional, rem...)
			break
		}
		if len(rem) == 0 {
			break
		}
		positional = append(positional, rem[0])
		rest = rem[1:]
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		if v, ok := lookup(envName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", envName(f.Name), v, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return &usageError{msg: err.Error()}
	}
	// Leave exactly the positional arguments in fs.Args().
	return fs.Parse(append([]string{"--"}, positional...))
}

// flagGiven reports whether a flag was set on the command line or by its
// environment variable (after parseFlags).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			given = true
		}
	})
	return given
}

// newLogger returns the JSON logger on w at the flag set's --log-level.
func newLogger(fs *flag.FlagSet, w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	s := defaultLogLevel
	if f := fs.Lookup("log-level"); f != nil {
		s = f.Value.String()
	}
	if err := lvl.UnmarshalText([]byte(s)); err != nil {
		return nil, usageErrorf("--log-level %q: want debug, info, warn or error", s)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl, ReplaceAttr: readableDurations})), nil
}

// readableDurations writes a duration as Go prints it ("1.5s", "250ms"),
// not as the integer nanoseconds slog's JSON handler gives.
func readableDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// natsFlags are the flags of a connection to an existing NATS system.
type natsFlags struct {
	natsconn.Config
	// InboxPrefix is --inbox-prefix (addInboxFlag), "" when not given:
	// the prefix the user says its NATS user may receive replies on.
	InboxPrefix string
}

// addNATSFlags adds --nats-url, --nats-creds, --nats-user, --nats-password,
// --nats-ca, --nats-cert and --nats-key to fs.
func addNATSFlags(fs *flag.FlagSet) *natsFlags {
	n := &natsFlags{Config: natsconn.Config{Inbox: natsauth.OperatorInboxPrefix}}
	fs.StringVar(&n.URL, "nats-url", defaultNATSURL, "NATS server URL(s), comma separated")
	fs.StringVar(&n.Creds, "nats-creds", "", "NATS credentials file (JWT + nkey)")
	fs.StringVar(&n.User, "nats-user", "", "NATS user name")
	fs.StringVar(&n.Password, "nats-password", "", "NATS password")
	fs.StringVar(&n.CA, "nats-ca", "", "CA certificate file to verify the NATS servers")
	fs.StringVar(&n.Cert, "nats-cert", "", "client TLS certificate file")
	fs.StringVar(&n.Key, "nats-key", "", "client TLS key file")
	return n
}

// addInboxFlag adds --inbox-prefix to a verb an agent runs (ship,
// import, export, fork): an agent of a tenant other than the default may
// subscribe to its own inbox prefix alone (natsauth.InboxPrefix).
func (n *natsFlags) addInboxFlag(fs *flag.FlagSet) {
	fs.StringVar(&n.InboxPrefix, "inbox-prefix", "", "prefix of the subjects this connection receives replies on; an agent of a tenant may use only _INBOX.<its user> "+
		"(default: _INBOX.<--nats-user> for ship, import --from, export --to and fork when --nats-user is set, else "+natsauth.OperatorInboxPrefix+")")
}

// agentInbox sets the inbox prefix of a verb that goes through the
// agents' API (pkg/client): --inbox-prefix, else with
// --nats-user U the prefix U's agent user may subscribe to, _INBOX.U,
// which the default tenant's agent (_INBOX.>) and the operator (every
// subject, in the services' account where no agent is) may use as well;
// else, credentials that name no user here, the operators' prefix.
func (n *natsFlags) agentInbox() {
	if n.InboxPrefix == "" && n.User != "" && validInboxPrefix(natsauth.InboxPrefix(n.User)) {
		n.Inbox = natsauth.InboxPrefix(n.User)
	}
}

// givenInbox makes --inbox-prefix, when given, the connection's prefix.
func (n *natsFlags) givenInbox() error {
	if n.InboxPrefix == "" {
		return nil
	}
	if !validInboxPrefix(n.InboxPrefix) {
		return usageErrorf("--inbox-prefix %q: want subject tokens (letters, digits, '_', '-') separated by dots, no wildcard", n.InboxPrefix)
	}
	n.Inbox = n.InboxPrefix
	return nil
}

// validInboxPrefix: what nats.CustomInboxPrefix takes, in subject tokens
// of printable characters.
func validInboxPrefix(p string) bool {
	if p == "" || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, "..") {
		return false
	}
	return !strings.ContainsAny(p, "*> \t\r\n")
}

// connect dials --nats-url (natsconn.Config.Connect); a certificate
// without its key is a usage error.
func (n *natsFlags) connect(name string) (*nats.Conn, error) {
	nc, err := n.Connect(name)
	if errors.Is(err, natsconn.ErrCertKey) {
		return nil, &usageError{msg: err.Error()}
	}
	return nc, err
}

// Deadlines of the SRE verbs. A verb never waits on a dead server: it ends
// after its --timeout, and sooner when its connection has been down for
// natsconn.LostAfter.
const (
	defaultVerbTimeout = 2 * time.Minute
	// Verbs that read or write whole sessions or the whole stream.
	defaultBulkVerbTimeout = 30 * time.Minute
)

// addTimeoutFlag adds --timeout to a verb's flags.
func (n *natsFlags) addTimeoutFlag(fs *flag.FlagSet, def time.Duration) {
	help := "give up after this long with an error (0: never)"
	fs.DurationVar(&n.Timeout, "timeout", def, help)
}

// verbConn is what a verb that talks to NATS holds after its flags: its
// logger, its context (natsconn.Config.VerbContext) and its connection.
type verbConn struct {
	log *slog.Logger
	ctx context.Context
	nc  *nats.Conn
	// close closes the connection and ends the context.
	close func()
}

// openVerb makes the logger of --log-level, bounds the verb's context
// (natsconn.Config.VerbContext) and connects as "sessionlog-<verb>".
func (n *natsFlags) openVerb(ctx context.Context, verb string, fs *flag.FlagSet, stderr io.Writer) (*verbConn, error) {
	log, err := newLogger(fs, stderr)
	if err != nil {
		return nil, err
	}
	if err := n.givenInbox(); err != nil {
		return nil, err
	}
	n.Log = log
	ctx, cancel := n.VerbContext(ctx, verb)
	nc, err := n.connect("sessionlog-" + verb)
	if err != nil {
		cancel()
		return nil, err
	}
	// Closed through CloseVerb: a verb the server refused subjects names
	// every one it refused.
	return &verbConn{log: log, ctx: ctx, nc: nc, close: func() { n.CloseVerb(nc); cancel() }}, nil
}

// flagHint is a flag error with the nearest flag's name when the flag
// is unknown ("-jsn": did you mean --json?) and where the flags are listed.
func flagHint(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	const unknown = "flag provided but not defined: -"
	if name, ok := strings.CutPrefix(msg, unknown); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if near := suggest.Near(name, names, 2); len(near) > 0 {
			msg += " (did you mean --" + near[0] + "?)"
		}
	}
	return msg + "; \"" + fs.Name() + " -h\" lists the flags"
}

// bytesFlag binds a bytesize.Size flag and returns its value's address.
func bytesFlag(fs *flag.FlagSet, name string, def int64, usage string) *int64 {
	b := bytesize.Size(def)
	fs.Var(&b, name, usage)
	return (*int64)(&b)
}

// sealBodiesFlag is --seal-bodies (logstore.Config.SealBodies,
// docs/adr/011-sealed-bodies.md).
func sealBodiesFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("seal-bodies", false, "seal the bodies of the events this process writes with a key per session (SESSION_KEYS), so an erase destroys the key and purges the session at once; reads open sealed bodies either way")
}

// partitionsFlag is --partitions of up and every service command: the
// store's partition count (DESIGN.md section 11). A process started with
// another count than the store recorded refuses to start.
func partitionsFlag(fs *flag.FlagSet) *int {
	return fs.Int("partitions", 1, "session streams the store holds (recorded when first provisioned; another count than the store's refuses to start)")
}

func checkPartitions(p int) error {
	if p < 1 || p > logstore.MaxPartitions {
		return usageErrorf("--partitions %d: want 1 to %d", p, logstore.MaxPartitions)
	}
	return nil
}

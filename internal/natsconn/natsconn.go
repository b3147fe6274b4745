// Package natsconn is the sessionlog command's connection to an existing
// NATS system: the connection options (reconnect forever, a name for the
// server's monitoring, connection events logged), the bounds of a verb
// (its --timeout, and a connection lost for LostAfter or refused a
// subject ends it with the reason), the check that the connection's
// replies can reach it, and URLs with their passwords hidden for
// messages. Its messages name the command's flags (--timeout,
// --inbox-prefix) where they say what to change.
package natsconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/pkg/client"
)

// LostAfter is how long a verb's connection may stay down before the
// verb ends (VerbContext): nats.go would otherwise reconnect, and the
// verb wait, for ever.
const LostAfter = 10 * time.Second

// ErrCertKey: a client certificate without its key, or a key without
// its certificate.
var ErrCertKey = errors.New("--nats-cert and --nats-key go together")

// Config is a connection to an existing NATS system.
type Config struct {
	URL      string
	Creds    string
	User     string
	Password string
	CA       string
	Cert     string
	Key      string
	// Inbox is the prefix of the connection's reply subjects: the services'
	// or the operators' (deploy/nats/perms.go), never the agents' _INBOX,
	// which every agent may subscribe to.
	Inbox string
	// Timeout bounds a verb (VerbContext); 0: never.
	Timeout time.Duration
	// watch follows the connection for VerbContext.
	watch *watch
	// EndOnRefusal ends the verb's context (VerbContext) as soon as the
	// server refuses the connection something (a permissions violation):
	// a request to a subject the user may not publish to, or whose reply
	// it may not receive, is never answered and would wait out --timeout.
	EndOnRefusal bool
	// Log receives connection events.
	Log *slog.Logger
}

// CheckInbox stops a verb whose replies the server would not deliver
// (client.CheckInbox) with the prefix refused and the flag that sets it,
// instead of letting each request wait out its timeout.
func (c *Config) CheckInbox(ctx context.Context, nc *nats.Conn) error {
	// Not bounded by the verb's context, which the refusal it checks for
	// ends (EndOnRefusal): its flush would then race the refusal's
	// callback, and the check lose the subject it names.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), client.DefaultTimeout)
	defer cancel()
	err := client.CheckInbox(ctx, nc)
	if !errors.Is(err, client.ErrInboxRefused) {
		return err
	}
	who, want := "this NATS user", "_INBOX.<user>"
	if c.User != "" {
		who, want = "NATS user "+strconv.Quote(c.User), natsauth.InboxPrefix(c.User)
	}
	return fmt.Errorf("%w: permissions violation: %s may not subscribe to inbox prefix %q, so no reply could reach it; "+
		"an agent of a tenant receives replies only on %s: set --inbox-prefix (SESSIONLOG_INBOX_PREFIX)", client.ErrInboxRefused, who, c.Inbox, want)
}

// Options are the connection options of c: reconnect forever, a
// connection name for the server's monitoring, and logged connection events.
func (c *Config) Options(name string) ([]nats.Option, error) {
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("conn", name)
	// The watch of this connection's verb, whichever c holds when a
	// callback runs (a verb may connect again).
	w := c.watch
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		nats.ReconnectBufSize(64 << 20),
		// Callbacks run on nats.go's own goroutine, possibly after Close
		// returned: a connection we closed ourselves logs nothing, so no
		// write reaches stderr after the command is done.
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if !nc.IsClosed() {
				log.Warn("nats disconnected", "err", err)
				if c.watch != nil {
					c.watch.down(err)
				}
			}
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			if w != nil {
				w.closeOnce.Do(func() { close(w.closed) })
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
			if c.watch != nil {
				c.watch.up()
			}
		}),
		nats.ErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			if c.EndOnRefusal && w != nil && errors.Is(err, nats.ErrPermissionViolation) {
				// The verb ends with it (or, closed, has ended); each
				// refusal is named (CloseVerb waits for the last).
				w.refused(c.User, err)
				return
			}
			log.Error("nats async error", "subject", subj, "err", err)
		}),
	}
	if c.Inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(c.Inbox))
	}
	if c.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	if c.User != "" || c.Password != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.CA != "" {
		opts = append(opts, nats.RootCAs(c.CA))
	}
	if (c.Cert == "") != (c.Key == "") {
		return nil, ErrCertKey
	}
	if c.Cert != "" {
		opts = append(opts, nats.ClientCert(c.Cert, c.Key))
	}
	return opts, nil
}

// Connect dials c.URL. A server that is unreachable at start is an
// error (bad configuration fails at once); once connected, the connection
// reconnects forever.
func (c *Config) Connect(name string) (*nats.Conn, error) {
	opts, err := c.Options(name)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", RedactURL(c.URL), err)
	}
	return nc, nil
}

// RedactURL hides passwords in URLs for messages.
func RedactURL(u string) string {
	parts := strings.Split(u, ",")
	for i, p := range parts {
		if at := strings.LastIndex(p, "@"); at >= 0 {
			if s := strings.Index(p, "://"); s >= 0 && s < at {
				parts[i] = p[:s+3] + "***" + p[at:]
			}
		}
	}
	return strings.Join(parts, ",")
}

// VerbContext bounds a verb: the context ends after c.Timeout, or once
// the connection (opened after this call) has been down for LostAfter;
// its cause says which. Wrap the verb's error with VerbError.
func (c *Config) VerbContext(ctx context.Context, verb string) (context.Context, context.CancelFunc) {
	ctx, cancelCause := context.WithCancelCause(ctx)
	c.watch = &watch{after: LostAfter, url: RedactURL(c.URL), cancel: cancelCause, closed: make(chan struct{})}
	cancelT := context.CancelFunc(func() {})
	if c.Timeout > 0 {
		ctx, cancelT = context.WithTimeoutCause(ctx, c.Timeout,
			fmt.Errorf("%s: no result within %s (--timeout); is the NATS server at %s reachable and the service running?", verb, c.Timeout, RedactURL(c.URL)))
	}
	return ctx, func() { cancelT(); cancelCause(nil) }
}

// CloseVerb closes nc, the connection of the verb c bounds
// (VerbContext). When the server refused the verb a subject, it first
// lets every refusal of what the verb sent reach the verb's error: the
// server answers each refused publish or subscription before the PONG of
// a flush, and the connection's callbacks run in order, its closed
// callback last. Closing waits at most closeWait for that.
func (c *Config) CloseVerb(nc *nats.Conn) {
	w := c.watch
	if w == nil || !w.wasRefused() {
		nc.Close()
		return
	}
	if nc.IsConnected() {
		_ = nc.FlushTimeout(closeWait)
	}
	nc.Close()
	select {
	case <-w.closed:
	case <-time.After(closeWait):
	}
}

// closeWait bounds CloseVerb's flush and its wait for the callbacks.
const closeWait = 5 * time.Second

// VerbError replaces an error a verb got because its context ended with
// the reason the context ended (deadline, lost connection).
func VerbError(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) && !errors.Is(c, context.DeadlineExceeded) {
		return c
	}
	return err
}

// watch ends a verb's context when its connection stays down.
type watch struct {
	mu     sync.Mutex
	after  time.Duration
	url    string
	cancel context.CancelCauseFunc
	timer  *time.Timer
	// refusals are the server's refusals of subjects to the verb, each
	// once, in the order they came; user is the user they name.
	refusals []error
	user     string
	// closed is closed by the connection's closed callback.
	closed    chan struct{}
	closeOnce sync.Once
}

func (w *watch) down(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		return
	}
	w.timer = time.AfterFunc(w.after, func() {
		w.cancel(fmt.Errorf("lost the connection to NATS at %s for %s (%v)", w.url, w.after, err))
	})
}

// refused ends the verb at once with err, the server's refusal of a
// subject to user ("" for credentials that name none here), and records
// it: the verb's error (refusalError) names every refusal recorded.
func (w *watch) refused(user string, err error) {
	w.mu.Lock()
	first := len(w.refusals) == 0
	if !slices.ContainsFunc(w.refusals, func(e error) bool { return e.Error() == err.Error() }) {
		w.refusals = append(w.refusals, err)
	}
	if first {
		w.user = user
	}
	w.mu.Unlock()
	if first {
		w.cancel(&refusalError{w: w})
	}
}

func (w *watch) wasRefused() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.refusals) > 0
}

// refusalError is a verb ended by the server's refusal of subjects. Its
// text names every refusal recorded when it is read (CloseVerb lets
// those of what the verb sent arrive first).
type refusalError struct{ w *watch }

func (e *refusalError) Error() string {
	e.w.mu.Lock()
	defer e.w.mu.Unlock()
	who := "this NATS user"
	if e.w.user != "" {
		who = "NATS user " + strconv.Quote(e.w.user)
	}
	texts := make([]string, len(e.w.refusals))
	for i, r := range e.w.refusals {
		texts[i] = r.Error()
	}
	if len(texts) == 1 {
		return fmt.Sprintf("%s: %s may not use that subject, so what needs it gets no answer", texts[0], who)
	}
	return fmt.Sprintf("%s: %s may not use those %d subjects, so what needs them gets no answer", strings.Join(texts, "; "), who, len(texts))
}

// Unwrap is the first refusal (a nats.ErrPermissionViolation).
func (e *refusalError) Unwrap() error {
	e.w.mu.Lock()
	defer e.w.mu.Unlock()
	return e.w.refusals[0]
}

func (w *watch) up() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

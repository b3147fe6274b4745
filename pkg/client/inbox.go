package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// ErrInboxRefused: the NATS server refuses the connection's subscription
// to its own reply inbox, so no answer of the services can reach it.
// Requests sent anyway would be taken by the services and their answers
// lost: every append would end as an unknown outcome after its retries.
// The connection needs the inbox prefix its user may subscribe to
// (nats.CustomInboxPrefix): _INBOX.<user> for an agent of a tenant other
// than the default (docs/adr/010-tenants-and-ownership.md).
var ErrInboxRefused = errors.New("the NATS server refuses this connection's reply inbox")

// CheckInbox makes sure that nc may receive replies: it subscribes to a
// subject under nc's inbox prefix (nats.CustomInboxPrefix, "_INBOX" when
// not set) and waits for the server to have seen it. A refusal is an
// error matching ErrInboxRefused and nats.ErrPermissionViolation that
// names the prefix; call it once after connecting, before the first
// request, so that an agent with the wrong prefix stops at once with that
// error rather than after every request has waited its timeout.
func CheckInbox(ctx context.Context, nc *nats.Conn) error {
	subject := nc.NewRespInbox() + ".check"
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		return fmt.Errorf("check the reply inbox: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// The server answers a refused subscription with -ERR before the PONG
	// of the flush that follows it: once the flush returns, the refusal,
	// if any, is the connection's last error (it names the subject, which
	// is this call's own).
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("check the reply inbox: %w", err)
	}
	if err := nc.LastError(); err != nil && errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), subject) {
		prefix := nc.Opts.InboxPrefix
		if prefix == "" {
			prefix = strings.TrimSuffix(nats.InboxPrefix, ".")
		}
		return fmt.Errorf("%w (inbox prefix %q): connect with the prefix this user may subscribe to, nats.CustomInboxPrefix(\"_INBOX.<user>\") for an agent of a tenant: %w",
			ErrInboxRefused, prefix, err)
	}
	return nil
}

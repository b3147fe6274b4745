package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// An agent of a tenant (a NATS account of its own, ADR 010) keeps its
// session through the client on a connection with its inbox prefix,
// _INBOX.<user>: the session is stored under its tenant, as its own.
// With nats.go's default _INBOX the server refuses the inbox, and
// CheckInbox says so at once, naming the prefix; the default tenant's
// agent may use either.
func TestTenantAgentInbox(t *testing.T) {
	opts := natstest.Options(t.TempDir())
	svc, err := natsauth.Accounts(opts, append(natsauth.DefaultTenants(),
		natsauth.Tenant{Name: "acme", Users: []natsauth.TenantUser{{Name: "alice", Password: "pw-alice"}}}))
	if err != nil {
		t.Fatal(err)
	}
	opts.Users[0].Password = "pw-agent" // the default tenant's agent
	opts.Users = append(opts.Users, &server.User{Username: "service", Password: "pw-service", Account: svc, Permissions: natsauth.Service()})
	// dave: an agent of acme that a deployment denies the transcript API.
	dave := natsauth.AgentOf("acme", "dave")
	dave.Publish.Allow = slices.DeleteFunc(dave.Publish.Allow, func(s string) bool { return s == api.SubjectSourceAppend })
	dave.Subscribe.Allow = []string{natsauth.InboxPrefix("dave") + ".>"}
	opts.Users = append(opts.Users, &server.User{Username: "dave", Password: "pw-dave", Account: opts.Users[1].Account, Permissions: dave})
	s, err := natstest.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	sc := natstest.Connect(t, s, nats.UserInfo("service", "pw-service"), nats.CustomInboxPrefix(natsauth.ServiceInboxPrefix))
	st, err := logstore.Open(context.Background(), sc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	runWriter(t, st, sc)
	ctx := context.Background()

	alice := natstest.Connect(t, s, nats.UserInfo("alice", "pw-alice"), nats.CustomInboxPrefix(natsauth.InboxPrefix("alice")))
	if err := client.CheckInbox(ctx, alice); err != nil {
		t.Fatalf("alice with her inbox prefix: %v", err)
	}
	c := client.New(alice)
	sess, err := c.Create(ctx, "s-1", "vm-1:alice", schema.SessionCreated{Title: "alice's"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.UserMessage(ctx, []byte(`"hello"`)); err != nil {
		t.Fatal(err)
	}
	if got := storedEvents(t, st, "_Tacme_s-1"); len(got) != 2 {
		t.Fatalf("stored under _Tacme_s-1: %d events, want 2", len(got))
	}
	if got := storedEvents(t, st, "s-1"); len(got) != 0 {
		t.Fatalf("stored under s-1, outside the tenant: %d events", len(got))
	}
	if _, err := c.LoadState(ctx, "s-1"); err != nil {
		t.Fatalf("alice reads her session: %v", err)
	}

	// A subject the user may not publish: the server drops dave's
	// request; he is told forbidden, nothing delivered, and again at once
	// on the next request.
	cs := client.New(natstest.Connect(t, s, nats.UserInfo("dave", "pw-dave"), nats.CustomInboxPrefix(natsauth.InboxPrefix("dave"))), client.WithTimeout(time.Second))
	for i := range 2 {
		_, err := cs.SourceAppend(ctx, api.SourceAppendRequest{SourceKey: api.SourceKey{ProjectKey: "p", SessionKey: "s"}, Entries: []json.RawMessage{}})
		if !errors.Is(err, client.ErrForbidden) || !strings.Contains(err.Error(), "sessions.api.source.append") {
			t.Fatalf("dave's source append %d: %v", i, err)
		}
	}

	for _, tc := range []struct {
		name   string
		prefix string
	}{{"ErrDefaultInbox", ""}, {"ErrOperatorInbox", natsauth.OperatorInboxPrefix}, {"ErrAnotherUsersInbox", natsauth.InboxPrefix("bob")}} {
		t.Run(tc.name, func(t *testing.T) {
			o := []nats.Option{nats.UserInfo("alice", "pw-alice")}
			want := "_INBOX"
			if tc.prefix != "" {
				o, want = append(o, nats.CustomInboxPrefix(tc.prefix)), tc.prefix
			}
			nc := natstest.Connect(t, s, o...)
			err := client.CheckInbox(ctx, nc)
			if !errors.Is(err, client.ErrInboxRefused) || !errors.Is(err, nats.ErrPermissionViolation) {
				t.Fatalf("got %v, want ErrInboxRefused", err)
			}
			if !strings.Contains(err.Error(), `"`+want+`"`) {
				t.Fatalf("the error does not name the prefix %q: %v", want, err)
			}
		})
	}
	// The default tenant's agent subscribes to _INBOX.>: its own user's
	// prefix and nats.go's default both reach it; the operators' does not.
	if err := client.CheckInbox(ctx, natstest.Connect(t, s, nats.UserInfo("agent", "pw-agent"),
		nats.CustomInboxPrefix(natsauth.OperatorInboxPrefix))); !errors.Is(err, client.ErrInboxRefused) {
		t.Fatalf("the default tenant's agent on %s: %v", natsauth.OperatorInboxPrefix, err)
	}
	for i, o := range [][]nats.Option{nil, {nats.CustomInboxPrefix(natsauth.InboxPrefix("agent"))}} {
		nc := natstest.Connect(t, s, append(o, nats.UserInfo("agent", "pw-agent"))...)
		if err := client.CheckInbox(ctx, nc); err != nil {
			t.Fatalf("the default tenant's agent: %v", err)
		}
		if _, err := client.New(nc).Create(ctx, fmt.Sprintf("s-agent-%d", i), "h", schema.SessionCreated{}); err != nil {
			t.Fatal(err)
		}
	}
}

package natsconn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/client"
)

// runServer starts a server with one user, alice, who may publish to
// allowed.> and receive replies on _INBOX.alice.> only.
func runServer(t *testing.T) *server.Server {
	t.Helper()
	opts := natstest.Options(t.TempDir())
	opts.JetStream = false
	opts.Users = []*server.User{{
		Username: "alice", Password: "pw",
		Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{"allowed.>", "_INBOX.alice.>"}},
			Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.alice.>"}},
		},
	}}
	s, err := natstest.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// openVerb bounds a verb's context by c (VerbContext) and connects; both
// end with the test.
func openVerb(t *testing.T, c *Config, verb string) (context.Context, *nats.Conn) {
	t.Helper()
	ctx, cancel := c.VerbContext(context.Background(), verb)
	t.Cleanup(cancel)
	nc, err := c.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return ctx, nc
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                      "nats://127.0.0.1:4222",
		"nats://alice:secret@host:4222":              "nats://***@host:4222",
		"nats://a:b@h1:4222,tls://c:d@h2:4222,h3:42": "nats://***@h1:4222,tls://***@h2:4222,h3:42",
		"user@host": "user@host",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// A certificate without its key (or a key alone) is refused before any
// connection.
func TestCertWithoutKey(t *testing.T) {
	for _, c := range []Config{{Cert: "c.pem"}, {Key: "k.pem"}} {
		if _, err := c.Connect("x"); !errors.Is(err, ErrCertKey) {
			t.Errorf("%+v: got %v, want ErrCertKey", c, err)
		}
	}
}

// A verb past its --timeout says so, naming the server without its
// password; an error from before the end, or none, is kept.
func TestVerbErrorTimeout(t *testing.T) {
	c := Config{URL: "nats://alice:secret@127.0.0.1:1", Timeout: time.Nanosecond}
	ctx, cancel := c.VerbContext(context.Background(), "ls")
	defer cancel()
	early := errors.New("early")
	<-ctx.Done()
	err := VerbError(ctx, context.DeadlineExceeded)
	if want := "ls: no result within 1ns (--timeout); is the NATS server at nats://***@127.0.0.1:1 reachable"; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %q, want it to start with %q", err, want)
	}
	if err := VerbError(ctx, nil); err != nil {
		t.Fatalf("no error became %v", err)
	}
	live, stop := (&Config{}).VerbContext(context.Background(), "ls")
	defer stop()
	if err := VerbError(live, early); err != early {
		t.Fatalf("an error before the end became %v", err)
	}
}

// A verb whose server is gone ends once the connection has been down for
// LostAfter, with that reason.
func TestVerbConnectionLost(t *testing.T) {
	s := natstest.RunServer(t)
	c := Config{URL: s.ClientURL()}
	ctx, _ := openVerb(t, &c, "fork")
	s.Shutdown()
	<-ctx.Done()
	err := VerbError(ctx, context.Canceled)
	if want := "lost the connection to NATS at " + s.ClientURL() + " for 10s"; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %q, want it to start with %q", err, want)
	}
}

// With EndOnRefusal, the server's refusal of a subject ends the verb at
// once, naming the user (not at its --timeout, which ends it with
// another reason).
func TestRefusalEndsVerb(t *testing.T) {
	s := runServer(t)
	c := Config{URL: s.ClientURL(), User: "alice", Password: "pw", Inbox: "_INBOX.alice", EndOnRefusal: true, Timeout: time.Minute}
	ctx, nc := openVerb(t, &c, "import")
	if err := nc.Publish("allowed.x", nil); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("an allowed publish ended the verb: %v", context.Cause(ctx))
	}
	if err := nc.Publish("forbidden", nil); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	err := VerbError(ctx, context.Canceled)
	if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), `NATS user "alice" may not use that subject`) {
		t.Fatalf("got %v", err)
	}
}

// A verb the server refused several subjects names every one, though
// the first ended it: what it sent before it noticed (here, sent after
// the verb ended, just before it closes) is refused too, and CloseVerb
// lets those refusals reach its error before the connection closes.
func TestRefusalNamesEverySubject(t *testing.T) {
	s := runServer(t)
	c := Config{URL: s.ClientURL(), User: "alice", Password: "pw", Inbox: "_INBOX.alice", EndOnRefusal: true, Timeout: time.Minute}
	ctx, nc := openVerb(t, &c, "export")
	if err := nc.Publish("forbidden.a", nil); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	for _, subj := range []string{"forbidden.b", "forbidden.a"} {
		if err := nc.Publish(subj, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nc.SubscribeSync("not.mine"); err != nil {
		t.Fatal(err)
	}
	c.CloseVerb(nc)
	err := VerbError(ctx, context.Canceled)
	if !errors.Is(err, nats.ErrPermissionViolation) {
		t.Fatalf("got %v", err)
	}
	for _, want := range []string{`Publish to "forbidden.a"`, `Publish to "forbidden.b"`, `Subscription to "not.mine"`, `NATS user "alice" may not use those 3 subjects`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %s", err, want)
		}
	}
}

// CheckInbox names the prefix refused and the one the user may use.
func TestCheckInboxRefused(t *testing.T) {
	s := runServer(t)
	for _, tc := range []struct {
		inbox   string
		refused bool
	}{{"_INBOX.alice", false}, {"_SL_OP", true}} {
		c := Config{URL: s.ClientURL(), User: "alice", Password: "pw", Inbox: tc.inbox}
		nc, err := c.Connect("test")
		if err != nil {
			t.Fatal(err)
		}
		err = c.CheckInbox(context.Background(), nc)
		nc.Close()
		if !tc.refused {
			if err != nil {
				t.Fatalf("%s: %v", tc.inbox, err)
			}
			continue
		}
		want := `permissions violation: NATS user "alice" may not subscribe to inbox prefix "_SL_OP", so no reply could reach it; ` +
			"an agent of a tenant receives replies only on _INBOX.alice: set --inbox-prefix (SESSIONLOG_INBOX_PREFIX)"
		if !errors.Is(err, client.ErrInboxRefused) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: got %v, want ErrInboxRefused and %q", tc.inbox, err, want)
		}
	}
}

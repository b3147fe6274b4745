package writer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

// tenantEnv is a server with the deployment's accounts (natsauth.Accounts):
// the services' account, tenant acme (agent alice) and tenant globex
// (agent carol), whose requests reach the writers stamped by the server
// with their account and user, as in a deployment.
type tenantEnv struct {
	srv          *server.Server
	svc          *nats.Conn // the services' user
	admin        *nats.Conn // a user of the services' account with every right (an operator)
	st           *logstore.Store
	alice, carol *nats.Conn
}

func newTenantEnv(t *testing.T) *tenantEnv {
	t.Helper()
	opts := natstest.Options(t.TempDir())
	svc, err := natsauth.Accounts(opts, append(natsauth.DefaultTenants(),
		natsauth.Tenant{Name: "acme", Users: []natsauth.TenantUser{{Name: "alice", Password: "pw-alice"}}},
		natsauth.Tenant{Name: "globex", Users: []natsauth.TenantUser{{Name: "carol", Password: "pw-carol"}}}))
	if err != nil {
		t.Fatal(err)
	}
	opts.Users[0].Password = "pw-agent"
	opts.Users = append(opts.Users, &server.User{Username: "service", Password: "pw-service", Account: svc, Permissions: natsauth.Service()},
		&server.User{Username: "admin", Password: "pw-admin", Account: svc})
	s, err := natstest.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	e := &tenantEnv{srv: s}
	e.svc = natstest.Connect(t, s, nats.UserInfo("service", "pw-service"), nats.CustomInboxPrefix(natsauth.ServiceInboxPrefix))
	if e.st, err = logstore.Open(context.Background(), e.svc, logstore.Config{}); err != nil {
		t.Fatal(err)
	}
	e.admin = natstest.Connect(t, s, nats.UserInfo("admin", "pw-admin"))
	e.alice = natstest.Connect(t, s, nats.UserInfo("alice", "pw-alice"), nats.CustomInboxPrefix(natsauth.InboxPrefix("alice")))
	e.carol = natstest.Connect(t, s, nats.UserInfo("carol", "pw-carol"), nats.CustomInboxPrefix(natsauth.InboxPrefix("carol")))
	return e
}

// writer runs a writer of the services' user with cfg.
func (e *tenantEnv) writer(t *testing.T, cfg writer.Config) (*writer.Service, func()) {
	t.Helper()
	cfg.Store, cfg.Conn = e.st, e.svc
	if cfg.UsageFlush == 0 {
		cfg.UsageFlush = 20 * time.Millisecond
	}
	w, stop := runService(t, cfg)
	t.Cleanup(stop)
	return w, stop
}

// usageOf reads the tenant's usage in TENANT_USAGE.
func (e *tenantEnv) usageOf(t *testing.T, tenant string) logstore.TenantUsage {
	t.Helper()
	u, err := e.st.UsageOf(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func mustQuota(t *testing.T, r reply, bound string) {
	t.Helper()
	if r.err == nil || r.err.Code != schema.CodeQuotaExceeded || !strings.Contains(r.err.Message, bound) {
		t.Fatalf("got %s %+v, want quota_exceeded naming %s", r.code(), r.err, bound)
	}
}

func payload(n int) map[string]any {
	return ev(schema.TypeMessageUser, "data", map[string]any{"content": strings.Repeat("x", n)})
}

// A tenant's agents create at most TenantMaxSessions sessions: the next
// one is refused quota_exceeded (naming the bound and the count) and
// stores nothing, while another tenant still creates its own (up to a
// bound of its own, TenantBounds) and an operator is not held back.
// Appends to the sessions it has go on.
func TestTenantMaxSessions(t *testing.T) {
	e := newTenantEnv(t)
	reg := prometheus.NewRegistry()
	e.writer(t, writer.Config{TenantMaxSessions: 2, TenantBounds: map[string]logstore.TenantBound{"globex": {Sessions: 3}}, Registerer: reg})
	for i := range 2 {
		mustOK(t, e.alice, map[string]any{"sessionId": fmt.Sprintf("s-%d", i), "events": events(created())})
	}
	before := streamMsgs(t, e.admin)
	mustQuota(t, appendReq(t, e.alice, map[string]any{"sessionId": "s-2", "events": events(created())}), "has 2 sessions, its bound is 2")
	if got := streamMsgs(t, e.admin); got != before {
		t.Fatalf("the refused session stored %d messages", got-before)
	}
	if got := stored(t, e.st, "_Tacme_s-2"); len(got) != 0 {
		t.Fatalf("the refused session has %d events", len(got))
	}
	mustOK(t, e.alice, map[string]any{"sessionId": "s-1", "events": events(payload(10))})
	// globex has a bound of its own (--tenant-limit).
	for i := range 3 {
		mustOK(t, e.carol, map[string]any{"sessionId": fmt.Sprintf("s-%d", i), "events": events(created())})
	}
	mustQuota(t, appendReq(t, e.carol, map[string]any{"sessionId": "s-3", "events": events(created())}), "has 3 sessions, its bound is 3 (--tenant-limit globex)")
	// An operator creates a session of acme for one of its agents.
	mustOK(t, e.admin, map[string]any{"sessionId": "_Tacme_op", "events": events(ev(schema.TypeSessionCreated, "data", map[string]any{"owner": map[string]string{"tenant": "acme", "agent": "alice"}}))})
	// The refusal kept no count: acme has its two and the operator's.
	natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if got := e.usageOf(t, "acme").Sessions; got != 3 {
			return fmt.Errorf("acme's sessions in TENANT_USAGE: %d, want 3", got)
		}
		if got := counterSum(t, reg, "sessionlog_writer_tenant_sessions", "tenant", "globex"); got != 3 {
			return fmt.Errorf("globex's sessions metric: %v, want 3", got)
		}
		return nil
	})
}

// A tenant's agents store at most TenantMaxBytes: an append that would
// go past it is refused quota_exceeded and stores nothing; another
// tenant and an operator still append.
func TestTenantMaxBytes(t *testing.T) {
	e := newTenantEnv(t)
	reg := prometheus.NewRegistry()
	e.writer(t, writer.Config{TenantMaxBytes: 3000, Registerer: reg})
	mustOK(t, e.alice, map[string]any{"sessionId": "s", "events": events(created(), payload(1000))})
	mustOK(t, e.alice, map[string]any{"sessionId": "s", "events": events(payload(1000))})
	before := streamMsgs(t, e.admin)
	mustQuota(t, appendReq(t, e.alice, map[string]any{"sessionId": "s", "events": events(payload(1000))}), "its bound is 3000")
	if got := streamMsgs(t, e.admin); got != before {
		t.Fatalf("the refused append stored %d messages", got-before)
	}
	mustOK(t, e.carol, map[string]any{"sessionId": "s", "events": events(created(), payload(1000), payload(1000))})
	mustOK(t, e.admin, map[string]any{"sessionId": "_Tacme_s", "events": events(payload(1000))})
	var wantBytes int64
	if _, err := e.st.ReadSession(context.Background(), "_Tacme_s", 0, func(m *logstore.Msg) error {
		wantBytes += int64(len(m.Data))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if got := e.usageOf(t, "acme"); got != (logstore.TenantUsage{Sessions: 1, Bytes: wantBytes}) {
			return fmt.Errorf("acme's usage in TENANT_USAGE: %+v, want 1 session of %d bytes", got, wantBytes)
		}
		if got := counterSum(t, reg, "sessionlog_writer_tenant_bytes", "tenant", "acme"); got != float64(wantBytes) {
			return fmt.Errorf("acme's bytes metric: %v, want %d", got, wantBytes)
		}
		return nil
	})
}

// Two writers share one count: sessions created through either are
// counted once in TENANT_USAGE, and the bound refuses the next on
// either. The bytes one stored reach the other's judgement once flushed.
func TestTenantUsageSharedByWriters(t *testing.T) {
	e := newTenantEnv(t)
	cfg := writer.Config{TenantMaxSessions: 3, TenantMaxBytes: 4000}
	a, _ := e.writer(t, cfg)
	b, _ := e.writer(t, cfg)
	ctx := context.Background()
	alice := api.Caller{Tenant: "acme", Agent: "alice"}
	ws := []*writer.Service{a, b, a}
	for i, w := range ws {
		if _, err := w.AppendAs(ctx, alice, []byte(fmt.Sprintf(`{"sessionId":"s-%d","events":[{"type":"session/created","data":{"title":"t"}}]}`, i))); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	for _, w := range []*writer.Service{a, b} {
		_, err := w.AppendAs(ctx, alice, []byte(`{"sessionId":"s-3","events":[{"type":"session/created","data":{"title":"t"}}]}`))
		if schema.CodeOf(err) != schema.CodeQuotaExceeded {
			t.Fatalf("a fourth session: %v, want quota_exceeded", err)
		}
	}
	big := fmt.Sprintf(`{"sessionId":"s-0","events":[{"type":"message/user","data":{"content":%q}}]}`, strings.Repeat("x", 2500))
	if _, err := a.AppendAs(ctx, alice, []byte(big)); err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		_, err := b.AppendAs(ctx, alice, []byte(big))
		if schema.CodeOf(err) != schema.CodeQuotaExceeded {
			return fmt.Errorf("the second writer took %d bytes more: %v", 2500, err)
		}
		return nil
	})
	if got := e.usageOf(t, "acme").Sessions; got != 3 {
		t.Fatalf("acme's sessions: %d, want 3", got)
	}
}

// The usage outlives the writer: a writer stopped flushes what it
// counted, and the next one judges by it.
func TestTenantUsageSurvivesRestart(t *testing.T) {
	e := newTenantEnv(t)
	cfg := writer.Config{TenantMaxSessions: 1, TenantMaxBytes: 2000, UsageFlush: time.Hour}
	_, stop := e.writer(t, cfg)
	mustOK(t, e.alice, map[string]any{"sessionId": "s", "events": events(created(), payload(1000))})
	stop()
	if got := e.usageOf(t, "acme"); got.Sessions != 1 || got.Bytes < 1000 {
		t.Fatalf("acme's usage after the writer stopped: %+v", got)
	}
	e.writer(t, cfg)
	mustQuota(t, appendReq(t, e.alice, map[string]any{"sessionId": "s-2", "events": events(created())}), "--tenant-max-sessions")
	mustQuota(t, appendReq(t, e.alice, map[string]any{"sessionId": "s", "events": events(payload(600))}), "--tenant-max-bytes")
	mustOK(t, e.alice, map[string]any{"sessionId": "s", "events": events(payload(10))})
}

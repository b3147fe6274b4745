package writer_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

// The writer takes the requester the server named (ADR 010): the agent
// that creates a session owns it, under its tenant's stored id; another
// agent of the tenant is forbidden, another tenant's names its own
// session; an operator may do anything.
func TestOwners(t *testing.T) {
	e := newEnv(t, envOpts{writer: writer.Config{}})
	ctx := context.Background()
	alice := api.Caller{Tenant: "acme", Agent: "alice"}
	bob := api.Caller{Tenant: "acme", Agent: "bob"}
	carol := api.Caller{Tenant: "globex", Agent: "carol"}
	req := func(id string, evs ...map[string]any) []byte {
		b, err := json.Marshal(map[string]any{"sessionId": id, "events": evs})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	msg := ev("message/user", "data", map[string]any{"content": "x"})
	rep, err := e.w.AppendAs(ctx, alice, req("s-1", created()))
	if err != nil || rep.SessionID != "s-1" {
		t.Fatalf("alice creates s-1: %+v %v", rep, err)
	}
	evs := stored(t, e.st, "_Tacme_s-1")
	var d schema.SessionCreated
	if len(evs) != 1 || evs[0].Envelope.DecodeData(&d) != nil || d.Owner == nil || *d.Owner != *alice.Owner() {
		t.Fatalf("stored as _Tacme_s-1: %d events, owner %+v", len(evs), d.Owner)
	}
	if _, err := e.w.AppendAs(ctx, bob, req("s-1", msg)); schema.CodeOf(err) != schema.CodeForbidden {
		t.Fatalf("bob's append: %v, want forbidden", err)
	}
	hb, _ := json.Marshal(map[string]any{"sessionId": "s-1", "holder": "h-bob"})
	if _, err := e.w.HeartbeatAs(ctx, bob, hb); schema.CodeOf(err) != schema.CodeForbidden {
		t.Fatalf("bob's heartbeat: %v, want forbidden", err)
	}
	if r, err := e.w.HeartbeatAs(ctx, alice, hb); err != nil || r.SessionID != "s-1" {
		t.Fatalf("alice's heartbeat: %+v %v", r, err)
	}
	// Carol's s-1 is another session, hers.
	if _, err := e.w.AppendAs(ctx, carol, req("s-1", msg)); schema.CodeOf(err) != schema.CodeStructure {
		t.Fatalf("carol's append to her s-1, which does not exist: %v, want structure", err)
	}
	if _, err := e.w.AppendAs(ctx, carol, req("s-1", created())); err != nil {
		t.Fatalf("carol creates her s-1: %v", err)
	}
	// An owner named in the event that is not the requester.
	forged := ev(schema.TypeSessionCreated, "data", map[string]any{"owner": map[string]string{"tenant": "acme", "agent": "alice"}})
	if _, err := e.w.AppendAs(ctx, bob, req("s-2", forged)); schema.CodeOf(err) != schema.CodeForbidden {
		t.Fatalf("bob naming alice the owner: %v, want forbidden", err)
	}
	// The default tenant's agent may not name a tenant's stored id.
	legacy := api.Caller{Tenant: api.DefaultTenant, Agent: "agent"}
	if _, err := e.w.AppendAs(ctx, legacy, req("_Tacme_s-1", msg)); schema.CodeOf(err) != schema.CodeBadRequest {
		t.Fatalf("the default tenant's agent on _Tacme_s-1: %v, want bad_request", err)
	}
	// Grants: only the owner gives them.
	grant := ev(schema.TypeSessionGranted, "data", map[string]any{"grants": []string{"bob"}})
	if _, err := e.w.AppendAs(ctx, alice, req("s-1", grant)); err != nil {
		t.Fatalf("alice grants bob: %v", err)
	}
	if _, err := e.w.AppendAs(ctx, bob, req("s-1", msg)); err != nil {
		t.Fatalf("bob's append after the grant: %v", err)
	}
	regrant := ev(schema.TypeSessionGranted, "data", map[string]any{"grants": []string{"mallory"}})
	if _, err := e.w.AppendAs(ctx, bob, req("s-1", regrant)); schema.CodeOf(err) != schema.CodeForbidden {
		t.Fatalf("bob passing the grant on: %v, want forbidden", err)
	}
	// An operator names stored ids and may do anything.
	if _, err := e.w.Append(ctx, req("_Tacme_s-1", msg)); err != nil {
		t.Fatalf("the operator's append: %v", err)
	}
}

// An operator's session/created must name an owner of the tenant its
// stored id names (ADR 010): a session _T<T>_<id> without one would be the
// default tenant's, so none of T's agents could use it while it counts as
// T's. Each such request over sessions.api.append is refused bad_request
// and stores nothing; one naming an agent of the tenant creates the
// session, which that agent then uses as its own. A session of the
// default tenant needs no owner.
func TestOperatorNamesTheOwnerOfATenantsSession(t *testing.T) {
	e := newTenantEnv(t)
	e.writer(t, writer.Config{})
	owner := func(tenant, agent string) map[string]any {
		return ev(schema.TypeSessionCreated, "data", map[string]any{"title": "t", "owner": map[string]string{"tenant": tenant, "agent": agent}})
	}
	before := streamMsgs(t, e.admin)
	for _, c := range []struct {
		name, id string
		created  map[string]any
		says     string
	}{
		{"NoOwner", "_Tacme_op", created(), "must name its owner, an agent of acme"},
		{"AnotherTenantsOwner", "_Tacme_op", owner("globex", "carol"), "a session of globex is stored as _Tglobex_<id>"},
		{"DefaultTenantsOwner", "_Tacme_op", owner(api.DefaultTenant, "agent"), "not beginning with _T"},
		{"TenantOwnerOnADefaultID", "op", owner("acme", "alice"), "a session of acme is stored as _Tacme_<id>"},
		{"NoTenant", "_Tacme", created(), "no tenant's stored id"},
		{"DefaultTenantPrefix", "_TAGENTS_op", owner(api.DefaultTenant, "agent"), "no tenant's stored id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := appendReq(t, e.admin, map[string]any{"sessionId": c.id, "events": events(c.created, payload(10))})
			if r.err == nil || r.err.Code != schema.CodeBadRequest || !strings.Contains(r.err.Message, c.says) || r.err.Index == nil || *r.err.Index != 0 {
				t.Fatalf("got %s %+v, want bad_request of event 0 saying %q", r.code(), r.err, c.says)
			}
			if got := stored(t, e.st, c.id); len(got) != 0 {
				t.Fatalf("the refused session has %d events", len(got))
			}
		})
	}
	if got := streamMsgs(t, e.admin); got != before {
		t.Fatalf("the refused requests stored %d messages", got-before)
	}
	// Named, the session is alice's: she appends to it by her id, carol
	// of another tenant does not find hers.
	mustOK(t, e.admin, map[string]any{"sessionId": "_Tacme_op", "events": events(owner("acme", "alice"))})
	mustOK(t, e.alice, map[string]any{"sessionId": "op", "events": events(payload(10))})
	if r := appendReq(t, e.carol, map[string]any{"sessionId": "op", "events": events(payload(10))}); r.err == nil || r.err.Code != schema.CodeStructure {
		t.Fatalf("carol's op: %s %+v, want structure (hers does not exist)", r.code(), r.err)
	}
	// The default tenant's sessions: with no owner, or one of its agents.
	mustOK(t, e.admin, map[string]any{"sessionId": "plain-1", "events": events(created())})
	mustOK(t, e.admin, map[string]any{"sessionId": "plain-2", "events": events(owner(api.DefaultTenant, "agent"))})
}

// A hostile agent can neither make a session of another tenant nor take
// one without an owner: the id it names is put under its own tenant's
// prefix, the default tenant's agent may not name a _T id, and an
// ownerless _T<T>_<id> (stored before the writer refused an operator
// one) is the default tenant's, so not found for T's agents, whatever
// they send, a session/created with an owner included.
func TestHostileAgentTakesNoTenantsSession(t *testing.T) {
	e := newTenantEnv(t)
	e.writer(t, writer.Config{})
	ctx := context.Background()
	legacy := natstest.Connect(t, e.srv, nats.UserInfo("agent", "pw-agent"))
	mustOK(t, e.carol, map[string]any{"sessionId": "s", "events": events(created())})
	// alice names globex's stored id: she gets a session of her own.
	if rep := mustOK(t, e.alice, map[string]any{"sessionId": "_Tglobex_s", "events": events(created())}); rep.SessionID != "_Tglobex_s" {
		t.Fatalf("alice's reply names %s", rep.SessionID)
	}
	var d schema.SessionCreated
	if evs := stored(t, e.st, "_Tacme__Tglobex_s"); len(evs) != 1 || evs[0].Envelope.DecodeData(&d) != nil || d.Owner == nil || *d.Owner != (schema.Owner{Tenant: "acme", Agent: "alice"}) {
		t.Fatalf("alice's _Tglobex_s is not stored as acme's and hers: %d events, owner %+v", len(evs), d.Owner)
	}
	if n := len(stored(t, e.st, "_Tglobex_s")); n != 1 {
		t.Fatalf("carol's s has %d events, want her 1", n)
	}
	if r := appendReq(t, legacy, map[string]any{"sessionId": "_Tacme_new", "events": events(created())}); r.err == nil || r.err.Code != schema.CodeBadRequest {
		t.Fatalf("the default tenant's agent creating _Tacme_new: %s %+v, want bad_request", r.code(), r.err)
	}
	// An ownerless session of acme's id space, as an operator could make
	// one before.
	now := time.Now().UTC()
	if _, err := e.st.Append(ctx, logstore.AppendRequest{SessionID: "_Tacme_orphan", Events: []schema.Envelope{
		{SchemaVersion: 1, SessionID: "_Tacme_orphan", Seq: 1, EventID: "orphan-1", Time: now, Type: schema.TypeSessionCreated, Data: []byte(`{"title":"t"}`)},
	}}); err != nil {
		t.Fatal(err)
	}
	claim := ev(schema.TypeSessionCreated, "data", map[string]any{"owner": map[string]string{"tenant": "acme", "agent": "alice"}})
	grant := ev(schema.TypeSessionGranted, "data", map[string]any{"grants": []string{"alice"}})
	for _, evs := range [][]map[string]any{events(payload(10)), events(claim), events(grant)} {
		if r := appendReq(t, e.alice, map[string]any{"sessionId": "orphan", "events": evs}); r.err == nil || r.err.Code != schema.CodeNotFound {
			t.Fatalf("alice on the ownerless orphan (%v): %s %+v, want not_found", evs[0]["type"], r.code(), r.err)
		}
	}
	if r := appendReq(t, legacy, map[string]any{"sessionId": "_Tacme_orphan", "events": events(payload(10))}); r.err == nil || r.err.Code != schema.CodeBadRequest {
		t.Fatalf("the default tenant's agent on _Tacme_orphan: %s %+v, want bad_request", r.code(), r.err)
	}
	if n := len(stored(t, e.st, "_Tacme_orphan")); n != 1 {
		t.Fatalf("the orphan has %d events, want 1", n)
	}
	// An owner spelled twice, the second in another case, reads as one
	// owner in some readers and the other in others: refused.
	twice := ev(schema.TypeSessionCreated, "data", json.RawMessage(`{"owner":{"tenant":"acme","agent":"alice"},"Owner":{"tenant":"acme","agent":"bob"}}`))
	if r := appendReq(t, e.alice, map[string]any{"sessionId": "twice", "events": events(twice)}); r.err == nil || r.err.Code != schema.CodeInvalidEvent {
		t.Fatalf("an owner spelled twice: %s %+v, want invalid_event", r.code(), r.err)
	}
}

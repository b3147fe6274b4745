package writer_test

import (
	"context"
	"encoding/json"
	"testing"

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

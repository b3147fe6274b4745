package source_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// createAs creates session id (the wire id) as nc's agent, through the
// writer alone (no source append, no key recorded).
func createAs(nc *nats.Conn, id string) error {
	b, _ := json.Marshal(api.AppendRequest{SessionID: id, Events: []schema.Envelope{{Type: schema.TypeSessionCreated, Data: json.RawMessage(`{}`)}}})
	m, err := nc.Request(api.SubjectAppend, b, 20*time.Second)
	if err != nil {
		return err
	}
	if m.Header.Get(micro.ErrorCodeHeader) != "" {
		return errors.New(string(m.Data))
	}
	return nil
}

// noOwnerRecord fails unless the index holds no message at all of the
// stored session's owner record (the record, or a delete marker left in
// its place).
func noOwnerRecord(t *testing.T, e *tenantEnv, stored string) {
	t.Helper()
	js, err := jetstream.New(e.op)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "KV_"+logstore.SourceBucket)
	if err != nil {
		t.Fatal(err)
	}
	subject := "$KV." + logstore.SourceBucket + "." + logstore.SourceOwnerKey(stored)
	if m, err := st.GetLastMsgForSubject(ctx, subject); err == nil {
		t.Fatalf("%s: want no message, got seq %d %s", subject, m.Sequence, m.Data)
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatal(err)
	}
}

// TestSourceRefusedAppendLeavesNoRecord runs a source append of alice's
// whose session bob (an agent of her tenant) creates between the check
// that alice may use it and the record of her key (the service's
// AfterCheck hook, where bob's append to the writer lands), so that the
// writer refuses alice's append forbidden: with entries and without, the
// refused append leaves no message of the owner record it wrote, and bob
// then appends his transcript under his own project key and lists it.
// An owner record such a refusal left when its service stopped before
// the drop (written here as it would be, with alice's listing record) is
// found stale by bob's append, which drops both and records his key. An
// operator's append into acme's project creates no session (one without
// an owner would be the default tenant's, and none of acme's agents'),
// and still appends to a session of acme.
func TestSourceRefusedAppendLeavesNoRecord(t *testing.T) {
	e := newTenantEnv(t)
	const bobProject = "-home-bob-mill"
	bobKey := func(session string) api.SourceKey {
		k := srcKey(session, "")
		k.ProjectKey = bobProject
		return k
	}
	for _, c := range []struct {
		name, session, file string
	}{
		{"with entries", "44444444-4444-4444-8444-444444444444", sid1 + ".jsonl"},
		{"without entries", "55555555-5555-4555-8555-555555555555", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			stored := "_Tacme_cc-" + c.session
			var hookErr error
			e.src.AfterCheck(func() { hookErr = createAs(e.bob, "cc-"+c.session) })
			r := srcAppend(t, e.alice, srcKey(c.session, ""), c.file)
			e.src.AfterCheck(nil)
			if hookErr != nil {
				t.Fatalf("bob's create between the check and the record: %v", hookErr)
			}
			if r.code() != string(schema.CodeForbidden) {
				t.Fatalf("alice's append to the session bob created: %s %s", r.code(), r.raw)
			}
			noOwnerRecord(t, e, stored)
			if n := len(storedEvents(t, e.st, stored)); n != 1 {
				t.Fatalf("bob's session holds %d events, want his session/created alone", n)
			}
			mustOK(t, "bob's append under his key", srcAppend(t, e.bob, bobKey(c.session), ""))
			if got := listed(t, e.bob, bobProject); !slices.Contains(got, c.session) {
				t.Fatalf("bob lists %v, without %s", got, c.session)
			}
			if got := listed(t, e.alice, project); slices.Contains(got, c.session) {
				t.Fatalf("alice lists %v, with bob's %s", got, c.session)
			}
		})
	}

	t.Run("a record a stopped service left is stale", func(t *testing.T) {
		const session = "66666666-6666-4666-8666-666666666666"
		stored := "_Tacme_cc-" + session
		k := srcKey(session, "")
		k.ProjectKey = "_Tacme_" + project
		ctx := context.Background()
		b, _ := json.Marshal(map[string]any{"format": k.Format, "projectKey": k.ProjectKey, "sessionKey": k.SessionKey,
			"sessionId": stored, "writer": schema.Owner{Tenant: "acme", Agent: "alice"}})
		if err := e.st.SourceCreate(ctx, logstore.SourceOwnerKey(stored), b); err != nil {
			t.Fatal(err)
		}
		b, _ = json.Marshal(map[string]any{"format": k.Format, "projectKey": k.ProjectKey, "sessionKey": k.SessionKey,
			"sessionId": stored, "mtime": 1, "writer": schema.Owner{Tenant: "acme", Agent: "alice"}})
		if err := e.st.SourcePut(ctx, logstore.SourceListKey(k), b); err != nil {
			t.Fatal(err)
		}
		if err := createAs(e.bob, "cc-"+session); err != nil {
			t.Fatal(err)
		}
		mustOK(t, "bob's append under his key", srcAppend(t, e.bob, bobKey(session), ""))
		if got := listed(t, e.alice, project); slices.Contains(got, session) {
			t.Fatalf("alice lists %v, with bob's %s", got, session)
		}
		if _, ok, err := e.st.SourceGet(ctx, logstore.SourceListKey(k)); err != nil || ok {
			t.Fatalf("alice's listing record of bob's session: %v %v", ok, err)
		}
		if got := listed(t, e.bob, bobProject); !slices.Contains(got, session) {
			t.Fatalf("bob lists %v, without %s", got, session)
		}
		// alice, who may not use the session, is still refused it.
		if r := srcAppend(t, e.alice, srcKey(session, ""), ""); r.code() != string(schema.CodeForbidden) {
			t.Fatalf("alice's append to bob's session: %s %s", r.code(), r.raw)
		}
	})

	t.Run("an operator creates no tenant's session", func(t *testing.T) {
		const session = "77777777-7777-4777-8777-777777777777"
		k := srcKey(session, "")
		k.ProjectKey = "_Tacme_" + project
		if r := srcAppend(t, e.op, k, sid1+".jsonl"); r.code() != string(schema.CodeBadRequest) {
			t.Fatalf("operator's append creating acme's %s: %s %s", session, r.code(), r.raw)
		}
		if n := len(storedEvents(t, e.st, "_Tacme_cc-"+session)); n != 0 {
			t.Fatalf("the refused append stored %d events", n)
		}
		noOwnerRecord(t, e, "_Tacme_cc-"+session)
		// Into alice's transcript it appends.
		mustOK(t, "alice", srcAppend(t, e.alice, srcKey(session, ""), sid1+".jsonl"))
		mustOK(t, "operator", srcAppend(t, e.op, k, sid1+".jsonl"))
		if o := ownerOf(t, e.st, "_Tacme_cc-"+session); o == nil || *o != (schema.Owner{Tenant: "acme", Agent: "alice"}) {
			t.Fatalf("owner %+v", o)
		}
	})
}

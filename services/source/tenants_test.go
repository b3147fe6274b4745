package source_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/source"
	"github.com/sessionlog/sessionlog/services/writer"
)

// tenantEnv is a server with the deployment's accounts (natsauth.Accounts,
// the imports TenantAPI gives each tenant), the writer and the source
// service on the services' user, an operator of the services' account,
// the default tenant's agent, tenant acme's agents alice and bob, and
// tenant globex's agent carol: their requests reach the services stamped
// by the server with their account and user, as in a deployment.
type tenantEnv struct {
	srv                          *server.Server
	st                           *logstore.Store
	src                          *source.Service
	op, agent, alice, bob, carol *nats.Conn
}

func newTenantEnv(t testing.TB) *tenantEnv {
	t.Helper()
	opts := natstest.Options(t.TempDir())
	svc, err := natsauth.Accounts(opts, append(natsauth.DefaultTenants(),
		natsauth.Tenant{Name: "acme", Users: []natsauth.TenantUser{{Name: "alice", Password: "pw-alice"}, {Name: "bob", Password: "pw-bob"}}},
		natsauth.Tenant{Name: "globex", Users: []natsauth.TenantUser{{Name: "carol", Password: "pw-carol"}}}))
	if err != nil {
		t.Fatal(err)
	}
	opts.Users[0].Password = "pw-agent"
	opts.Users = append(opts.Users, &server.User{Username: "service", Password: "pw-service", Account: svc, Permissions: natsauth.Service()},
		&server.User{Username: "operator", Password: "pw-op", Account: svc, Permissions: natsauth.Operator()})
	s, err := natstest.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	e := &tenantEnv{srv: s}
	sc := natstest.Connect(t, s, nats.UserInfo("service", "pw-service"), nats.CustomInboxPrefix(natsauth.ServiceInboxPrefix))
	if e.st, err = logstore.Open(context.Background(), sc, logstore.Config{}); err != nil {
		t.Fatal(err)
	}
	w, err := writer.New(writer.Config{Store: e.st, Conn: sc})
	if err != nil {
		t.Fatal(err)
	}
	run(t, w.Run, w.Ready)
	src, err := source.New(source.Config{Store: e.st, Conn: sc})
	if err != nil {
		t.Fatal(err)
	}
	run(t, src.Run, src.Ready)
	e.src = src
	e.op = natstest.Connect(t, s, nats.UserInfo("operator", "pw-op"), nats.CustomInboxPrefix(natsauth.OperatorInboxPrefix))
	e.agent = natstest.Connect(t, s, nats.UserInfo("agent", "pw-agent"))
	for _, u := range []struct {
		name string
		nc   **nats.Conn
	}{{"alice", &e.alice}, {"bob", &e.bob}, {"carol", &e.carol}} {
		*u.nc = natstest.Connect(t, s, nats.UserInfo(u.name, "pw-"+u.name), nats.CustomInboxPrefix(natsauth.InboxPrefix(u.name)))
	}
	return e
}

const (
	project = "-home-ann-shop"
	sid3    = "33333333-3333-4333-8333-333333333333"
	subpath = "subagents/agent-a1b2c3d"
)

// srcKey is a claude-code key of project.
func srcKey(session, sub string) api.SourceKey {
	return api.SourceKey{Format: "claude-code", ProjectKey: project, SessionKey: session, Subpath: sub}
}

// srcAppend sends a source append of the file's lines (none for "").
func srcAppend(t *testing.T, nc *nats.Conn, k api.SourceKey, file string) reply {
	t.Helper()
	var entries []json.RawMessage
	if file != "" {
		entries = entriesOf(t, ccDir+file)
	}
	return request(t, nc, api.SubjectSourceAppend, api.SourceAppendRequest{SourceKey: k, Entries: entries})
}

func mustOK(t *testing.T, what string, r reply) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("%s: %+v", what, r.err)
	}
}

// listed is what nc's source.list of projectKey answers (one page).
func listed(t *testing.T, nc *nats.Conn, projectKey string) []string {
	t.Helper()
	r := request(t, nc, api.SubjectSourceList, api.SourceListRequest{Format: "claude-code", ProjectKey: projectKey})
	mustOK(t, "list", r)
	var rep api.SourceListReply
	if err := json.Unmarshal(r.raw, &rep); err != nil {
		t.Fatal(err)
	}
	keys := []string{}
	for _, s := range rep.Sessions {
		keys = append(keys, s.SessionKey)
	}
	slices.Sort(keys)
	return keys
}

// subkeysOf is what nc's source.subkeys of a session key answers.
func subkeysOf(t *testing.T, nc *nats.Conn, session string) []string {
	t.Helper()
	r := request(t, nc, api.SubjectSourceSubkeys, api.SourceSubkeysRequest{Format: "claude-code", ProjectKey: project, SessionKey: session})
	mustOK(t, "subkeys", r)
	var rep api.SourceSubkeysReply
	if err := json.Unmarshal(r.raw, &rep); err != nil {
		t.Fatal(err)
	}
	return rep.Subkeys
}

// loaded is nc's source.load of k: whether it was found and its entries,
// or the refusal's code.
func loaded(t *testing.T, nc *nats.Conn, k api.SourceKey) (code string, found bool, entries int) {
	t.Helper()
	r := request(t, nc, api.SubjectSourceLoad, api.SourceLoadRequest{SourceKey: k})
	if r.err != nil {
		return r.code(), false, 0
	}
	var rep api.SourceLoadReply
	if err := json.Unmarshal(r.raw, &rep); err != nil {
		t.Fatal(err)
	}
	return "ok", rep.Found, len(rep.Entries)
}

// ownerOf is the owner the stored session's session/created records.
func ownerOf(t *testing.T, st *logstore.Store, stored string) *schema.Owner {
	t.Helper()
	evs := storedEvents(t, st, stored)
	if len(evs) == 0 {
		t.Fatalf("%s: no events", stored)
	}
	var d schema.SessionCreated
	if err := json.Unmarshal(evs[0].Data, &d); err != nil {
		t.Fatal(err)
	}
	return d.Owner
}

// storedEvents is the session's stored events (none for a session that
// does not exist).
func storedEvents(t *testing.T, st *logstore.Store, stored string) []logstore.Event {
	t.Helper()
	evs, _, err := st.ReadEvents(context.Background(), stored, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestSourceTenants runs the source endpoints as agents under the
// deployment's accounts: each tenant's transcripts are its own (the same
// key in two tenants is two sessions, each listed, loaded and appended by
// its tenant alone), an agent lists, loads and appends its own transcripts
// and those granted to it but not another agent's of its tenant
// (forbidden, not listed, nothing stored), the default tenant keeps its
// ids and cannot name a tenant's project key, and an operator sees every
// tenant's through its stored project key.
func TestSourceTenants(t *testing.T) {
	e := newTenantEnv(t)
	const acme1, acme2 = "_Tacme_cc-" + sid1, "_Tacme_cc-" + sid2

	// alice writes two transcripts and a subagent's; carol (globex) and
	// the default tenant's agent write the same first key.
	mustOK(t, "alice sid1", srcAppend(t, e.alice, srcKey(sid1, ""), sid1+".jsonl"))
	mustOK(t, "alice sid2", srcAppend(t, e.alice, srcKey(sid2, ""), sid2+".jsonl"))
	r := srcAppend(t, e.alice, srcKey(sid2, subpath), sid2+"/"+subpath+".jsonl")
	mustOK(t, "alice sub", r)
	var subRep api.SourceAppendReply
	if err := json.Unmarshal(r.raw, &subRep); err != nil {
		t.Fatal(err)
	}
	mustOK(t, "carol sid1", srcAppend(t, e.carol, srcKey(sid1, ""), sid1+".jsonl"))
	mustOK(t, "agent sid1", srcAppend(t, e.agent, srcKey(sid1, ""), sid1+".jsonl"))
	aliceSeq := len(storedEvents(t, e.st, acme1))
	for _, c := range []struct {
		stored string
		owner  schema.Owner
	}{{acme1, schema.Owner{Tenant: "acme", Agent: "alice"}}, {acme2, schema.Owner{Tenant: "acme", Agent: "alice"}},
		{"_Tacme_" + subRep.SessionID, schema.Owner{Tenant: "acme", Agent: "alice"}},
		{"_Tglobex_cc-" + sid1, schema.Owner{Tenant: "globex", Agent: "carol"}}, {"cc-" + sid1, schema.Owner{Tenant: natsauth.DefaultTenant, Agent: "agent"}}} {
		if o := ownerOf(t, e.st, c.stored); o == nil || *o != c.owner {
			t.Fatalf("%s: owner %+v, want %+v", c.stored, o, c.owner)
		}
	}

	t.Run("each agent lists its own", func(t *testing.T) {
		for _, c := range []struct {
			who  string
			nc   *nats.Conn
			want []string
		}{{"alice", e.alice, []string{sid1, sid2}}, {"bob", e.bob, []string{}}, {"carol", e.carol, []string{sid1}}, {"agent", e.agent, []string{sid1}}} {
			if got := listed(t, c.nc, project); !slices.Equal(got, c.want) {
				t.Errorf("%s lists %v, want %v", c.who, got, c.want)
			}
		}
		if got := subkeysOf(t, e.alice, sid2); !slices.Equal(got, []string{subpath}) {
			t.Errorf("alice's subkeys of %s: %v", sid2, got)
		}
		for _, nc := range []*nats.Conn{e.bob, e.carol, e.agent} {
			if got := subkeysOf(t, nc, sid2); len(got) != 0 {
				t.Errorf("another agent's subkeys of %s: %v", sid2, got)
			}
		}
	})
	t.Run("loads", func(t *testing.T) {
		if code, found, n := loaded(t, e.alice, srcKey(sid2, subpath)); code != "ok" || !found || n == 0 {
			t.Fatalf("alice loads her subagent: %s %v %d", code, found, n)
		}
		// Another tenant's key is its own, never written.
		if code, found, _ := loaded(t, e.carol, srcKey(sid2, "")); code != "ok" || found {
			t.Fatalf("carol loads acme's %s: %s found=%v", sid2, code, found)
		}
		// Another agent's of the tenant is refused.
		for _, k := range []api.SourceKey{srcKey(sid1, ""), srcKey(sid2, ""), srcKey(sid2, subpath)} {
			if code, found, n := loaded(t, e.bob, k); code != string(schema.CodeForbidden) || found || n != 0 {
				t.Fatalf("bob loads alice's %+v: %s found=%v %d entries", k, code, found, n)
			}
		}
	})
	t.Run("appends to another agent's are forbidden", func(t *testing.T) {
		for _, c := range []struct {
			k    api.SourceKey
			file string
		}{{srcKey(sid1, ""), sid1 + ".jsonl"}, {srcKey(sid1, ""), ""}, {srcKey(sid2, ""), sid2 + ".jsonl"},
			{api.SourceKey{Format: "claude-code", ProjectKey: "-home-bob-mill", SessionKey: sid1}, sid1 + ".jsonl"}} {
			if r := srcAppend(t, e.bob, c.k, c.file); r.code() != string(schema.CodeForbidden) {
				t.Fatalf("bob appends to alice's %+v: %s %s", c.k, r.code(), r.raw)
			}
		}
		if n := len(storedEvents(t, e.st, acme1)); n != aliceSeq {
			t.Fatalf("alice's session has %d events after bob's appends, want %d", n, aliceSeq)
		}
		// bob's own transcript in the same project is his alone.
		mustOK(t, "bob sid3", srcAppend(t, e.bob, srcKey(sid3, ""), sid1+".jsonl"))
		if got := listed(t, e.bob, project); !slices.Equal(got, []string{sid3}) {
			t.Fatalf("bob lists %v", got)
		}
		if got := listed(t, e.alice, project); !slices.Equal(got, []string{sid1, sid2}) {
			t.Fatalf("alice lists %v", got)
		}
		// alice's transcript still takes her appends (bob's refusals
		// recorded no key for it).
		mustOK(t, "alice again", srcAppend(t, e.alice, srcKey(sid1, ""), ""))
	})
	t.Run("a grant shows it", func(t *testing.T) {
		mustOK(t, "grant", request(t, e.alice, api.SubjectAppend, api.AppendRequest{SessionID: "cc-" + sid1,
			Events: []schema.Envelope{{Type: schema.TypeSessionGranted, Data: json.RawMessage(`{"grants":["bob"]}`)}}}))
		if got := listed(t, e.bob, project); !slices.Equal(got, []string{sid1, sid3}) {
			t.Fatalf("bob lists %v after alice's grant", got)
		}
		if code, found, n := loaded(t, e.bob, srcKey(sid1, "")); code != "ok" || !found || n == 0 {
			t.Fatalf("bob loads the granted %s: %s %v %d", sid1, code, found, n)
		}
	})
	t.Run("the default tenant names no tenant's project", func(t *testing.T) {
		k := api.SourceKey{Format: "claude-code", ProjectKey: "_Tacme_" + project, SessionKey: sid1}
		for _, r := range []reply{
			request(t, e.agent, api.SubjectSourceList, api.SourceListRequest{Format: "claude-code", ProjectKey: k.ProjectKey}),
			request(t, e.agent, api.SubjectSourceSubkeys, api.SourceSubkeysRequest{Format: "claude-code", ProjectKey: k.ProjectKey, SessionKey: sid2}),
			request(t, e.agent, api.SubjectSourceLoad, api.SourceLoadRequest{SourceKey: k}),
			srcAppend(t, e.agent, k, ""),
		} {
			if r.code() != string(schema.CodeBadRequest) {
				t.Fatalf("the default agent names acme's project: %s %s", r.code(), r.raw)
			}
		}
	})
	t.Run("an operator sees every tenant's", func(t *testing.T) {
		if got := listed(t, e.op, project); !slices.Equal(got, []string{sid1}) {
			t.Fatalf("operator lists the default tenant's %v", got)
		}
		if got := listed(t, e.op, "_Tacme_"+project); !slices.Equal(got, []string{sid1, sid2, sid3}) {
			t.Fatalf("operator lists acme's %v", got)
		}
		k := srcKey(sid2, "")
		k.ProjectKey = "_Tacme_" + project
		if code, found, n := loaded(t, e.op, k); code != "ok" || !found || n == 0 {
			t.Fatalf("operator loads acme's %s: %s %v %d", sid2, code, found, n)
		}
	})
	t.Run("an erase drops a tenant's keys", func(t *testing.T) {
		// The eraser's drop of the session's records (on the operator's
		// connection: the services' user deletes nothing) finds the
		// listing record from the owner record, under acme's project key.
		st, err := logstore.Open(context.Background(), e.op, logstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.DropSessionRecords(context.Background(), "_Tacme_cc-"+sid3); err != nil {
			t.Fatal(err)
		}
		if got := listed(t, e.op, "_Tacme_"+project); !slices.Equal(got, []string{sid1, sid2}) {
			t.Fatalf("operator lists acme's %v after the drop of bob's", got)
		}
	})
}

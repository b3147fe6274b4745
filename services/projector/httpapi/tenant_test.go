package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/httpauth"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// tenantGet is GET path of r (a whole projector, projectortest.Running,
// or the HTTP side alone, projectortest.Served) with token in the
// Authorization header (none: ""); a watch is read up to its status and
// first bytes only.
func tenantGet(t *testing.T, r interface{ URL() string }, token, path string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.Contains(path, "/watch") && resp.StatusCode == 200 {
		return resp.StatusCode, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTenantTokens: a tenant's token sees its own sessions alone on every
// read (detail, events, context, export, ACP replay, tree, watch, list,
// search, audit); another tenant's session answers exactly as a missing
// one, even an erased one; the overview and actions are refused; the
// token counts only in the Authorization header. The operator's token
// sees everything.
func TestTenantTokens(t *testing.T) {
	e, r := startTenants(t)
	createTenantSessions(t, e, r, op, [][2]string{
		{"plain-1", `{"title":"zebra plain"}`},
		{"_Tacme_s1", `{"title":"zebra acme"}`},
		{"_Tacme_s2", `{"title":"zebra acme child","parent":{"sessionId":"_Tacme_s1","seedLength":1,"depth":1}}`},
		{"_Tbeta_s1", `{"title":"zebra beta"}`},
		// An operator may fork across tenants: the child is beta's.
		{"_Tbeta_x", `{"title":"zebra beta fork","parent":{"sessionId":"_Tacme_s1","seedLength":1,"depth":1}}`},
		{"_Tbeta_gone", `{"title":"gone"}`},
	})
	all := []string{"_Tacme_s1", "_Tacme_s2", "_Tbeta_s1", "_Tbeta_x", "plain-1"}
	eraseTenantSession(t, e, r, op, "_Tbeta_gone")

	for _, c := range []struct {
		name, token, prefix string
		own                 []string
		children            []string // of _Tacme_s1, as the token sees them
		audit               []string
	}{
		{"operator", op, "", all, []string{"_Tacme_s2", "_Tbeta_x"}, []string{"_Tbeta_gone"}},
		{"acme", acme, "_Tacme_", []string{"_Tacme_s1", "_Tacme_s2"}, []string{"s2"}, []string{}},
		{"beta", beta, "_Tbeta_", []string{"_Tbeta_s1", "_Tbeta_x"}, nil, []string{"gone"}},
		{"AGENTS", agents, "", []string{"plain-1"}, nil, []string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := func(id string) string { return wireName(c.prefix, id) }
			checkSees(t, r, c.token, c.prefix, all, c.own, c.audit)
			if slices.Contains(c.own, "_Tacme_s1") {
				var d httpapi.Detail
				_, body := tenantGet(t, r, c.token, "/v1/sessions/"+name("_Tacme_s1"))
				json.Unmarshal([]byte(body), &d)
				if !slices.Equal(d.Children, c.children) {
					t.Errorf("children %v, want %v", d.Children, c.children)
				}
				var tr httpapi.Tree
				_, body = tenantGet(t, r, c.token, "/v1/sessions/"+name("_Tacme_s1")+"/tree")
				json.Unmarshal([]byte(body), &tr)
				var desc []string
				for _, n := range tr.Descendants {
					desc = append(desc, n.SessionID)
				}
				if !slices.Equal(desc, c.children) {
					t.Errorf("tree %v, want %v", desc, c.children)
				}
			}
			if slices.Contains(c.own, "_Tbeta_x") {
				var tr httpapi.Tree
				_, body := tenantGet(t, r, c.token, "/v1/sessions/"+name("_Tbeta_x")+"/tree")
				json.Unmarshal([]byte(body), &tr)
				if len(tr.Ancestors) != 1 && c.token == op || len(tr.Ancestors) != 0 && c.token != op {
					t.Errorf("ancestors of _Tbeta_x: %+v", tr.Ancestors)
				}
			}
			// The erased session is its tenant's news only, however its
			// path is spelled: to another it answers as a missing one.
			for _, sub := range []string{"", "%2Fevents"} {
				p := "/v1/sessions/" + name("_Tbeta_gone") + sub
				code, body := tenantGet(t, r, c.token, p)
				if c.token == op || c.token == beta {
					if code != 404 || !strings.Contains(body, `"erased"`) {
						t.Errorf("GET %s: %d %s", p, code, body)
					}
					continue
				}
				if sub != "" {
					// An id with a slash is none: refused, not erased.
					if code/100 != 4 || strings.Contains(body, `"erased"`) {
						t.Errorf("GET %s: %d %s", p, code, body)
					}
					continue
				}
				mcode, mbody := tenantGet(t, r, c.token, "/v1/sessions/missing")
				if code != mcode || body != strings.ReplaceAll(mbody, "missing", "_Tbeta_gone") {
					t.Errorf("GET %s: %d %s, want what a missing session answers: %d %s", p, code, body, mcode, mbody)
				}
			}
			if c.token == op {
				return
			}
			if code, body := tenantGet(t, r, c.token, "/v1/overview"); code != 403 || !strings.Contains(body, `"forbidden"`) {
				t.Errorf("overview: %d %s", code, body)
			}
			for _, id := range c.own {
				req, _ := http.NewRequest(http.MethodPost, r.Srv.URL+"/v1/sessions/"+name(id)+"/erase", strings.NewReader(`{"reason":"r"}`))
				req.Header.Set("Authorization", "Bearer "+c.token)
				req.Header.Set(httpauth.ActionHeader, "1")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 403 || !strings.Contains(string(b), `"forbidden"`) {
					t.Errorf("erase %s: %d %s", id, resp.StatusCode, b)
				}
			}
			// A tenant's token counts in the Authorization header alone.
			for _, q := range []string{"access_token", "token"} {
				if code, _ := tenantGet(t, r, "", "/v1/sessions?"+q+"="+c.token); code != 401 {
					t.Errorf("the token as the query parameter %s: %d", q, code)
				}
			}
		})
	}
}

// The tokens of startTenants: the operator's, tenants acme's and beta's,
// the default tenant's.
const op, acme, beta, agents = "operator-token-0123456789", "acme-token-0123456789", "beta-token-0123456789", "agents-token-0123456789"

// startTenants starts a projector with the tokens above.
func startTenants(t *testing.T) (*projectortest.Env, *projectortest.Running) {
	t.Helper()
	return startTokens(t, map[string]string{acme: "acme", beta: "beta", agents: "AGENTS"})
}

// startTokens starts a projector with the operator's token op and the
// tenants' tokens (token: tenant[:agents]).
func startTokens(t *testing.T, tenants map[string]string) (*projectortest.Env, *projectortest.Running) {
	t.Helper()
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir(), func(c *projector.Config) {
		c.HTTPToken = op
		c.TenantTokens = tenants
	})
	r.WaitReady(t)
	return e, r
}

// createTenantSessions stores the sessions (id, session/created data; with
// a parent, as a fork's child), each with a turn that feeds the zebra, and
// waits until the projector serves them all to the operator's token op.
func createTenantSessions(t *testing.T, e *projectortest.Env, r *projectortest.Running, op string, sessions [][2]string) map[string]*script {
	t.Helper()
	scripts := map[string]*script{}
	for _, c := range sessions {
		id, data := c[0], c[1]
		s := newScript(t, e, id)
		scripts[id] = s
		if strings.Contains(data, "parent") {
			s.add(schema.TypeSessionCreated, data, synthetic)
			s.add(schema.TypeForkCommitted, `{"seedLength":1}`, synthetic)
		} else {
			s.add(schema.TypeSessionCreated, data)
		}
		s.add(schema.TypeTurnStarted, `{}`, inTurn("t1"))
		s.add(schema.TypeMessageUser, `{"content":[{"type":"text","text":"feed the zebra"}]}`, inTurn("t1"))
	}
	for id, s := range scripts {
		waitDetailToken(t, r, op, id, func(d httpapi.Detail) bool { return d.LastSeq == s.seq })
	}
	return scripts
}

// eraseTenantSession erases id and waits until the projector no longer
// serves it to the operator's token op.
func eraseTenantSession(t *testing.T, e *projectortest.Env, r *projectortest.Running, op, id string) {
	t.Helper()
	e.Erase(id)
	waitFor(t, func() bool {
		code, _ := tenantGet(t, r, op, "/v1/sessions/"+id)
		return code == 404
	})
}

// wireName is the name of the session stored as id for a token of the
// tenant whose stored ids begin with prefix ("": the operator's, the
// default tenant's).
func wireName(prefix, id string) string {
	if w, ok := strings.CutPrefix(id, prefix); ok && prefix != "" {
		return w
	}
	return id
}

// checkSees checks what token sees of the sessions all (stored ids): those
// of own on every read (detail, events, context, export, ACP replay,
// tree, watch, list, by pages too, search), each by the name the token
// gives it (wireName of prefix) and named so in lists and search; any
// other, typed as stored, answers byte for byte as a missing session, and
// is no cursor of the list; the audit holds the erased sessions audit (as
// the token names them).
func checkSees(t *testing.T, r *projectortest.Running, token, prefix string, all, own, audit []string) {
	t.Helper()
	const missing = "missing"
	stored := own
	own = nil
	for _, id := range stored {
		own = append(own, wireName(prefix, id))
	}
	slices.Sort(own)
	paths := []string{"", "/events", "/context", "/export", "/acp", "/tree", "/watch"}
	ids := func(path string, pick func([]byte) []string) []string {
		t.Helper()
		code, body := tenantGet(t, r, token, path)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		got := pick([]byte(body))
		slices.Sort(got)
		return got
	}
	list := ids("/v1/sessions", func(b []byte) (out []string) {
		var l httpapi.List
		json.Unmarshal(b, &l)
		for _, s := range l.Sessions {
			out = append(out, s.SessionID)
		}
		return out
	})
	if !slices.Equal(list, own) {
		t.Errorf("list %v, want %v", list, own)
	}
	// Paged one session at a time, the list holds the same.
	var paged []string
	for after, n := "", 0; n <= len(all); n++ {
		var l httpapi.List
		_, body := tenantGet(t, r, token, "/v1/sessions?limit=1&after="+after)
		json.Unmarshal([]byte(body), &l)
		for _, s := range l.Sessions {
			paged = append(paged, s.SessionID)
		}
		if after = l.Next; after == "" {
			break
		}
	}
	slices.Sort(paged)
	if !slices.Equal(paged, own) {
		t.Errorf("list by pages %v, want %v", paged, own)
	}
	// Another tenant's session is no cursor, as a missing one is not.
	for _, id := range all {
		if slices.Contains(stored, id) {
			continue
		}
		code, body := tenantGet(t, r, token, "/v1/sessions?after="+id)
		_, mbody := tenantGet(t, r, token, "/v1/sessions?after="+missing)
		if code != 400 || body != mbody {
			t.Errorf("after=%s: %d %s, want %s", id, code, body, mbody)
		}
	}
	found := ids("/v1/search?q=zebra", func(b []byte) (out []string) {
		var l httpapi.SearchResult
		json.Unmarshal(b, &l)
		for _, s := range l.Results {
			out = append(out, s.Summary.SessionID)
		}
		return out
	})
	if !slices.Equal(found, own) {
		t.Errorf("search %v, want %v", found, own)
	}
	audited := ids("/v1/audit", func(b []byte) []string {
		var p httpapi.AuditPage
		json.Unmarshal(b, &p)
		out := []string{}
		for _, a := range p.Records {
			out = append(out, a.SessionID)
		}
		return out
	})
	if !slices.Equal(audited, audit) {
		t.Errorf("audit %v, want %v", audited, audit)
	}
	for _, id := range all {
		for _, p := range paths {
			if slices.Contains(stored, id) {
				id := wireName(prefix, id)
				if code, body := tenantGet(t, r, token, "/v1/sessions/"+id+p); code != 200 {
					t.Errorf("GET %s%s: %d %s", id, p, code, body)
				}
				continue
			}
			code, body := tenantGet(t, r, token, "/v1/sessions/"+id+p)
			mcode, mbody := tenantGet(t, r, token, "/v1/sessions/"+missing+p)
			if code != 404 || mcode != 404 || body != strings.ReplaceAll(mbody, missing, id) {
				t.Errorf("GET %s%s: %d %s, want what a missing session answers: %d %s", id, p, code, body, mcode, mbody)
			}
		}
	}
}

// waitFor polls ok for up to 20 seconds.
func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// TestTenantAgentTokens: a token naming agents of a tenant sees only the
// sessions of the tenant one of them owns or is granted, on every read; a
// session of another agent of the tenant, one without an owner, one of
// an agent of the same name in another tenant and an erased one answer as
// a missing session, and lists, search, audit, children and tree leave
// them out (but for the audit record of the erased session, which its
// owner alice sees); a grant folded later shows the session. The tenant's token
// and the operator's see what they saw.
func TestTenantAgentTokens(t *testing.T) {
	e := projectortest.NewEnv(t)
	const op, acme, alice, bobCarol, agents, agent = "operator-token-0123456789", "acme-token-0123456789",
		"alice-token-0123456789", "bob-carol-token-0123456789", "agents-token-0123456789", "agent-token-0123456789"
	r := e.Start(t.TempDir(), func(c *projector.Config) {
		c.HTTPToken = op
		c.TenantTokens = map[string]string{acme: "acme", alice: "acme:alice", bobCarol: "acme:bob,carol", agents: "AGENTS", agent: "AGENTS:agent"}
	})
	r.WaitReady(t)
	const (
		ownerAlice = `"owner":{"tenant":"acme","agent":"alice"}`
		ownerBob   = `"owner":{"tenant":"acme","agent":"bob"}`
		forkOfA1   = `"parent":{"sessionId":"_Tacme_a1","seedLength":1,"depth":1}`
	)
	scripts := createTenantSessions(t, e, r, op, [][2]string{
		{"_Tacme_a1", `{"title":"zebra a1",` + ownerAlice + `}`},
		{"_Tacme_a2", `{"title":"zebra a2",` + ownerAlice + `,` + forkOfA1 + `}`},
		{"_Tacme_b1", `{"title":"zebra b1",` + ownerBob + `,"grants":["alice"]}`},
		{"_Tacme_b2", `{"title":"zebra b2",` + ownerBob + `,` + forkOfA1 + `}`},
		{"_Tacme_b3", `{"title":"zebra b3",` + ownerBob + `}`},
		{"_Tacme_none", `{"title":"zebra none"}`},
		{"_Tacme_gone", `{"title":"gone",` + ownerAlice + `}`},
		{"_Tbeta_s1", `{"title":"zebra beta","owner":{"tenant":"beta","agent":"alice"}}`},
		{"plain-1", `{"title":"zebra plain"}`},
		{"plain-2", `{"title":"zebra plain 2","owner":{"tenant":"AGENTS","agent":"agent"}}`},
	})
	all := []string{"_Tacme_a1", "_Tacme_a2", "_Tacme_b1", "_Tacme_b2", "_Tacme_b3", "_Tacme_none", "_Tbeta_s1", "plain-1", "plain-2"}
	eraseTenantSession(t, e, r, op, "_Tacme_gone")

	type want struct {
		name, token, prefix  string
		own, children, audit []string // children: of _Tacme_a1, as the token sees them
	}
	check := func(c want) {
		t.Run(c.name, func(t *testing.T) {
			name := func(id string) string { return wireName(c.prefix, id) }
			checkSees(t, r, c.token, c.prefix, all, c.own, c.audit)
			// An erased session is not found, not erased, for a token of
			// agents: its owner went with it.
			code, body := tenantGet(t, r, c.token, "/v1/sessions/"+name("_Tacme_gone"))
			wantErased := c.token == op || c.token == acme
			if code != 404 || strings.Contains(body, `"erased"`) != wantErased {
				t.Errorf("GET _Tacme_gone: %d %s", code, body)
			}
			if !slices.Contains(c.own, "_Tacme_a1") {
				return
			}
			var d httpapi.Detail
			_, body = tenantGet(t, r, c.token, "/v1/sessions/"+name("_Tacme_a1"))
			json.Unmarshal([]byte(body), &d)
			var tr httpapi.Tree
			_, tbody := tenantGet(t, r, c.token, "/v1/sessions/"+name("_Tacme_a1")+"/tree")
			json.Unmarshal([]byte(tbody), &tr)
			var desc []string
			for _, n := range tr.Descendants {
				desc = append(desc, n.SessionID)
			}
			if !slices.Equal(d.Children, c.children) || !slices.Equal(desc, c.children) {
				t.Errorf("children %v, tree %v, want %v", d.Children, desc, c.children)
			}
		})
	}
	wants := []want{
		{"operator", op, "", all, []string{"_Tacme_a2", "_Tacme_b2"}, []string{"_Tacme_gone"}},
		{"acme", acme, "_Tacme_", []string{"_Tacme_a1", "_Tacme_a2", "_Tacme_b1", "_Tacme_b2", "_Tacme_b3", "_Tacme_none"}, []string{"a2", "b2"}, []string{"gone"}},
		{"alice", alice, "_Tacme_", []string{"_Tacme_a1", "_Tacme_a2", "_Tacme_b1"}, []string{"a2"}, []string{"gone"}},
		{"bob,carol", bobCarol, "_Tacme_", []string{"_Tacme_b1", "_Tacme_b2", "_Tacme_b3"}, nil, []string{}},
		{"AGENTS", agents, "", []string{"plain-1", "plain-2"}, nil, []string{}},
		{"AGENTS:agent", agent, "", []string{"plain-2"}, nil, []string{}},
	}
	for _, c := range wants {
		check(c)
	}

	// bob grants _Tacme_b3 to alice: once folded, alice sees it.
	b3 := scripts["_Tacme_b3"]
	b3.add(schema.TypeSessionGranted, `{"grants":["alice"]}`)
	waitDetailToken(t, r, op, "_Tacme_b3", func(d httpapi.Detail) bool { return d.LastSeq == b3.seq })
	wants[2].own = []string{"_Tacme_a1", "_Tacme_a2", "_Tacme_b1", "_Tacme_b3"}
	wants[2].name = "alice granted b3"
	check(wants[2])
}

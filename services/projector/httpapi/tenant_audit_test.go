package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest/tamper"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/eraser"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// TestTenantAuditPages: the sessions of two tenants and of the default
// tenant, erased in turn (their audit records interleaved in the audit
// stream), are read from /v1/audit two records a page by each token:
// every page holds two records while more follow, the pages hold the
// token's records once each, in the order they were erased, and no
// other's. A token of agents sees the records of the sessions its agents
// owned or were granted (alice of acme, not alice of beta), not those of
// another agent or of a session without an owner. Forged cursors (past
// the end, negative, not a number, the operator's stream sequences) lead
// to no other tenant's or agent's record (a token of agents is refused
// those it was never given: TestTenantAuditAgentCursors).
func TestTenantAuditPages(t *testing.T) {
	const alice, bob = "alice-token-0123456789", "bob-token-0123456789"
	l := projectortest.NewMem(t)
	owner := func(tenant, agent string) *schema.Owner { return &schema.Owner{Tenant: tenant, Agent: agent} }
	// The audit records of the erasures, as the eraser writes them: each
	// names the session's owner and grants (none: a session without an
	// owner).
	var records []api.AuditRecord
	for i := range 5 {
		records = append(records,
			api.AuditRecord{SessionID: fmt.Sprintf("_Tacme_a%d", i), Owner: owner("acme", []string{"alice", "bob"}[i%2])},
			api.AuditRecord{SessionID: fmt.Sprintf("_Tbeta_b%d", i), Owner: owner("beta", "alice")},
			api.AuditRecord{SessionID: fmt.Sprintf("plain-%d", i)})
	}
	records = append(records,
		api.AuditRecord{SessionID: "_Tacme_g", Owner: owner("acme", "bob"), Grants: []string{"alice"}},
		api.AuditRecord{SessionID: "_Tacme_n"})
	var erased []string
	for _, a := range records {
		a.ErasedAt, a.By, a.Reason = projectortest.T0.Format(time.RFC3339), "test", "r"
		if err := l.WriteAudit(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		erased = append(erased, a.SessionID)
	}
	r := projectortest.Serve(t, l, func(c *httpapi.Config) {
		c.HTTPToken = op
		c.TenantTokens = map[string]string{acme: "acme", beta: "beta", agents: "AGENTS", alice: "acme:alice", bob: "acme:bob"}
	})

	for _, c := range []struct {
		name, token string
		want        []string
	}{
		{"operator", op, erased},
		{"acme", acme, []string{"a0", "a1", "a2", "a3", "a4", "g", "n"}},
		{"beta", beta, []string{"b0", "b1", "b2", "b3", "b4"}},
		{"AGENTS", agents, []string{"plain-0", "plain-1", "plain-2", "plain-3", "plain-4"}},
		{"acme:alice", alice, []string{"a0", "a2", "a4", "g"}},
		{"acme:bob", bob, []string{"a1", "a3", "g"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			page := func(after string, limit int) httpapi.AuditPage {
				t.Helper()
				code, body := tenantGet(t, r, c.token, fmt.Sprintf("/v1/audit?after=%s&limit=%d", after, limit))
				var p httpapi.AuditPage
				if code == 400 && strings.Contains(c.name, ":") && strings.Contains(body, `"code":"bad_request"`) {
					return p
				}
				if code != 200 || json.Unmarshal([]byte(body), &p) != nil {
					t.Fatalf("GET /v1/audit?after=%s: %d %s", after, code, body)
				}
				return p
			}
			var got []string
			var sizes []int
			after := "0"
			for range len(erased) + 1 {
				p := page(after, 2)
				if len(p.Records) == 0 {
					break
				}
				sizes = append(sizes, len(p.Records))
				for _, a := range p.Records {
					got = append(got, a.SessionID)
				}
				after = fmt.Sprint(p.Next)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("audit by pages of 2: %v, want %v", got, c.want)
			}
			for i, n := range sizes {
				if n != 2 && i != len(sizes)-1 {
					t.Errorf("page %d holds %d records (pages %v), want 2 while more follow", i, n, sizes)
				}
			}
			// Every token has more than two records: a page that held
			// them all, whatever the limit, is the last and only one.
			if want := (len(c.want) + 1) / 2; len(sizes) != want {
				t.Errorf("audit by pages of 2: %d pages %v, want %d", len(sizes), sizes, want)
			}
			// Forged cursors: nothing but the token's own records.
			forged := []string{"18446744073709551615", "99999999999999999999", "-1", "x", ""}
			for i := range len(erased) + 2 {
				forged = append(forged, fmt.Sprint(i))
			}
			for _, f := range forged {
				for _, a := range page(f, 100).Records {
					if !slices.Contains(c.want, a.SessionID) {
						t.Errorf("after=%s: the record of %s", f, a.SessionID)
					}
				}
			}
		})
	}
}

// TestTenantAuditRestart: a tenant's audit index outlives a restart (the
// records erased after it are numbered on from the last), and a store
// rebuilt from nothing numbers the records as before; the records name
// no owner (as those written before records named them: env.erase), and
// the owners the projector kept for the sessions erased before the
// rebuild are gone with their events, so their records are the tenant
// token's alone (and never another's).
func TestTenantAuditRestart(t *testing.T) {
	const alice = "alice-token-0123456789"
	tokens := map[string]string{acme: "acme", beta: "beta", alice: "acme:alice"}
	e, r := startTokens(t, tokens)
	ownedBy := func(agent string) string { return `{"title":"t","owner":{"tenant":"acme","agent":"` + agent + `"}}` }
	createTenantSessions(t, e, r, op, [][2]string{
		{"_Tacme_x1", ownedBy("alice")}, {"_Tbeta_y1", `{"title":"t"}`}, {"_Tacme_x2", ownedBy("bob")}, {"_Tacme_x3", ownedBy("alice")},
	})
	audit := func(r *projectortest.Running, token, after string) (ids []string, next uint64) {
		t.Helper()
		code, body := tenantGet(t, r, token, "/v1/audit?after="+after)
		var p httpapi.AuditPage
		if code != 200 || json.Unmarshal([]byte(body), &p) != nil {
			t.Fatalf("GET /v1/audit?after=%s: %d %s", after, code, body)
		}
		for _, a := range p.Records {
			ids = append(ids, a.SessionID)
		}
		return ids, p.Next
	}
	check := func(r *projectortest.Running, token, after string, want []string, wantNext uint64) {
		t.Helper()
		if ids, next := audit(r, token, after); !slices.Equal(ids, want) || next != wantNext {
			t.Errorf("audit after %s: %v next %d, want %v next %d", after, ids, next, want, wantNext)
		}
	}
	eraseTenantSession(t, e, r, op, "_Tacme_x1")
	eraseTenantSession(t, e, r, op, "_Tbeta_y1")
	check(r, acme, "0", []string{"x1"}, 1)
	check(r, alice, "0", []string{"x1"}, 1)
	dir := r.DB().Dir()
	r.Stop(t)

	r = e.Start(dir, func(c *projector.Config) { c.HTTPToken, c.TenantTokens = op, tokens })
	r.WaitReady(t)
	eraseTenantSession(t, e, r, op, "_Tacme_x2")
	eraseTenantSession(t, e, r, op, "_Tacme_x3")
	check(r, acme, "0", []string{"x1", "x2", "x3"}, 3)
	check(r, acme, "1", []string{"x2", "x3"}, 3)
	check(r, alice, "0", []string{"x1", "x3"}, 2)
	check(r, beta, "0", []string{"y1"}, 1)
	r.Stop(t)

	// A store rebuilt from the log and the audit stream alone.
	r = e.Start(t.TempDir(), func(c *projector.Config) { c.HTTPToken, c.TenantTokens = op, tokens })
	r.WaitReady(t)
	check(r, acme, "1", []string{"x2", "x3"}, 3)
	check(r, beta, "0", []string{"y1"}, 1)
	check(r, alice, "0", nil, 0)
}

// TestTenantAuditOwnerFromRecord: sessions erased by the eraser before
// the projector ever folded them (their events gone when it starts, so
// it never had their summaries) have their audit records shown to the
// agents that owned them or were granted them, by the owner and grants
// the records name, and to no other agent: not to one whose name a
// session of another tenant grants, nor to one whose name the owner of
// another tenant has. The same after a rebuild of the store. The
// records' digests and counts are the erased bodies'; s5's bodies are
// sealed and its second garbled (it does not open): its record's digest
// and count are the three others', and its unhashed is 1 (absent from the
// others).
func TestTenantAuditOwnerFromRecord(t *testing.T) {
	const alice, bob, carol, mallory, betaAlice = "alice-token-0123456789", "bob-token-0123456789",
		"carol-token-0123456789", "mallory-token-0123456789", "beta-alice-token-0123456789"
	tokens := map[string]string{acme: "acme", beta: "beta", alice: "acme:alice", bob: "acme:bob", carol: "acme:carol",
		mallory: "acme:mallory", betaAlice: "beta:alice"}
	e := projectortest.NewEnv(t)
	owned := func(tenant, agent, more string) string {
		return fmt.Sprintf(`{"title":"t","owner":{"tenant":%q,"agent":%q}%s}`, tenant, agent, more)
	}
	sessions := []struct {
		id, created, granted string
		garbled              bool
	}{
		{"_Tacme_s1", owned("acme", "alice", ""), "", false},
		{"_Tacme_s2", owned("acme", "bob", ""), `{"grants":["carol"]}`, false},
		{"_Tacme_s3", owned("acme", "bob", ""), "", false},
		// An operator's session of acme owned by beta's alice: no agent's.
		{"_Tacme_x", owned("beta", "alice", ""), "", false},
		{"_Tbeta_s4", owned("beta", "alice", `,"grants":["carol","mallory"]`), "", false},
		{"_Tacme_s5", owned("acme", "alice", ""), "", true},
	}
	sealing, err := logstore.Open(e.Ctx, e.NC, logstore.Config{SealBodies: true})
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	er, err := eraser.New(eraser.Config{Store: sealing, Conn: e.NC})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range sessions {
		s := newScript(t, e, c.id)
		if c.garbled {
			s.ls = sealing
		}
		s.add(schema.TypeSessionCreated, c.created)
		s.add(schema.TypeMessageUser, `{"content":[{"type":"text","text":"feed the zebra"}]}`)
		if c.granted != "" {
			s.add(schema.TypeSessionGranted, c.granted)
		}
		if c.garbled {
			s.add(schema.TypeMessageUser, `{"content":[{"type":"text","text":"and the yak"}]}`)
			s.add(schema.TypeMessageUser, `{"content":[{"type":"text","text":"and the gnu"}]}`)
			tamper.BreakChainAt(t, e.NC, "SESSIONS", logstore.SubjectPrefix+c.id, tamper.BreakGarble, 1)
			s.evs = slices.Delete(s.evs, 1, 2)
		}
		h := sha256.New()
		for _, ev := range s.evs {
			b, _ := json.Marshal(ev)
			h.Write(b)
		}
		sums[c.id] = hex.EncodeToString(h.Sum(nil))
		if _, err := er.Erase(e.Ctx, api.EraseRequest{SessionID: c.id, Reason: "r", By: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	type record struct {
		SessionID string        `json:"sessionId"`
		Events    uint64        `json:"events"`
		SHA256    string        `json:"sha256"`
		Unhashed  uint64        `json:"unhashed"`
		Owner     *schema.Owner `json:"owner"`
		Grants    []string      `json:"grants"`
	}
	check := func(r *projectortest.Running) {
		t.Helper()
		for _, c := range []struct {
			name, token string
			want        []string
		}{
			{"acme", acme, []string{"s1", "s2", "s3", "x", "s5"}},
			{"beta", beta, []string{"s4"}},
			{"acme:alice", alice, []string{"s1", "s5"}},
			{"acme:bob", bob, []string{"s2", "s3"}},
			{"acme:carol", carol, []string{"s2"}},
			{"acme:mallory", mallory, nil},
			{"beta:alice", betaAlice, []string{"s4"}},
		} {
			code, body := tenantGet(t, r, c.token, "/v1/audit")
			var p struct{ Records []record }
			if code != 200 || json.Unmarshal([]byte(body), &p) != nil {
				t.Fatalf("%s: GET /v1/audit: %d %s", c.name, code, body)
			}
			var got []string
			for _, a := range p.Records {
				got = append(got, a.SessionID)
				stored := "_Tacme_" + a.SessionID
				if c.token == beta || c.token == betaAlice {
					stored = "_Tbeta_" + a.SessionID
				}
				unhashed := uint64(strings.Count(stored, "s5"))
				if a.SHA256 != sums[stored] || a.Events != uint64(2+strings.Count(stored, "s2"))+unhashed || a.Unhashed != unhashed {
					t.Errorf("%s: the record of %s: %d events (%d unhashed), sha256 %s, want %s and %d unhashed", c.name, a.SessionID, a.Events, a.Unhashed, a.SHA256, sums[stored], unhashed)
				}
				if a.SessionID == "s2" && (a.Owner == nil || *a.Owner != (schema.Owner{Tenant: "acme", Agent: "bob"}) || !slices.Equal(a.Grants, []string{"carol"})) {
					t.Errorf("%s: the record of s2 names %+v %v, want acme/bob and [carol]", c.name, a.Owner, a.Grants)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("%s sees the audit records of %v, want %v", c.name, got, c.want)
			}
		}
	}
	r := e.Start(t.TempDir(), func(c *projector.Config) { c.HTTPToken, c.TenantTokens = op, tokens })
	r.WaitReady(t)
	check(r)
	r.Stop(t)
	// A store rebuilt from nothing.
	r = e.Start(t.TempDir(), func(c *projector.Config) { c.HTTPToken, c.TenantTokens = op, tokens })
	r.WaitReady(t)
	check(r)
}

// TestTenantAuditAgentCursors: a token of agents learns nothing from its
// audit cursors of the records it does not see. alice of acme pages
// through her records while bob of acme erases his sessions between
// hers, and alice of beta pages through hers with no other erasures: the
// cursors (next) both alices get are the same, 1, 2, 3, read a page at a
// time as the records come and all at once at the end, and a page of 2
// holds 2 while more follow. A cursor the token was never given (past
// its last record, not a number) is refused with bad_request, and
// another token's cursors (bob's) lead alice only to her own records,
// as her own cursors of the same value do. The tenant's token keeps its
// numbers (bob's erasures counted).
func TestTenantAuditAgentCursors(t *testing.T) {
	const alice, bob, betaAlice = "alice-token-0123456789", "bob-token-0123456789", "beta-alice-token-0123456789"
	e, r := startTokens(t, map[string]string{acme: "acme", alice: "acme:alice", bob: "acme:bob", betaAlice: "beta:alice"})
	owned := func(tenant, agent string) string {
		return fmt.Sprintf(`{"title":"t","owner":{"tenant":%q,"agent":%q}}`, tenant, agent)
	}
	var sessions [][2]string
	for _, id := range []string{"a1", "a2", "a3"} {
		sessions = append(sessions, [2]string{"_Tacme_" + id, owned("acme", "alice")})
	}
	for _, id := range []string{"b1", "b2", "b3"} {
		sessions = append(sessions, [2]string{"_Tacme_" + id, owned("acme", "bob")})
	}
	for _, id := range []string{"c1", "c2", "c3"} {
		sessions = append(sessions, [2]string{"_Tbeta_" + id, owned("beta", "alice")})
	}
	createTenantSessions(t, e, r, op, sessions)
	page := func(token, after string, limit int) (code int, ids []string, next uint64, body string) {
		t.Helper()
		code, body = tenantGet(t, r, token, fmt.Sprintf("/v1/audit?after=%s&limit=%d", after, limit))
		var p httpapi.AuditPage
		if code == 200 && json.Unmarshal([]byte(body), &p) != nil {
			t.Fatalf("GET /v1/audit?after=%s: %d %s", after, code, body)
		}
		for _, a := range p.Records {
			ids = append(ids, a.SessionID)
		}
		return code, ids, p.Next, body
	}
	// cursors pages through the token's records from after, limit a
	// page, and returns every next it is given and the records.
	cursors := func(token, after string, limit int) (nexts []uint64, ids []string, sizes []int) {
		t.Helper()
		for range 10 {
			code, got, next, body := page(token, after, limit)
			if code != 200 {
				t.Fatalf("GET /v1/audit?after=%s: %d %s", after, code, body)
			}
			if len(got) == 0 {
				if fmt.Sprint(next) != after {
					t.Errorf("an empty page after %s gives next %d", after, next)
				}
				return nexts, ids, sizes
			}
			nexts, ids, sizes = append(nexts, next), append(ids, got...), append(sizes, len(got))
			after = fmt.Sprint(next)
		}
		t.Fatal("more than 10 pages")
		return nil, nil, nil
	}
	// The acme alice reads as the records come: one after a1, none new
	// after bob's b1 and b2, two more after a2, b3 and a3.
	var seen []uint64
	after := "0"
	for _, step := range [][]string{{"a1"}, {"b1", "b2"}, {"a2", "b3", "a3"}} {
		for _, id := range step {
			eraseTenantSession(t, e, r, op, "_Tacme_"+id)
		}
		nexts, _, _ := cursors(alice, after, 1)
		seen = append(seen, nexts...)
		if len(nexts) > 0 {
			after = fmt.Sprint(nexts[len(nexts)-1])
		}
	}
	for _, id := range []string{"c1", "c2", "c3"} {
		eraseTenantSession(t, e, r, op, "_Tbeta_"+id)
	}
	want := []uint64{1, 2, 3}
	if !slices.Equal(seen, want) {
		t.Errorf("acme:alice, reading as bob erases between her records, is given the cursors %v, want %v", seen, want)
	}
	for _, c := range []struct {
		name, token string
		want        []string
	}{
		{"acme:alice", alice, []string{"a1", "a2", "a3"}},
		{"beta:alice", betaAlice, []string{"c1", "c2", "c3"}},
	} {
		nexts, ids, _ := cursors(c.token, "0", 1)
		if !slices.Equal(nexts, want) || !slices.Equal(ids, c.want) {
			t.Errorf("%s by pages of 1: %v, cursors %v, want %v, cursors %v", c.name, ids, nexts, c.want, want)
		}
		if _, _, sizes := cursors(c.token, "0", 2); !slices.Equal(sizes, []int{2, 1}) {
			t.Errorf("%s by pages of 2: pages of %v records, want [2 1]", c.name, sizes)
		}
	}
	// The tenant's token counts every record of the tenant.
	if nexts, _, _ := cursors(acme, "0", 1); !slices.Equal(nexts, []uint64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("acme's cursors %v, want 1 to 6", nexts)
	}

	// Cursors alice was never given are refused.
	for _, f := range []string{"4", "5", "6", "7", "18446744073709551615", "99999999999999999999", "-1", "x", "3x"} {
		code, ids, _, body := page(alice, f, 10)
		if code != 400 || !strings.Contains(body, `"code":"bad_request"`) {
			t.Errorf("alice's after=%s: %d %v %s, want 400 bad_request", f, code, ids, body)
		}
	}
	// Bob's cursors lead alice to her own records, as hers of the same
	// value do.
	bobNexts, bobIDs, _ := cursors(bob, "0", 1)
	if !slices.Equal(bobIDs, []string{"b1", "b2", "b3"}) {
		t.Errorf("acme:bob sees %v, want b1 b2 b3", bobIDs)
	}
	for _, n := range append([]uint64{0}, bobNexts...) {
		f := fmt.Sprint(n)
		_, ids, next, _ := page(alice, f, 10)
		want := []string{"a1", "a2", "a3"}[min(n, 3):]
		if !slices.Equal(ids, want) || next != 3 {
			t.Errorf("alice after bob's cursor %s: %v next %d, want %v next 3", f, ids, next, want)
		}
	}
}

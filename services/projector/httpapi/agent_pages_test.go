package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// TestAgentPages: a tenant of five agents, its sessions created in turn
// with sessions of another tenant (owned by agents of the same names),
// sessions of the tenant without an owner and one owned by the other
// tenant's agent, some granted to another agent, a third of them active
// again later (their status and place in the lists move). A token naming
// agents pages through /v1/sessions (every status, idle, active) a few at
// a time: its pages hold exactly the sessions its agents own or are
// granted, in the operator's order, every page full while more follow,
// and no next after the last; each page reads at most one index entry
// more per agent than it holds, and the summaries it holds alone (the
// walk of the whole tenant read them all). Each agent's index holds
// exactly its sessions, each under its status. A grant adds the session
// to the grantee's pages (and moves it, its activity newer); an erase
// takes it out of every agent's index. A store of the previous view
// version rebuilds, the same indexes.
func TestAgentPages(t *testing.T) {
	e := projectortest.NewEnv(t)
	const alice, bob, carolDave = "alice-token-0123456789", "bob-token-0123456789", "carol-dave-token-0123456789"
	tokens := map[string]string{acme: "acme", alice: "acme:alice", bob: "acme:bob", carolDave: "acme:carol,dave"}
	dir := t.TempDir()
	start := func() (*projectortest.Running, *prometheus.Registry) {
		reg := prometheus.NewRegistry()
		r := e.Start(dir, func(c *projector.Config) {
			c.HTTPToken, c.TenantTokens = op, tokens
			c.Registerer, c.Gatherer = reg, reg
		})
		r.WaitReady(t)
		return r, reg
	}
	r, reg := start()

	names := []string{"alice", "bob", "carol", "dave", "erin"}
	const n = 30
	scripts := map[string]*script{}
	at := func(d time.Duration) func(*schema.Envelope) {
		return func(ev *schema.Envelope) { ev.Time = projectortest.T0.Add(d) }
	}
	create := func(id, data string, when time.Duration) {
		scripts[id] = newScript(t, e, id)
		scripts[id].add(schema.TypeSessionCreated, data, at(when))
	}
	owned := func(tenant, agent, more string) string {
		return fmt.Sprintf(`{"title":"t","owner":{"tenant":%q,"agent":%q}%s}`, tenant, agent, more)
	}
	for i := range n {
		ms := func(k int) time.Duration { return time.Duration(10*i+k) * time.Millisecond }
		more := ""
		if i%4 == 0 {
			more = `,"grants":["carol"]` // to its owner, when carol owns it
		}
		create(fmt.Sprintf("_Tacme_s%02d", i), owned("acme", names[i%5], more), ms(0))
		create(fmt.Sprintf("_Tbeta_s%02d", i), owned("beta", names[i%5], ""), ms(1))
		if i%6 == 0 {
			create(fmt.Sprintf("_Tacme_n%02d", i), `{"title":"t"}`, ms(2))
		}
		if i == 13 {
			create("_Tacme_x", owned("beta", "alice", ""), ms(3))
		}
	}
	for i := 0; i < n; i += 3 {
		scripts[fmt.Sprintf("_Tacme_s%02d", i)].add(schema.TypeTurnStarted, `{}`, inTurn("t1"), at(time.Second+time.Duration(i)*time.Millisecond))
	}
	folded := func(r *projectortest.Running) {
		t.Helper()
		for id, s := range scripts {
			waitDetailToken(t, r, op, id, func(d httpapi.Detail) bool { return d.LastSeq == s.seq })
		}
	}
	folded(r)

	// opList is the operator's list (of a status, if given), newest first.
	opList := func(r *projectortest.Running, status string) []store.Summary {
		t.Helper()
		code, body := tenantGet(t, r, op, "/v1/sessions?limit=1000&status="+status)
		var l httpapi.List
		if err := json.Unmarshal([]byte(body), &l); code != 200 || err != nil {
			t.Fatalf("operator's list: %d %s", code, body)
		}
		return l.Sessions
	}
	// seen: the stored ids of sums that one of agents of acme owns or is
	// granted.
	seen := func(sums []store.Summary, agents []string) (ids []string) {
		for _, s := range sums {
			o := s.Owner
			if strings.HasPrefix(s.SessionID, "_Tacme_") && o != nil && o.Tenant == "acme" &&
				(slices.Contains(agents, o.Agent) || slices.ContainsFunc(s.Grants, func(g string) bool { return slices.Contains(agents, g) })) {
				ids = append(ids, s.SessionID)
			}
		}
		return ids
	}
	const limit = 3
	var pages, entries, summaries int // of every page read, for the figures
	checkPages := func(r *projectortest.Running, reg *prometheus.Registry) {
		t.Helper()
		for _, status := range []string{"", "idle", "active"} {
			ops := opList(r, status)
			for _, tk := range []struct {
				token  string
				agents []string
			}{{alice, []string{"alice"}}, {bob, []string{"bob"}}, {carolDave, []string{"carol", "dave"}}} {
				var want []string
				for _, id := range seen(ops, tk.agents) {
					want = append(want, strings.TrimPrefix(id, "_Tacme_"))
				}
				var got []string
				after := ""
				for page := 0; page <= len(want); page++ {
					path := fmt.Sprintf("/v1/sessions?limit=%d&status=%s&after=%s", limit, status, after)
					idx := projectortest.CounterValue(t, reg, "sessionlog_projector_list_reads_total", "index")
					sum := projectortest.CounterValue(t, reg, "sessionlog_projector_list_reads_total", "summary")
					code, body := tenantGet(t, r, tk.token, path)
					if code != 200 {
						t.Fatalf("%v: GET %s: %d %s", tk.agents, path, code, body)
					}
					idx = projectortest.CounterValue(t, reg, "sessionlog_projector_list_reads_total", "index") - idx
					sum = projectortest.CounterValue(t, reg, "sessionlog_projector_list_reads_total", "summary") - sum
					pages, entries, summaries = pages+1, entries+int(idx), summaries+int(sum)
					ids, next := pageIDs(body)
					if next != "" && len(ids) != limit || next == "" && len(ids) != len(want)-len(got) {
						t.Errorf("%v: GET %s: %d sessions %v, next %q (%d of %d listed before)", tk.agents, path, len(ids), ids, next, len(got), len(want))
					}
					if int(idx) > len(tk.agents)*(limit+1) || int(sum) > limit {
						t.Errorf("%v: GET %s: a page of %d read %v index entries and %v summaries, want at most %d and %d",
							tk.agents, path, len(ids), idx, sum, len(tk.agents)*(limit+1), limit)
					}
					got = append(got, ids...)
					if after = next; after == "" {
						break
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%v: status %q by pages: %v, want %v", tk.agents, status, got, want)
				}
			}
		}
	}
	// checkIndex: each agent's index holds its sessions (stored ids) in
	// the operator's order, and under their status alone; it returns them.
	checkIndex := func(r *projectortest.Running) map[string][]string {
		t.Helper()
		all := opList(r, "")
		out := map[string][]string{}
		for _, a := range names {
			act, byStatus, err := projectortest.AgentIndexed(r, "acme", a)
			if err != nil {
				t.Fatal(err)
			}
			want := seen(all, []string{a})
			if !slices.Equal(act, want) {
				t.Errorf("%s's activity index: %v, want %v", a, act, want)
			}
			for _, st := range store.Statuses {
				if got, want := byStatus[st], seen(opList(r, st), []string{a}); !slices.Equal(got, want) {
					t.Errorf("%s's %s index: %v, want %v", a, st, got, want)
				}
			}
			out[a] = act
			for _, st := range slices.Sorted(maps.Keys(byStatus)) {
				out[a+" "+st] = byStatus[st]
			}
		}
		return out
	}
	checkPages(r, reg)
	checkIndex(r)

	// bob grants s01 to alice, dave s08 (granted to carol) to alice and
	// erin: once folded, alice and erin list them, newest first.
	scripts["_Tacme_s01"].add(schema.TypeSessionGranted, `{"grants":["alice"]}`, at(2*time.Second))
	scripts["_Tacme_s08"].add(schema.TypeSessionGranted, `{"grants":["alice","erin"]}`, at(2*time.Second+time.Millisecond))
	folded(r)
	checkPages(r, reg)
	idx := checkIndex(r)
	if !slices.Equal(idx["alice"][:2], []string{"_Tacme_s08", "_Tacme_s01"}) || !slices.Contains(idx["erin"], "_Tacme_s08") {
		t.Errorf("after the grants: alice's index %v, erin's %v", idx["alice"], idx["erin"])
	}

	// s08 is erased: it leaves the index of every agent, once the fold
	// loop removed its views (the 404 comes before).
	eraseTenantSession(t, e, r, op, "_Tacme_s08")
	delete(scripts, "_Tacme_s08")
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		for _, a := range names {
			act, byStatus, err := projectortest.AgentIndexed(r, "acme", a)
			if err != nil {
				return err
			}
			for _, ids := range append(slices.Collect(maps.Values(byStatus)), act) {
				if slices.Contains(ids, "_Tacme_s08") {
					return fmt.Errorf("%s's index holds the erased session: %v", a, ids)
				}
			}
		}
		return nil
	})
	checkPages(r, reg)
	before := checkIndex(r)
	t.Logf("agent tokens: %d pages of up to %d read %d index entries and %d summaries", pages, limit, entries, summaries)

	// A store of the previous view version rebuilds: the indexes the
	// fold kept up (moves, grants, an erase) are those a rebuild makes.
	r.Stop(t)
	// And the store the fold kept equals a rebuild to its checkpoint.
	vctx, vcancel := context.WithTimeout(e.Ctx, time.Minute)
	res, err := projector.Verify(vctx, e.LS, dir, filepath.Join(t.TempDir(), "verify"), nil)
	vcancel()
	if err != nil || !res.OK() {
		t.Fatalf("verify-projection: %+v %v", res, err)
	}
	db, cp := projectortest.OpenCheckpoint(t, dir)
	cp.Version = fmt.Sprintf("reducer=%d,views=%d", session.ReducerVersion, projector.ViewVersion-1)
	if err := db.SetCheckpointRaw(store.EncodeCheckpoint(cp)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	r, reg = start()
	if m := r.Mode(); !m.Rebuild {
		t.Fatalf("a store of view version %d did not rebuild: %+v", projector.ViewVersion-1, m)
	}
	folded(r)
	if after := checkIndex(r); !maps.EqualFunc(after, before, slices.Equal) {
		t.Errorf("the indexes rebuilt: %v, were %v", after, before)
	}
	checkPages(r, reg)
}

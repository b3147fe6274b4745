package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"testing"

	"github.com/sessionlog/sessionlog/services/projector/httpapi"
)

// TestSearchBudgetPages: with a budget of 3 sessions examined a search
// request, a search's pages end where the budget ran out and say so
// (stoppedAt, and next leads on from there), so that paging finds every
// session holding the words, also across pages that found none. A token
// of agents is never told of a session it does not see: its pages stop
// only at a session of its agents (past the budget if it must), so no
// next or stoppedAt names another agent's session, however the budget
// falls.
func TestSearchBudgetPages(t *testing.T) {
	defer httpapi.SetSearchScanBudget(3)()
	const alice = "alice-token-0123456789"
	e, r := startTokens(t, map[string]string{acme: "acme", alice: "acme:alice"})
	created := func(title, agent string) string {
		return fmt.Sprintf(`{"title":%q,"owner":{"tenant":"acme","agent":%q}}`, title, agent)
	}
	var sessions [][2]string
	for i := 1; i <= 6; i++ {
		title := "zebra"
		if i == 3 {
			title = "zebra lion"
		}
		sessions = append(sessions, [2]string{fmt.Sprintf("_Tacme_b%02d", i), created(title, "bob")})
	}
	sessions = append(sessions,
		[2]string{"_Tacme_c01", created("zebra", "alice")},
		[2]string{"_Tacme_c02", created("zebra lion", "alice")})
	createTenantSessions(t, e, r, op, sessions)

	type page struct {
		results         []string
		next, stoppedAt string
	}
	pages := func(token, q string) []page {
		t.Helper()
		var out []page
		after := ""
		for range len(sessions) + 2 {
			code, body := tenantGet(t, r, token, "/v1/search?limit=5&q="+url.QueryEscape(q)+"&after="+after)
			var res httpapi.SearchResult
			if code != 200 || json.Unmarshal([]byte(body), &res) != nil {
				t.Fatalf("search %q after %q: %d %s", q, after, code, body)
			}
			p := page{next: res.Next, stoppedAt: res.StoppedAt}
			for _, h := range res.Results {
				p.results = append(p.results, h.Summary.SessionID)
			}
			out = append(out, p)
			if after = res.Next; after == "" {
				return out
			}
		}
		t.Fatalf("search %q: no end after %d pages: %+v", q, len(out), out)
		return nil
	}
	for _, c := range []struct {
		name, token, q string
		want           []page
	}{
		{"acme", acme, "zebra lion", []page{
			{[]string{"b03"}, "b03", "b03"},
			{nil, "b06", "b06"},
			{[]string{"c02"}, "", ""},
		}},
		{"operator", op, "zebra lion", []page{
			{[]string{"_Tacme_b03"}, "_Tacme_b03", "_Tacme_b03"},
			{nil, "_Tacme_b06", "_Tacme_b06"},
			{[]string{"_Tacme_c02"}, "", ""},
		}},
		// bob's six sessions examined and passed over: the first page
		// stops at alice's c01, not at b03.
		{"acme:alice", alice, "zebra", []page{
			{[]string{"c01"}, "c01", "c01"},
			{[]string{"c02"}, "", ""},
		}},
		// c01 holds zebra alone: the budget stops the page there.
		{"acme:alice lion", alice, "zebra lion", []page{
			{nil, "c01", "c01"},
			{[]string{"c02"}, "", ""},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := pages(c.token, c.q)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("pages %+v, want %+v", got, c.want)
			}
			if c.token != alice {
				return
			}
			for _, p := range got {
				for _, id := range append(slices.Clone(p.results), p.next, p.stoppedAt) {
					if id != "" && id[0] != 'c' {
						t.Errorf("alice is told of %s: %+v", id, p)
					}
				}
			}
		})
	}
}

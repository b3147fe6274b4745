package projector_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/sessionlog/sessionlog/services/projector"
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
// to no other tenant's or agent's record.
func TestTenantAuditPages(t *testing.T) {
	const alice, bob = "alice-token-0123456789", "bob-token-0123456789"
	e, r := startTokens(t, map[string]string{acme: "acme", beta: "beta", agents: "AGENTS", alice: "acme:alice", bob: "acme:bob"})
	owner := func(tenant, agent string) string {
		return fmt.Sprintf(`{"title":"t","owner":{"tenant":%q,"agent":%q}}`, tenant, agent)
	}
	var sessions [][2]string
	for i := range 5 {
		sessions = append(sessions,
			[2]string{fmt.Sprintf("_Tacme_a%d", i), owner("acme", []string{"alice", "bob"}[i%2])},
			[2]string{fmt.Sprintf("_Tbeta_b%d", i), owner("beta", "alice")},
			[2]string{fmt.Sprintf("plain-%d", i), `{"title":"t"}`})
	}
	sessions = append(sessions,
		[2]string{"_Tacme_g", `{"title":"t","owner":{"tenant":"acme","agent":"bob"},"grants":["alice"]}`},
		[2]string{"_Tacme_n", `{"title":"t"}`})
	createTenantSessions(t, e, r, op, sessions)
	var erased []string
	for _, s := range sessions {
		eraseTenantSession(t, e, r, op, s[0])
		erased = append(erased, s[0])
	}

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
			page := func(after string, limit int) projector.AuditPage {
				t.Helper()
				code, body := tenantGet(t, r, c.token, fmt.Sprintf("/v1/audit?after=%s&limit=%d", after, limit))
				var p projector.AuditPage
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

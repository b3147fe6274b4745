package httpapi_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// TestTenantPages: the sessions of two tenants and of the default tenant,
// created in turn (their activity interleaved; the default tenant's ids
// on both sides of the _T ones in id order), are listed and searched a
// page at a time to each tenant's token: every page holds limit sessions
// of the tenant until the last, the pages hold all of them once, in
// order, and the next cursors lead on. A tenant's list reads its own
// index entries alone (limit of them for a page of limit), and a search
// examines its own sessions alone: with a budget of 10 sessions examined
// a request, a page of 5 is full.
func TestTenantPages(t *testing.T) {
	defer httpapi.SetSearchScanBudget(10)()
	e, r := startTenants(t)
	const n = 12
	tenants := []struct{ name, token, prefix string }{{"acme", acme, "_Tacme_"}, {"beta", beta, "_Tbeta_"}, {"AGENTS", agents, ""}}
	want := map[string][]string{} // newest first, as the tenant names them
	var all []string
	for i := range n {
		for j, tn := range tenants {
			name := fmt.Sprintf("s%02d", i)
			if tn.prefix == "" {
				name = fmt.Sprintf("%s-%02d", []string{"A", "z"}[i%2], i) // before and after _T
			}
			id := tn.prefix + name
			at := projectortest.T0.Add(time.Duration(3*i+j) * time.Millisecond)
			newScript(t, e, id).add(schema.TypeSessionCreated, `{"title":"zebra"}`, func(ev *schema.Envelope) { ev.Time = at })
			want[tn.name] = append([]string{name}, want[tn.name]...)
			all = append(all, id)
		}
	}
	for _, id := range all {
		waitDetailToken(t, r, op, id, func(d httpapi.Detail) bool { return d.LastSeq == 1 })
	}

	for _, tn := range tenants {
		t.Run(tn.name, func(t *testing.T) {
			for _, p := range []string{"/v1/sessions?limit=5", "/v1/sessions?status=idle&limit=5", "/v1/search?q=zebra&limit=5"} {
				var got []string
				after := ""
				for page := 0; ; page++ {
					code, body := tenantGet(t, r, tn.token, p+"&after="+after)
					if code != 200 {
						t.Fatalf("GET %s&after=%s: %d %s", p, after, code, body)
					}
					ids, next := pageIDs(body)
					if next != "" && len(ids) != 5 || next == "" && len(ids) != n-10 {
						t.Errorf("GET %s&after=%s: page %d holds %d sessions %v, next %q", p, after, page, len(ids), ids, next)
					}
					got = append(got, ids...)
					if after = next; after == "" || page > n {
						break
					}
				}
				w := want[tn.name]
				if strings.HasPrefix(p, "/v1/search") { // in id order
					w = slices.Sorted(slices.Values(w))
				}
				if !slices.Equal(got, w) {
					t.Errorf("GET %s by pages: %v, want %v", p, got, w)
				}
			}
			ids, examined, err := projectortest.ListExamined(r, tn.name, 5)
			if err != nil || examined != 5 || len(ids) != 5 {
				t.Errorf("a page of 5 of %s's list read %d index entries for %v (%v), want 5", tn.name, examined, ids, err)
			}
		})
	}
}

package projector

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/sessionlog/sessionlog/internal/httpauth"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// A request bearing a tenant's token (httpauth.RequireTenants) sees only
// that tenant's sessions (ADR 010), and a token naming agents of the
// tenant only those of its sessions one of the agents may read (sees): a
// session it may not see answers exactly as a missing one, lists, search
// and the audit leave them out, and the fleet overview and every action
// are refused. Ids are the stored ones (_T<tenant>_<id>; the default
// tenant's are plain), as the rest of the API serves them: the events,
// exports and replays carry them as stored.

// ownedBy reports whether the session stored as id is tenant's: a stored
// id _T<tenant>_<id> is that tenant's, any other id not beginning with
// _T is the default tenant's.
func ownedBy(tenant, id string) bool {
	t, _ := api.WireOf(id)
	if t == "" {
		return tenant == api.DefaultTenant && !strings.HasPrefix(id, api.TenantIDPrefix)
	}
	return t == tenant
}

// sees is the one rule of what a tenant's token may see: a session of its
// tenant (ownedBy) and, when the token names agents, one that one of them
// may read by api.Authorize (it owns it, or the session grants it), as the
// session's summary sum says (nil: none, as for a missing session). A
// session without an owner (an operator's, or made before owners) is
// seen by the tenant's token alone, not by a token of agents, although
// api.Authorize lets every agent of the default tenant use it: such a
// token names the sessions of its agents, and that session is none's.
func sees(tenant string, agents []string, id string, sum *Summary) bool {
	if !ownedBy(tenant, id) {
		return false
	}
	if agents == nil {
		return true
	}
	if sum == nil || sum.Owner == nil {
		return false
	}
	meta := &schema.SessionCreated{Owner: sum.Owner, Grants: sum.Grants}
	return slices.ContainsFunc(agents, func(a string) bool {
		return api.Authorize(api.Caller{Tenant: tenant, Agent: a}, id, meta) == nil
	})
}

// visible is the test of the sessions the request of r may see, read in
// rd's snapshot: nil for the operator (all). A summary it cannot read is
// not seen.
func visible(r *http.Request, rd reader) func(id string) bool {
	t := httpauth.TenantOf(r.Context())
	if t == "" {
		return nil
	}
	agents := httpauth.AgentsOf(r.Context())
	return func(id string) bool {
		if agents == nil {
			return sees(t, nil, id, nil)
		}
		sum, err := rd.summary(id)
		return err == nil && sees(t, agents, id, sum)
	}
}

// tenantScope refuses what a tenant's token may not ask for: a session it
// does not see (not_found, as a missing one: the check runs before any
// other, the erased answer included; for a token of agents, an erased
// session has no summary left and is not found), the overview and any
// request but a read (forbidden).
func (s *Service) tenantScope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := httpauth.TenantOf(r.Context())
		if tenant == "" {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			apiError(w, http.StatusForbidden, schema.CodeForbidden, "a tenant's token reads only: actions need the operator's")
			return
		}
		if r.URL.Path == "/v1/overview" {
			apiError(w, http.StatusForbidden, schema.CodeForbidden, "the fleet overview is the operator's")
			return
		}
		// The {id} segment as the mux reads it (split on the escaped path,
		// then unescaped) and as refuseErased reads it (split on the
		// unescaped path): a %2F makes them differ.
		for _, id := range []string{pathID(r.URL.EscapedPath(), true), pathID(r.URL.Path, false)} {
			if !schema.ValidSessionID(id) {
				continue
			}
			seen := ownedBy(tenant, id)
			if seen && httpauth.AgentsOf(r.Context()) != nil {
				if err := s.view(func(rd reader) error { seen = visible(r, rd)(id); return nil }); err != nil {
					s.internal(w, err)
					return
				}
			}
			if !seen {
				apiError(w, http.StatusNotFound, schema.CodeNotFound, "no session "+id)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// pathID is the first segment after /v1/sessions/ of path ("" if none),
// unescaped when escaped.
func pathID(path string, escaped bool) string {
	rest, ok := strings.CutPrefix(path, "/v1/sessions/")
	if !ok {
		return ""
	}
	seg, _, _ := strings.Cut(rest, "/")
	if !escaped {
		return seg
	}
	id, err := url.PathUnescape(seg)
	if err != nil {
		return ""
	}
	return id
}

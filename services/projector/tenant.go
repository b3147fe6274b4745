package projector

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/sessionlog/sessionlog/internal/httpauth"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// A request bearing a tenant's token (httpauth.RequireTenants) sees only
// that tenant's sessions (ADR 010): a session of another tenant answers
// exactly as a missing one, lists, search and the audit leave them out,
// and the fleet overview and every action are refused. Ids are the stored
// ones (_T<tenant>_<id>; the default tenant's are plain), as the rest of
// the API serves them: the events, exports and replays carry them as
// stored.

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

// visible is the test of the sessions the request of r may see: nil for
// the operator (all).
func visible(r *http.Request) func(id string) bool {
	t := httpauth.TenantOf(r.Context())
	if t == "" {
		return nil
	}
	return func(id string) bool { return ownedBy(t, id) }
}

// tenantScope refuses what a tenant's token may not ask for: another
// tenant's session (not_found, as a missing one: the check runs before
// any other, the erased answer included), the overview and any request
// but a read (forbidden).
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
			if schema.ValidSessionID(id) && !ownedBy(tenant, id) {
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

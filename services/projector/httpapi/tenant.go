package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/sessionlog/sessionlog/internal/httpauth"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// A request bearing a tenant's token (httpauth.RequireTenants) sees only
// that tenant's sessions (ADR 010), and a token naming agents of the
// tenant only those of its sessions one of the agents may read (Sees): a
// session it may not see answers exactly as a missing one, lists, search
// and the audit leave them out, and the fleet overview and every action
// are refused. Such a request names the sessions as the tenant's agents
// do (names): <id> for the session stored as _T<tenant>_<id>, in its
// paths and query and in every answer but the stored events themselves,
// which go out as stored, as sessions.api.read gives them to an agent.

// names is how a request names sessions: a token of a tenant as the
// tenant's agents do (api.TenantWireID: a tenant other than the default
// by the ids without its prefix), the operator's (tenant "") by the
// stored ids.
type names struct{ tenant string }

func namesOf(r *http.Request) names { return names{tenant: httpauth.TenantOf(r.Context())} }

// scoped: n names sessions otherwise than by their stored ids.
func (n names) scoped() bool { return api.Caller{Tenant: n.tenant}.Scoped() }

// wire is the request's name of the session stored as id. An id that is
// not the tenant's (the parent an operator forked a tenant's session
// from) has no other name than its stored id.
func (n names) wire(id string) string { return api.TenantWireID(n.tenant, id) }

// stored is the stored id of the session the request names id.
func (n names) stored(id string) string { return api.TenantStoredID(n.tenant, id) }

// text is a message naming stored ids as the request names them.
func (n names) text(s string) string { return api.TenantWireText(n.tenant, s) }

// summary names sum's ids as the request does.
func (n names) summary(sum *store.Summary) {
	if !n.scoped() {
		return
	}
	sum.SessionID = n.wire(sum.SessionID)
	if sum.Parent != nil {
		p := *sum.Parent
		p.SessionID = n.wire(p.SessionID)
		sum.Parent = &p
	}
	if sum.Problem != nil {
		p := *sum.Problem
		p.Message = n.text(p.Message)
		sum.Problem = &p
	}
}

// namedErrors writes a tenant's error answers (status 400 and over:
// apiError's JSON, written whole) naming its sessions by its ids, as
// whatever wrote them had them (a log's or the judge's message).
type namedErrors struct {
	http.ResponseWriter
	n      names
	status int
}

func (w *namedErrors) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *namedErrors) Write(p []byte) (int, error) {
	if w.status < http.StatusBadRequest {
		return w.ResponseWriter.Write(p)
	}
	if _, err := w.ResponseWriter.Write([]byte(w.n.text(string(p)))); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *namedErrors) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap gives http.ResponseController the writer underneath.
func (w *namedErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ownedBy reports whether the session stored as id is tenant's
// (tenantOf).
func ownedBy(tenant, id string) bool { return api.TenantOf(id) == tenant }

// Sees is the one rule of what a tenant's token may see: a session of its
// tenant (ownedBy) and, when the token names agents, one that one of them
// may read by api.Authorize (it owns it, or the session grants it), as the
// session's summary sum says (nil: none, as for a missing session). A
// session without an owner (an operator's, or made before owners) is
// seen by the tenant's token alone, not by a token of agents, although
// api.Authorize lets every agent of the default tenant use it: such a
// token names the sessions of its agents, and that session is none's.
func Sees(tenant string, agents []string, id string, sum *store.Summary) bool {
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

// listed is the test of the sessions a list, search, tree or a detail's
// children shows to the request of r: those it may see (visible) that are
// not erased. An erased session is in no list from the moment reads
// refuse it, before the fold has removed its views (DESIGN.md section 5).
func (s *Server) listed(r *http.Request, rd reader) func(id string) bool {
	return s.listedTo(httpauth.TenantOf(r.Context()), httpauth.AgentsOf(r.Context()), rd)
}

// listedTo is listed for a tenant ("": the operator) and its agents (nil:
// the tenant's token).
func (s *Server) listedTo(tenant string, agents []string, rd reader) func(id string) bool {
	keep := visibleTo(tenant, agents, rd)
	return func(id string) bool { return !s.v.Erased(id) && (keep == nil || keep(id)) }
}

// visible is the test of the sessions the request of r may see, read in
// rd's snapshot: nil for the operator (all). A summary it cannot read is
// not seen.
func visible(r *http.Request, rd reader) func(id string) bool {
	return visibleTo(httpauth.TenantOf(r.Context()), httpauth.AgentsOf(r.Context()), rd)
}

// visibleTo is visible for a tenant ("": the operator) and its agents
// (nil: the tenant's token).
func visibleTo(t string, agents []string, rd reader) func(id string) bool {
	if t == "" {
		return nil
	}
	return func(id string) bool {
		if agents == nil {
			return Sees(t, nil, id, nil)
		}
		sum, err := rd.summary(id)
		return err == nil && Sees(t, agents, id, sum)
	}
}

// tenantScope refuses what a tenant's token may not ask for: a session it
// does not see (not_found, as a missing one: the check runs before any
// other, the erased answer included; for a token of agents, an erased
// session has no summary left and is not found), the overview and any
// request but a read (forbidden). A path naming a session names it as
// the tenant does: it goes on with the stored id (the tenant's prefix
// before its {id} segment, in the path as the mux reads it and as
// refuseErased does), so no id the tenant types reaches another tenant's
// session.
func (s *Server) tenantScope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := httpauth.TenantOf(r.Context())
		if tenant == "" {
			next.ServeHTTP(w, r)
			return
		}
		n := namesOf(r)
		if n.scoped() {
			w = &namedErrors{ResponseWriter: w, n: n}
			r = storedPath(r, n)
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

// storedPath is r with the {id} segment of a /v1/sessions/{id} path
// named by its stored id (n.stored), in the path and in its escaped form
// alike.
func storedPath(r *http.Request, n names) *http.Request {
	const p = "/v1/sessions/"
	rest, ok := strings.CutPrefix(r.URL.Path, p)
	esc, eok := strings.CutPrefix(r.URL.EscapedPath(), p)
	if !ok || !eok || rest == "" || esc == "" || esc[0] == '/' {
		return r
	}
	r = r.Clone(r.Context())
	r.URL.Path = p + n.stored(rest)
	r.URL.RawPath = p + n.stored(esc)
	return r
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

// ListAs is sessions.api.list (DESIGN.md section 12) for caller, as the
// server named it (api.CallerOf): the sessions an agent may read, by the
// rule of a token naming that agent alone (Sees: those it owns and those
// granted to it, of its tenant), named as it names them; an operator's
// (no caller) every session, by its stored id. A page is GET
// /v1/sessions's, without its status filter.
func (s *Server) ListAs(caller api.Caller, req api.ListRequest) (api.ListReply, error) {
	limit := req.Limit
	if limit == 0 {
		limit = api.DefaultListLimit
	}
	if limit < 1 || limit > api.MaxListLimit {
		return api.ListReply{}, schema.Errorf(schema.CodeBadRequest, "limit must be from 1 to %d", api.MaxListLimit)
	}
	var agents []string
	if !caller.Operator() {
		agents = []string{caller.Agent}
	}
	page, reads, err := s.list(caller.Tenant, agents, "", req.After, limit)
	s.met.listReads.WithLabelValues("index").Add(float64(reads.Entries))
	s.met.listReads.WithLabelValues("summary").Add(float64(reads.Summaries))
	if errors.Is(err, errBadCursor) {
		return api.ListReply{}, schema.Errorf(schema.CodeBadRequest, "after must be a cursor from next")
	}
	if err != nil {
		return api.ListReply{}, err
	}
	out := api.ListReply{Sessions: make([]api.ListedSession, 0, len(page.Sessions)), Next: page.Next}
	for _, sum := range page.Sessions {
		out.Sessions = append(out.Sessions, api.ListedSession{SessionID: sum.SessionID, Status: sum.Status, LastSeq: sum.LastSeq})
	}
	return out, nil
}

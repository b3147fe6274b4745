// Package httpauth is the one bearer-token rule of sessionlog's HTTP
// servers: `sessionlog up`, `sessionlog projector` and the projector's own
// handler all guard their paths with Require, so a client that one accepts
// the other accepts too.
//
// The rule: with a token configured, every path but the probes (/healthz
// and /readyz) and the dashboard page itself (a GET or HEAD of / and of
// /assets/...: its markup, script, styles and vendored files, no data)
// needs the token in the Authorization header with the Bearer scheme, its
// name in any case (RFC 6750 section 2.1; schemes are case-insensitive,
// RFC 9110 11.1). Nothing else carries it: not a query parameter
// (RFC 6750 section 2.3's access_token, which leaks into logs, history
// and Referer headers) and not a cookie (which a browser attaches by
// itself, so any page could make the dashboard act). The page asks for
// the token and sends it in that header on every request, its live
// updates too (a fetch-read event stream, not an EventSource, which
// cannot set headers).
//
// Tokens are compared in constant time (of their SHA-256 sums, so not even
// the length leaks).
//
// That token is the operator's: it sees everything. Tenant tokens
// (RequireTenants) name a tenant, and optionally agents of it, are taken
// from the same header, and put the tenant and agents in the request's
// context (TenantOf, AgentsOf) for the handler to scope what it serves: a
// tenant's token uses the dashboard as the operator's does and sees only
// what the handler lets it.
package httpauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
)

// open are the paths served without a token: liveness and readiness probes.
var open = map[string]bool{"/healthz": true, "/readyz": true}

// page reports whether r asks for the dashboard page itself, which is
// served without a token: it holds no data, and asks for the token it
// then sends in the Authorization header. A path that is not clean
// (/assets/../v1/...) is not the page, whatever a mux would make of it.
func page(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := r.URL.Path
	return p == "/" || strings.HasPrefix(p, "/assets/") && path.Clean(p) == p
}

// operatorOnly are the paths a tenant's token may not read: the metrics
// count every tenant's sessions and events.
var operatorOnly = map[string]bool{"/metrics": true}

// Require guards next with token; an empty token leaves next open.
func Require(token string, next http.Handler) http.Handler {
	return RequireTenants(token, nil, next)
}

type tenantKey struct{}

// scope is what a tenant token names: its tenant, and its agents (none:
// every agent of the tenant).
type scope struct {
	tenant string
	agents []string
}

// TenantOf is the tenant whose token authorised the request of ctx, ""
// for the operator's token (or none configured).
func TenantOf(ctx context.Context) string {
	sc, _ := ctx.Value(tenantKey{}).(scope)
	return sc.tenant
}

// AgentsOf is the agents the tenant token of the request of ctx names
// (sorted, each once): nil for a token of the whole tenant, or the
// operator's.
func AgentsOf(ctx context.Context) []string {
	sc, _ := ctx.Value(tenantKey{}).(scope)
	return sc.agents
}

// ParseTenantToken reads a --tenant-token value: TENANT=TOKEN, a token of
// the whole tenant, or TENANT:AGENT[,AGENT...]=TOKEN, a token of those
// agents of the tenant. A tenant name is of letters, digits and '-' (NATS
// account names as deploy/nats allows them for tenants: no '_', which ends
// the tenant in a stored session id, and no ':'), an agent name (a NATS
// user) of letters, digits, '-' and '_', and a token has at least 16
// bytes. names is the value's left side with the agents sorted, each once:
// what RequireTenants takes for the token.
func ParseTenantToken(v string) (names, token string, err error) {
	names, token, ok := strings.Cut(v, "=")
	tenant, list, hasAgents := strings.Cut(names, ":")
	if !ok || tenant == "" {
		return "", "", errors.New("want TENANT=TOKEN or TENANT:AGENT[,AGENT...]=TOKEN")
	}
	if !validName(tenant, false) {
		return "", "", fmt.Errorf("tenant %q: letters, digits and '-' only", tenant)
	}
	if hasAgents {
		agents := strings.Split(list, ",")
		for _, a := range agents {
			if a == "" || !validName(a, true) {
				return "", "", fmt.Errorf("tenant %s: agent %q: letters, digits, '-' and '_' only (AGENT[,AGENT...] after the ':')", tenant, a)
			}
		}
		slices.Sort(agents)
		names = tenant + ":" + strings.Join(slices.Compact(agents), ",")
	}
	if len(token) < 16 {
		return "", "", fmt.Errorf("tenant %s: the token must have at least 16 bytes", tenant)
	}
	return names, token, nil
}

// validName: a tenant's name (letters, digits, '-'), or with underscore
// an agent's (the same and '_').
func validName(s string, underscore bool) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || underscore && r == '_') {
			return false
		}
	}
	return true
}

// scopeOf splits what ParseTenantToken's names name.
func scopeOf(names string) scope {
	tenant, list, ok := strings.Cut(names, ":")
	if !ok {
		return scope{tenant: tenant}
	}
	return scope{tenant: tenant, agents: strings.Split(list, ",")}
}

// RequireTenants guards next with the operator's token and tenant tokens
// (token -> what it names, ParseTenantToken's names: TENANT or
// TENANT:AGENT[,AGENT...]), each taken from the Authorization header
// alone; a tenant token's tenant and agents ride in the request's context
// (TenantOf, AgentsOf). Tenant tokens need an operator token: without one
// every request would be the operator's.
func RequireTenants(token string, tenants map[string]string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	eq := func(v string) bool { return equal(token, v) }
	scopes := make(map[string]scope, len(tenants))
	for tok, names := range tenants {
		scopes[tok] = scopeOf(names)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if open[r.URL.Path] || page(r) {
			next.ServeHTTP(w, r)
			return
		}
		if v, ok := bearer(r.Header.Get("Authorization")); ok {
			if eq(v) {
				next.ServeHTTP(w, r)
				return
			}
			// Every tenant token is compared: the time taken says nothing of
			// which one matched.
			var sc scope
			for tok, t := range scopes {
				if equal(tok, v) {
					sc = t
				}
			}
			if sc.tenant != "" && operatorOnly[r.URL.Path] {
				refuse(w, http.StatusForbidden, "forbidden", "the metrics are the operator's")
				return
			}
			if sc.tenant != "" {
				next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, sc)))
				return
			}
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="sessionlog"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":{"code":"unauthorized","message":"a valid bearer token is required"}}` + "\n"))
	})
}

// equal compares a given token with the configured one in constant time
// (of their SHA-256 sums, so not even the length leaks).
func equal(token, v string) bool {
	want, got := sha256.Sum256([]byte(token)), sha256.Sum256([]byte(v))
	return v != "" && subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// bearer returns the credentials of an Authorization header with the Bearer
// scheme, whatever the case of the scheme's name.
func bearer(h string) (string, bool) {
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	return strings.TrimLeft(cred, " "), true
}

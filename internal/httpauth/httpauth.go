// Package httpauth is the one bearer-token rule of sessionlog's HTTP
// servers: `sessionlog up`, `sessionlog projector` and the projector's own
// handler all guard their paths with Require, so a client that one accepts
// the other accepts too.
//
// The rule: with a token configured, every path but /healthz and /readyz
// (probes) needs the token, given as any of
//   - the Authorization header with the Bearer scheme, its name in any case
//     (RFC 6750 section 2.1; schemes are case-insensitive, RFC 9110 11.1);
//   - the access_token query parameter (RFC 6750 section 2.3), or token,
//     its older name: browsers cannot set headers on an EventSource;
//   - the cookie a query-parameter token sets, so the dashboard's later
//     requests carry it.
//
// Tokens are compared in constant time (of their SHA-256 sums, so not even
// the length leaks).
//
// That token is the operator's: it sees everything. Tenant tokens
// (RequireTenants) name a tenant, are taken from the Authorization header
// alone, and put the tenant in the request's context (TenantOf) for the
// handler to scope what it serves.
package httpauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Cookie is the name of the cookie a query-parameter token sets.
const Cookie = "sessionlog_token"

// open are the paths served without a token: liveness and readiness probes.
var open = map[string]bool{"/healthz": true, "/readyz": true}

// operatorOnly are the paths a tenant's token may not read: the metrics
// count every tenant's sessions and events.
var operatorOnly = map[string]bool{"/metrics": true}

// Require guards next with token; an empty token leaves next open.
func Require(token string, next http.Handler) http.Handler {
	return RequireTenants(token, nil, next)
}

type tenantKey struct{}

// TenantOf is the tenant whose token authorised the request of ctx, ""
// for the operator's token (or none configured).
func TenantOf(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// ParseTenantToken reads a --tenant-token value, TENANT=TOKEN: a tenant
// name of letters, digits and '-' (NATS account names as deploy/nats
// allows them for tenants: no '_', which ends the tenant in a stored
// session id) and a token of at least 16 bytes.
func ParseTenantToken(v string) (tenant, token string, err error) {
	tenant, token, ok := strings.Cut(v, "=")
	if !ok || tenant == "" {
		return "", "", errors.New("want TENANT=TOKEN")
	}
	for _, r := range tenant {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return "", "", fmt.Errorf("tenant %q: letters, digits and '-' only", tenant)
		}
	}
	if len(token) < 16 {
		return "", "", fmt.Errorf("tenant %s: the token must have at least 16 bytes", tenant)
	}
	return tenant, token, nil
}

// RequireTenants guards next with the operator's token and tenant tokens
// (token -> tenant). A tenant token counts only in the Authorization
// header (never as a cookie or query parameter, which a browser keeps and
// sends by itself), and its tenant rides in the request's context
// (TenantOf). Tenant tokens need an operator token: without one every
// request would be the operator's.
func RequireTenants(token string, tenants map[string]string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	eq := func(v string) bool { return equal(token, v) }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if open[r.URL.Path] {
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
			tenant := ""
			for tok, t := range tenants {
				if equal(tok, v) {
					tenant = t
				}
			}
			if tenant != "" && operatorOnly[r.URL.Path] {
				refuse(w, http.StatusForbidden, "forbidden", "the metrics are the operator's")
				return
			}
			if tenant != "" {
				next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant)))
				return
			}
		}
		if c, err := r.Cookie(Cookie); err == nil && eq(c.Value) {
			next.ServeHTTP(w, r)
			return
		}
		if q := r.URL.Query(); eq(q.Get("access_token")) || eq(q.Get("token")) {
			http.SetCookie(w, &http.Cookie{Name: Cookie, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			next.ServeHTTP(w, r)
			return
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

package httpauth_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/httpauth"
)

// TestRequire is the token rule of every sessionlog HTTP server (up, the
// projector command and the projector's own handler use Require): the
// token counts in the Authorization header alone, never as a query
// parameter or a cookie, and no answer sets a cookie; the probes and the
// dashboard page itself are open.
func TestRequire(t *testing.T) {
	h := httpauth.Require("s3cret", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	for _, c := range []struct {
		name, method, path, hdr, cookie string
		want                            int
	}{
		{name: "NoToken", path: "/v1/sessions", want: 401},
		{name: "WrongBearer", path: "/v1/sessions", hdr: "Bearer wrong", want: 401},
		{name: "Bearer", path: "/v1/sessions", hdr: "Bearer s3cret", want: 204},
		{name: "LowerCaseBearer", path: "/v1/sessions", hdr: "bearer s3cret", want: 204},
		{name: "UpperCaseBearer", path: "/v1/sessions", hdr: "BEARER s3cret", want: 204},
		{name: "BearerExtraSpaces", path: "/v1/sessions", hdr: "Bearer   s3cret", want: 204},
		{name: "BasicScheme", path: "/v1/sessions", hdr: "Basic s3cret", want: 401},
		{name: "NoScheme", path: "/v1/sessions", hdr: "s3cret", want: 401},
		{name: "EmptyBearer", path: "/v1/sessions", hdr: "Bearer ", want: 401},
		{name: "TokenPrefix", path: "/v1/sessions", hdr: "Bearer s3cre", want: 401},
		{name: "TokenLonger", path: "/v1/sessions", hdr: "Bearer s3crets", want: 401},
		{name: "TokenQuery", path: "/v1/sessions?token=s3cret", want: 401},
		{name: "AccessTokenQuery", path: "/v1/sessions/s/watch?access_token=s3cret", want: 401},
		{name: "AccessTokenQueryMetrics", path: "/metrics?access_token=s3cret", want: 401},
		{name: "Cookie", path: "/v1/sessions", cookie: "s3cret", want: 401},
		{name: "WrongBearerGoodQuery", path: "/v1/sessions?access_token=s3cret", hdr: "Bearer wrong", want: 401},
		{name: "Healthz", path: "/healthz", want: 204},
		{name: "Readyz", path: "/readyz", want: 204},
		{name: "Metrics", path: "/metrics", want: 401},
		{name: "HealthzSubpath", path: "/healthz/x", want: 401},
		{name: "Dashboard", path: "/", want: 204},
		{name: "DashboardHead", method: http.MethodHead, path: "/", want: 204},
		{name: "DashboardAddress", path: "/?s=x&e=3", want: 204},
		{name: "DashboardOldTokenLink", path: "/?token=s3cret", want: 204},
		{name: "DashboardPost", method: http.MethodPost, path: "/", want: 401},
		{name: "Asset", path: "/assets/uplot-1.6.32.min.js", want: 204},
		{name: "AssetsListing", path: "/assets/", want: 401},
		{name: "AssetsTraversal", path: "/assets/../v1/sessions", want: 401},
		{name: "AssetsLookalike", path: "/assetsx/a.js", want: 401},
		{name: "Favicon", path: "/favicon.ico", want: 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := serveMethod(h, c.method, c.path, c.hdr, c.cookie)
			if got := rec.Code; got != c.want {
				t.Fatalf("%s %q: %d, want %d", c.path, c.hdr, got, c.want)
			}
			if got := rec.Header().Get("Set-Cookie"); got != "" {
				t.Fatalf("sets a cookie: %q", got)
			}
			if c.want == 401 && rec.Header().Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
}

// serve is h's answer to a GET of path with an Authorization header hdr
// and a cookie of the name the dashboard once set, each when not "".
func serve(h http.Handler, path, hdr, cookie string) *httptest.ResponseRecorder {
	return serveMethod(h, http.MethodGet, path, hdr, cookie)
}

// serveMethod is serve with the method ("": GET).
func serveMethod(h http.Handler, method, path, hdr, cookie string) *httptest.ResponseRecorder {
	if method == "" {
		method = http.MethodGet
	}
	r := httptest.NewRequest(method, path, nil)
	if hdr != "" {
		r.Header.Set("Authorization", hdr)
	}
	if cookie != "" {
		r.AddCookie(&http.Cookie{Name: "sessionlog_token", Value: cookie})
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// No token configured: everything is open.
func TestRequireWithoutToken(t *testing.T) {
	h := httpauth.Require("", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/sessions", nil))
	if rec.Code != 204 {
		t.Fatalf("%d", rec.Code)
	}
}

// TestRequireTenants: a tenant's token, in the Authorization header alone,
// passes with its tenant in the request's context; the operator's token
// passes with none; neither passes as a query parameter or cookie; the
// dashboard page is open to both, and to no token.
func TestRequireTenants(t *testing.T) {
	h := httpauth.RequireTenants("s3cret", map[string]string{"acme-token-0123456789": "acme", "bob-token-0123456789": "acme:bob,carol"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Tenant", httpauth.TenantOf(r.Context()))
		w.Header().Set("X-Agents", strings.Join(httpauth.AgentsOf(r.Context()), ","))
		w.WriteHeader(204)
	}))
	for _, c := range []struct {
		name, path, hdr, cookie string
		want                    int
		tenant, agents          string
	}{
		{name: "Agents", path: "/v1/sessions", hdr: "Bearer bob-token-0123456789", want: 204, tenant: "acme", agents: "bob,carol"},
		{name: "AgentsQuery", path: "/v1/sessions?access_token=bob-token-0123456789", want: 401},
		{name: "AgentsMetrics", path: "/metrics", hdr: "Bearer bob-token-0123456789", want: 403},
		{name: "Tenant", path: "/v1/sessions", hdr: "Bearer acme-token-0123456789", want: 204, tenant: "acme"},
		{name: "Operator", path: "/v1/sessions", hdr: "Bearer s3cret", want: 204},
		{name: "TenantQuery", path: "/v1/sessions?access_token=acme-token-0123456789", want: 401},
		{name: "TenantTokenQuery", path: "/v1/sessions?token=acme-token-0123456789", want: 401},
		{name: "TenantCookie", path: "/v1/sessions", cookie: "acme-token-0123456789", want: 401},
		{name: "TenantOverOperatorCookie", path: "/v1/sessions", hdr: "Bearer acme-token-0123456789", cookie: "s3cret", want: 204, tenant: "acme"},
		{name: "OperatorCookie", path: "/v1/sessions", cookie: "s3cret", want: 401},
		{name: "OperatorQuery", path: "/v1/sessions?token=s3cret", want: 401},
		{name: "TenantDashboard", path: "/", hdr: "Bearer acme-token-0123456789", want: 204},
		{name: "Dashboard", path: "/", want: 204},
		{name: "WrongBearer", path: "/v1/sessions", hdr: "Bearer acme-token-012345678", want: 401},
		{name: "TenantMetrics", path: "/metrics", hdr: "Bearer acme-token-0123456789", want: 403},
		{name: "OperatorMetrics", path: "/metrics", hdr: "Bearer s3cret", want: 204},
		{name: "TenantReadyz", path: "/readyz", hdr: "Bearer acme-token-0123456789", want: 204},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := serve(h, c.path, c.hdr, c.cookie)
			if rec.Code != c.want || rec.Header().Get("X-Tenant") != c.tenant || rec.Header().Get("X-Agents") != c.agents {
				t.Fatalf("status %d tenant %q agents %q, want %d %q %q", rec.Code, rec.Header().Get("X-Tenant"), rec.Header().Get("X-Agents"), c.want, c.tenant, c.agents)
			}
		})
	}
}

// TestParseTenantToken: TENANT=TOKEN names a tenant, TENANT:AGENT,...=TOKEN
// agents of it (sorted, each once); a bad name, an empty agent or a short
// token is refused.
func TestParseTenantToken(t *testing.T) {
	for v, want := range map[string]string{
		"acme=acme-token-0123456789":               "acme",
		"acme:bob=acme-token-0123456789":           "acme:bob",
		"acme:carol,bob,carol=acme-token-01234567": "acme:bob,carol",
		"acme:b_1=x:y=acme-token-0123456789":       "acme:b_1",
	} {
		names, token, err := httpauth.ParseTenantToken(v)
		if err != nil || names != want || token != v[strings.Index(v, "=")+1:] {
			t.Errorf("%q: %q %q %v, want %q", v, names, token, err, want)
		}
	}
	for _, v := range []string{"", "acme", "=acme-token-0123456789", "ac_me=acme-token-0123456789", "acme=short",
		"acme:=acme-token-0123456789", "acme:bob,=acme-token-0123456789", ":bob=acme-token-0123456789", "acme:b.b=acme-token-0123456789", "acme:bob:carol=acme-token-0123456789"} {
		if _, _, err := httpauth.ParseTenantToken(v); err == nil {
			t.Errorf("%q: no error", v)
		}
	}
}

package httpauth_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sessionlog/sessionlog/internal/httpauth"
)

// TestRequire is the token rule of every sessionlog HTTP server (up, the
// projector command and the projector's own handler use Require).
func TestRequire(t *testing.T) {
	h := httpauth.Require("s3cret", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	for _, c := range []struct {
		name, path, hdr, cookie string
		want                    int
		setsCookie              bool
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
		{name: "TokenQuery", path: "/?token=s3cret", want: 204, setsCookie: true},
		{name: "AccessTokenQuery", path: "/v1/sessions/s/watch?access_token=s3cret", want: 204, setsCookie: true},
		{name: "WrongAccessToken", path: "/v1/sessions?access_token=wrong", want: 401},
		{name: "EmptyAccessToken", path: "/v1/sessions?access_token=", want: 401},
		{name: "Cookie", path: "/v1/sessions", cookie: "s3cret", want: 204},
		{name: "WrongCookie", path: "/v1/sessions", cookie: "wrong", want: 401},
		{name: "WrongBearerGoodQuery", path: "/v1/sessions?access_token=s3cret", hdr: "Bearer wrong", want: 204, setsCookie: true},
		{name: "Healthz", path: "/healthz", want: 204},
		{name: "Readyz", path: "/readyz", want: 204},
		{name: "Metrics", path: "/metrics", want: 401},
		{name: "Dashboard", path: "/", want: 401},
		{name: "HealthzSubpath", path: "/healthz/x", want: 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", c.path, nil)
			if c.hdr != "" {
				r.Header.Set("Authorization", c.hdr)
			}
			if c.cookie != "" {
				r.AddCookie(&http.Cookie{Name: httpauth.Cookie, Value: c.cookie})
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if got := rec.Code; got != c.want {
				t.Fatalf("%s %q: %d, want %d", c.path, c.hdr, got, c.want)
			}
			if got := rec.Header().Get("Set-Cookie") != ""; got != c.setsCookie {
				t.Fatalf("sets a cookie: %v, want %v", got, c.setsCookie)
			}
			if c.want == 401 && rec.Header().Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
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

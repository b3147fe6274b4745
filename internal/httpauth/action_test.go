package httpauth_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sessionlog/sessionlog/internal/httpauth"
)

// TestAction: a state-changing request needs the action header, its own
// origin, and the token in the Authorization header; what a browser
// attaches by itself (a cookie, of the name the dashboard once set) is not
// enough.
func TestAction(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	for _, c := range []struct {
		name, token, bearer, cookie, origin string
		header                              bool
		want                                int
	}{
		{name: "All", token: "s3cret", bearer: "s3cret", header: true, want: 204},
		{name: "SameOrigin", token: "s3cret", bearer: "s3cret", header: true, origin: "http://dash.example", want: 204},
		{name: "NoHeader", token: "s3cret", bearer: "s3cret", want: 403},
		{name: "OtherOrigin", token: "s3cret", bearer: "s3cret", header: true, origin: "http://evil.example", want: 403},
		{name: "NullOrigin", token: "s3cret", bearer: "s3cret", header: true, origin: "null", want: 403},
		{name: "CookieOnly", token: "s3cret", cookie: "s3cret", header: true, want: 401},
		{name: "WrongBearer", token: "s3cret", bearer: "nope", header: true, want: 401},
		{name: "NoTokenConfigured", header: true, want: 204},
		{name: "NoTokenConfiguredNoHeader", want: 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "http://dash.example/v1/sessions/s/resume", nil)
			if c.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+c.bearer)
			}
			if c.cookie != "" {
				req.AddCookie(&http.Cookie{Name: "sessionlog_token", Value: c.cookie})
			}
			if c.origin != "" {
				req.Header.Set("Origin", c.origin)
			}
			if c.header {
				req.Header.Set(httpauth.ActionHeader, "1")
			}
			w := httptest.NewRecorder()
			httpauth.Action(c.token, ok).ServeHTTP(w, req)
			if w.Code != c.want {
				t.Fatalf("status %d, want %d: %s", w.Code, c.want, w.Body)
			}
		})
	}
}

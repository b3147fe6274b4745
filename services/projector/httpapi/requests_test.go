package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// TestBadRequests: requests the HTTP side refuses (400) or finds nothing
// for (404), beside ones it answers, over the views of one session (the
// HTTP side alone: projectortest.Serve).
func TestBadRequests(t *testing.T) {
	l := projectortest.NewMem(t)
	fleet := gen.NewFleet("b", 1, 1, projectortest.T0)
	var events []schema.Envelope
	for range 20 {
		events = append(events, fleet.Next())
	}
	projectortest.AppendMem(t, l, events...)
	r := projectortest.Serve(t, l)
	for path, want := range map[string]int{
		"/v1/sessions/b-0":                                   200,
		"/v1/sessions/nope":                                  404,
		"/v1/sessions/nope/events":                           404,
		"/v1/sessions/nope/context":                          404,
		"/v1/sessions/nope/watch":                            404,
		"/v1/sessions/a.b":                                   400,
		"/v1/sessions/..%2F..%2Fetc%2Fpasswd":                400,
		"/v1/sessions/..%2F..%2Fetc%2Fpasswd/events":         400,
		"/v1/sessions?status=bogus":                          400,
		"/v1/sessions?limit=0":                               400,
		"/v1/sessions?limit=x":                               400,
		"/v1/sessions?after=..%2F":                           400,
		"/v1/sessions/b-0/events?after=-1":                   400,
		"/v1/sessions/b-0/events?after=abc":                  400,
		"/v1/sessions/b-0/events?after=99999999999999999999": 400,
		"/v1/sessions/b-0/events?after=18446744073709551615": 200,
		"/v1/sessions/b-0/events?limit=100000":               400,
		"/v1/sessions/b-0/watch?after=18446744073709551615":  400,
		"/v1/sessions/b-0/watch?after=18446744073709551616":  400,
		"/v1/sessions/b-0/watch?after=-5":                    400,
		"/v1/nothing":                                        404,
		"/static/../../etc/passwd":                           404,
		"/healthz":                                           200,
		"/readyz":                                            200,
	} {
		if code, body := r.Get(t, path); code != want {
			t.Errorf("GET %s: %d, want %d: %s", path, code, want, body)
		}
	}
}

// TestBearerToken: with an operator's token, the probes and the
// dashboard page are open, every other path needs the token, and only
// in the Authorization header (the HTTP side alone: projectortest.Serve).
func TestBearerToken(t *testing.T) {
	r := projectortest.Serve(t, projectortest.NewMem(t), func(c *httpapi.Config) { c.HTTPToken = "s3cret" })
	if code, _ := r.Get(t, "/healthz"); code != 200 {
		t.Fatalf("/healthz without token: %d", code)
	}
	// /readyz is a probe, open like /healthz (the rule of package httpauth).
	if code, _ := r.Get(t, "/readyz"); code != 200 {
		t.Fatalf("/readyz without token: %d", code)
	}
	// The dashboard page itself is served without the token: it holds no
	// data and asks for the token.
	for _, p := range []string{"/", "/?s=x", "/assets/uplot-1.6.32.min.js"} {
		if code, _ := r.Get(t, p); code != 200 {
			t.Fatalf("%s without token: %d", p, code)
		}
	}
	// The token counts in the Authorization header alone: as a query
	// parameter or a cookie it is refused (and no answer sets a cookie).
	for _, p := range []string{"/v1/sessions", "/v1/overview", "/v1/sessions?access_token=s3cret", "/v1/sessions?token=s3cret",
		"/v1/sessions/x/watch?access_token=s3cret", "/v1/sessions/x/events?token=s3cret", "/metrics?access_token=s3cret", "/favicon.ico"} {
		if code, _ := r.Get(t, p); code != 401 {
			t.Fatalf("%s without the token in the header: %d", p, code)
		}
	}
	for _, h := range []http.Header{{"Cookie": {"sessionlog_token=s3cret"}}, {"Authorization": {"Bearer s3cret"}}} {
		req, _ := http.NewRequest("GET", r.Srv.URL+"/v1/sessions?access_token=s3cret", nil)
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := 200
		if h.Get("Authorization") == "" {
			want = 401
		}
		if resp.StatusCode != want || resp.Header.Get("Set-Cookie") != "" {
			t.Fatalf("GET with %v: %d (Set-Cookie %q), want %d and no cookie", h, resp.StatusCode, resp.Header.Get("Set-Cookie"), want)
		}
	}
}

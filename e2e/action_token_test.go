package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// With up --http-token, a dashboard action takes the token only from the
// Authorization header, as the standalone projector's does: up's own
// check once let a cookie or ?token= through, and the action check did
// not know the token, so it let any of them act. Reads take it from the
// header only too.
func TestUpActionTakesTokenOnlyFromAuthorization(t *testing.T) {
	const token = "s3cret-token"
	p := startUp(t, t.TempDir(), nil, "--http-token", token)
	post := func(mod func(*http.Request)) int {
		t.Helper()
		req, _ := http.NewRequest("POST", p.HTTPURL+"/v1/sessions/tok-1/resume", strings.NewReader(`{}`))
		req.Header.Set("X-Sessionlog-Action", "1")
		mod(req)
		c := http.Client{Timeout: 30 * time.Second}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for name, mod := range map[string]func(*http.Request){
		"CookieOnly":  func(q *http.Request) { q.Header.Set("Cookie", "sessionlog_token="+token) },
		"QueryToken":  func(q *http.Request) { q.URL.RawQuery = "token=" + token },
		"AccessToken": func(q *http.Request) { q.URL.RawQuery = "access_token=" + token },
	} {
		if got := post(mod); got != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", name, got)
		}
	}
	// With the header the action runs (the session does not exist: 404).
	if got := post(func(q *http.Request) { q.Header.Set("Authorization", "Bearer "+token) }); got == http.StatusUnauthorized || got == http.StatusForbidden {
		t.Errorf("Authorization header: status %d, want the action to run", got)
	}
	// Reads do not take ?token= either.
	if code, body, err := httpGet(p.HTTPURL + "/v1/sessions?token=" + token); err != nil || code != http.StatusUnauthorized {
		t.Errorf("GET with ?token=: %d %s %v, want 401", code, body, err)
	}
}

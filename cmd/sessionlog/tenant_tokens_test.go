package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/natstest"
)

// TestTenantTokenFlag: --tenant-token is repeatable, takes a tenant's
// token and tokens of agents of it, refuses a tenant (or the same agents
// of it) or a token given twice, and up refuses tenant tokens without the
// operator's --http-token, or equal to it.
func TestTenantTokenFlag(t *testing.T) {
	tt := tenantTokens{}
	for _, v := range []string{"acme=acme-token-0123456789", "beta=beta-token-0123456789", "acme:bob,alice=ab-token-0123456789", "acme:bob=bob-token-0123456789"} {
		if err := tt.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if tt["acme-token-0123456789"] != "acme" || tt["beta-token-0123456789"] != "beta" || tt["ab-token-0123456789"] != "acme:alice,bob" || tt["bob-token-0123456789"] != "acme:bob" {
		t.Fatalf("%v", tt)
	}
	if err := tt.Set("acme=other-token-0123456789"); err == nil {
		t.Error("a tenant given twice")
	}
	if err := tt.Set("acme:alice,bob=other-token-0123456789"); err == nil {
		t.Error("the same agents given twice")
	}
	if err := tt.Set("gamma=beta-token-0123456789"); err == nil {
		t.Error("a token given twice")
	}
	var ue *usageError
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tenant-token", "acme=acme-token-0123456789"}, "needs --http-token"},
		{[]string{"--http-token", "acme-token-0123456789", "--tenant-token", "acme=acme-token-0123456789"}, "is the --http-token"},
	} {
		err := runUp(context.Background(), c.args, io.Discard, io.Discard)
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("up %v: %v, want a usage error saying %q", c.args, err, c.want)
		}
	}
}

// TestTenantTokenThroughCommands: up and the projector command let a
// tenant's token through their own token check to the projector, which
// scopes it: another tenant's session is not found, the overview is
// refused, and so for a token of agents of a tenant; the operator's token
// still sees the overview. Neither command takes a token from the query
// or a cookie, and both serve the dashboard page without one (it asks
// for the token).
func TestTenantTokenThroughCommands(t *testing.T) {
	const op, acme, agent = "operator-token-0123456789", "acme-token-0123456789", "agent-token-0123456789"
	for _, c := range []struct {
		name string
		args func(api string) []string
	}{
		{"projector", func(api string) []string {
			s := natstest.RunServer(t)
			return []string{"projector", "--nats-url", s.ClientURL(), "--http-listen", api, "--data-dir", t.TempDir()}
		}},
		{"up", func(api string) []string {
			return []string{"up", "--data-dir", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http-listen", api}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			api := freeAddr(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			var errb syncBuffer // written by the services' logs while read here
			go func() {
				done <- Main(ctx, append(c.args(api), "--http-token", op, "--tenant-token", "acme="+acme, "--tenant-token", "AGENTS:agent="+agent), io.Discard, &errb)
			}()
			defer func() { cancel(); <-done }()
			get := func(token, path string) (int, string) {
				req, _ := http.NewRequest("GET", "http://"+api+path, nil)
				// "cookie:T": T in the cookie the dashboard once set.
				if c, ok := strings.CutPrefix(token, "cookie:"); ok {
					req.Header.Set("Cookie", "sessionlog_token="+c)
				} else if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return 0, err.Error()
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			natstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
				if code, body := get(op, "/readyz"); code != 200 {
					return fmt.Errorf("readyz %d %s (%s)", code, body, errb.String())
				}
				return nil
			})
			for _, w := range []struct {
				token, path string
				code        int
				has         string
			}{
				{acme, "/v1/sessions", 200, `"sessions":[]`},
				{acme, "/v1/sessions/plain-1/events", 404, `"not_found"`},
				{acme, "/v1/overview", 403, `"forbidden"`},
				{agent, "/v1/sessions", 200, `"sessions":[]`},
				{agent, "/v1/sessions/plain-1/events", 404, `"not_found"`},
				{agent, "/v1/overview", 403, `"forbidden"`},
				{acme, "/metrics", 403, `"forbidden"`},
				{op, "/v1/overview", 200, `"counts"`},
				{op, "/metrics", 200, "sessionlog_"},
				{"", "/", 200, "<!doctype html>"},
				{"", "/v1/sessions?token=" + op, 401, `"unauthorized"`},
				{"", "/v1/sessions?access_token=" + op, 401, `"unauthorized"`},
				{"", "/v1/sessions/x/watch?access_token=" + acme, 401, `"unauthorized"`},
				{"cookie:" + op, "/v1/sessions", 401, `"unauthorized"`},
			} {
				if code, body := get(w.token, w.path); code != w.code || !strings.Contains(body, w.has) {
					t.Errorf("GET %s: %d %s, want %d with %s", w.path, code, body, w.code, w.has)
				}
			}
		})
	}
}

package perms

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/pkg/agentlog/codex"
	"github.com/sessionlog/sessionlog/pkg/agentlog/pi"
)

// TestAgentExportsInTenants runs `sessionlog export` with the credentials
// of agents of the shipped configuration with tenants (TestTenants'
// deployment). alice of acme exports her sessions as she names them: a
// file of an agent's format (--to, to a file with -o or to stdout) carries
// the ids derived from her id, never from the stored _Tacme_<id>, while
// an operator's export of the stored id keeps it; her JSON lines export
// (--session, through sessions.api.read, since her user may not read the
// log) is the stored envelopes, what the operator's export of the stored
// id writes. An export an agent may not make ends by itself (cliEnv
// kills it after a minute: its --timeout is half an hour), exit 1, with
// a definite error: a session another agent owns (forbidden) or another
// tenant's (not_found naming the id asked). Her export of every session
// is TestAgentExportsEverySessionItMayRead's.
func TestAgentExportsInTenants(t *testing.T) {
	confPath, env, users := tenantsDeployment(t)
	s := startUp(t, env, "--nats-config", confPath)
	alice, bob, carol := users["alice"], users["bob"], users["carol"]
	opC := creds{"operator", deployPasswords["OPERATOR"]}
	ac := connect(t, s.natsURL, alice, nats.CustomInboxPrefix(natsauth.InboxPrefix("alice")))
	const uuid = "0195a3c4-1111-7222-8333-444455556666"
	// A session of each format's own id form, then one of no form.
	ids := map[string]string{"codex": "codex-" + uuid, "pi": "pi-" + uuid, "claude-code": "cc-" + uuid}
	for _, id := range []string{ids["codex"], ids["pi"], ids["claude-code"], "s-plain"} {
		appendEvents(t, ac, id, "",
			ev("c1", "session/created", "", "", `{"title":"alice's"}`),
			ev("e2", "turn/started", "t1", "", ""),
			ev("e3", "message/user", "t1", "", `{"content":"hello"}`),
			ev("e4", "turn/ended", "t1", "", `{"reason":"completed"}`))
	}
	ac.NoViolation(t)

	t.Run("agent formats carry the agent's ids", func(t *testing.T) {
		dir := t.TempDir()
		for _, tc := range []struct {
			format, id, want string
		}{
			{"codex", ids["codex"], `"id":"` + uuid + `"`},
			{"pi", ids["pi"], `"id":"` + uuid + `"`},
			{"claude-code", ids["claude-code"], `"sessionId":"` + uuid + `"`},
			{"codex", "s-plain", `"id":"` + codex.ThreadID("s-plain") + `"`},
			{"pi", "s-plain", `"id":"` + pi.SessionUUID("s-plain") + `"`},
		} {
			file := filepath.Join(dir, tc.format+"-"+tc.id+".jsonl")
			if _, err := cliEnv(t, s, alice, nil, "export", "--to", tc.format, "--session", tc.id, "-o", file); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			out, err := cliEnv(t, s, alice, nil, "export", "--to", tc.format, "--session", tc.id)
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range []string{string(b), out} {
				if !strings.Contains(got, tc.want) || strings.Contains(got, "_Tacme_") {
					t.Errorf("alice's %s export of %s holds no %s, or the stored id:\n%.600s", tc.format, tc.id, tc.want, got)
				}
			}
		}
		// The operator names the stored id, and its export keeps it.
		out, err := cliEnv(t, s, opC, nil, "export", "--to", "codex", "--session", "_Tacme_s-plain")
		if err != nil {
			t.Fatal(err)
		}
		if want := `"id":"` + codex.ThreadID("_Tacme_s-plain") + `"`; !strings.Contains(out, want) {
			t.Errorf("the operator's codex export of _Tacme_s-plain holds no %s:\n%.600s", want, out)
		}
	})
	t.Run("JSON lines of an agent's session", func(t *testing.T) {
		want, err := cliEnv(t, s, opC, nil, "export", "--session", "_Tacme_s-plain")
		if err != nil {
			t.Fatal(err)
		}
		got, err := cliEnv(t, s, alice, nil, "export", "--session", "s-plain")
		if err != nil {
			t.Fatal(err)
		}
		if got != want || strings.Count(got, "\n") != 4 {
			t.Fatalf("alice's export of s-plain:\n%s\nthe operator's of _Tacme_s-plain:\n%s", got, want)
		}
		// The default tenant's agent, whose ids are stored as they are.
		appendEvents(t, connect(t, s.natsURL, users["agent"]), "s-legacy", "", ev("c1", "session/created", "", "", `{"title":"the default tenant's"}`))
		if want, err = cliEnv(t, s, opC, nil, "export", "--session", "s-legacy"); err != nil {
			t.Fatal(err)
		}
		if got, err = cliEnv(t, s, users["agent"], nil, "export", "--session", "s-legacy"); err != nil || got != want || !strings.Contains(got, `"sessionId":"s-legacy"`) {
			t.Fatalf("the default tenant's agent's export of s-legacy: %v\n%s\nthe operator's:\n%s", err, got, want)
		}
	})
	t.Run("what an agent may not export ends at once", func(t *testing.T) {
		for _, tc := range []struct {
			who  string
			c    creds
			args []string
			says []string
		}{
			// An inbox prefix alice's user may not subscribe to.
			{"alice", alice, []string{"export", "--to", "codex", "--session", "s-plain", "--inbox-prefix", natsauth.OperatorInboxPrefix}, []string{"permissions violation", "--inbox-prefix", natsauth.InboxPrefix("alice")}},
			{"alice", alice, []string{"export", "--session", "s-plain", "--inbox-prefix", natsauth.InboxPrefix("bob")}, []string{"permissions violation", "--inbox-prefix", natsauth.InboxPrefix("alice")}},
			// Another agent's session, and another tenant's.
			{"bob", bob, []string{"export", "--session", "s-plain"}, []string{"forbidden", "s-plain", "not granted to bob"}},
			{"bob", bob, []string{"export", "--to", "codex", "--session", "s-plain"}, []string{"forbidden", "not granted to bob"}},
			{"carol", carol, []string{"export", "--session", "s-plain"}, []string{"not_found", "session s-plain does not exist"}},
			{"carol", carol, []string{"export", "--to", "pi", "--session", "s-plain"}, []string{"not_found", "session s-plain does not exist"}},
		} {
			out, err := cliEnv(t, s, tc.c, nil, tc.args...)
			if err == nil || !strings.Contains(err.Error(), "exit status 1") || out != "" {
				t.Errorf("%s %v: %v, stdout %.300q", tc.who, tc.args, err, out)
				continue
			}
			for _, w := range tc.says {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s %v: the error does not say %q: %v", tc.who, tc.args, w, err)
				}
			}
			if strings.Contains(err.Error(), "_Tacme_") || strings.Contains(err.Error(), "_Tglobex_") {
				t.Errorf("%s %v: the error names a stored id: %v", tc.who, tc.args, err)
			}
		}
	})
}

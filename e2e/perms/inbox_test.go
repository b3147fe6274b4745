package perms

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/testbin"
)

// codexFile copies a real codex transcript into a directory of its own
// and returns the directory, the file and its session id on the wire.
func codexFile(t *testing.T, name, id string) (dir, path, wireID string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../pkg/agentlog/testdata/real/codex", name))
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	path = filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, path, "codex-" + id
}

// TestAgentVerbsInTenants runs the verbs an agent runs itself (ship,
// import --from) with the credentials of agents of the shipped
// configuration with tenants (TestTenants' deployment): an agent of tenant
// acme ships and imports with its inbox prefix _INBOX.<user> (given by
// --inbox-prefix, by SESSIONLOG_INBOX_PREFIX, or by default from
// --nats-user), and its sessions are stored under its tenant, as
// _Tacme_<id>; with an inbox prefix its user may not subscribe to (the
// operators' _SL_OP, nats.go's _INBOX, another agent's) the verb ends
// with the permissions error naming the prefix and the flag, and stores
// nothing. The default tenant's agent ships and imports under its ids as
// they are, with the default prefix.
func TestAgentVerbsInTenants(t *testing.T) {
	confPath, env, users := tenantsDeployment(t)
	s := startUp(t, env, "--nats-config", confPath)
	op := connect(t, s.natsURL, creds{"operator", deployPasswords["OPERATOR"]}, nats.CustomInboxPrefix(natsauth.OperatorInboxPrefix))
	stored := func(id string) uint64 {
		t.Helper()
		r := ask(t, op, "sessions.api.read", map[string]any{"sessionId": id, "limit": 1})
		if r.code == "not_found" {
			return 0
		}
		var page struct {
			LastSeq uint64 `json:"lastSeq"`
		}
		if r.code != "" || json.Unmarshal(r.body, &page) != nil {
			t.Fatalf("read %s: %q %.300s", id, r.code, r.body)
		}
		return page.LastSeq
	}
	alice := users["alice"]

	t.Run("ship with the default prefix of --nats-user", func(t *testing.T) {
		dir, _, id := codexFile(t, "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl", "019c8a70-dda7-7f33-98ea-f30553347322")
		stop := startShip(t, s, alice, "ship", "--from", "codex", dir)
		natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
			if stored("_Tacme_"+id) == 0 {
				return fmt.Errorf("alice's shipped session is not stored as _Tacme_%s", id)
			}
			return nil
		})
		stop()
		if n := stored(id); n != 0 {
			t.Fatalf("alice's session is stored outside her tenant as %s (%d events)", id, n)
		}
	})

	dir, path, id := codexFile(t, "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl", "019c8bfe-ec25-79e0-97d7-bda6a9c575ff")
	t.Run("a prefix the user may not subscribe to is refused", func(t *testing.T) {
		for _, tc := range []struct {
			prefix string
			env    bool
			args   []string
		}{
			{natsauth.OperatorInboxPrefix, false, []string{"import", "--from", "codex", path}},
			{natsauth.AgentInboxPrefix, true, []string{"import", "--from", "codex", path}},
			{natsauth.InboxPrefix("bob"), false, []string{"ship", "--from", "codex", dir}},
			{natsauth.OperatorInboxPrefix, false, []string{"fork", "s-any"}},
		} {
			args, env := tc.args, []string{}
			if tc.env {
				env = append(env, "SESSIONLOG_INBOX_PREFIX="+tc.prefix)
			} else {
				args = append(append([]string{}, args...), "--inbox-prefix", tc.prefix)
			}
			// The command ends by itself, with the refusal (cliEnv kills
			// it after a minute, which would fail here without it).
			_, err := cliEnv(t, s, alice, env, args...)
			if err == nil || !strings.Contains(err.Error(), "exit status 1") || !strings.Contains(err.Error(), "permissions violation") ||
				!strings.Contains(err.Error(), `inbox prefix "`+tc.prefix+`"`) || !strings.Contains(err.Error(), "--inbox-prefix") ||
				!strings.Contains(err.Error(), natsauth.InboxPrefix("alice")) {
				t.Errorf("%s with inbox prefix %s: %v", tc.args[0], tc.prefix, err)
			}
		}
		if n := stored("_Tacme_" + id); n != 0 {
			t.Fatalf("a refused verb stored %d events of _Tacme_%s", n, id)
		}
	})
	t.Run("import with --inbox-prefix", func(t *testing.T) {
		out, err := cliEnv(t, s, alice, nil, "import", "--from", "codex", path, "--inbox-prefix", natsauth.InboxPrefix("alice"))
		if err != nil {
			t.Fatal(err)
		}
		if stored("_Tacme_"+id) == 0 || stored(id) != 0 {
			t.Fatalf("alice's import is not stored as _Tacme_%s alone:\n%s", id, out)
		}
		// Run again through the environment variable: every event is
		// there already.
		out, err = cliEnv(t, s, alice, []string{"SESSIONLOG_INBOX_PREFIX=" + natsauth.InboxPrefix("alice")}, "import", "--from", "codex", path)
		if err != nil || !strings.Contains(out, "1 unchanged") {
			t.Fatalf("alice's import again: %v\n%s", err, out)
		}
	})
	t.Run("the default tenant's agent", func(t *testing.T) {
		out, err := cliEnv(t, s, users["agent"], nil, "import", "--from", "codex", path)
		if err != nil {
			t.Fatal(err)
		}
		if stored(id) == 0 {
			t.Fatalf("the default tenant's import is not stored as %s:\n%s", id, out)
		}
	})
}

// startShip starts a ship process as c and returns a function that stops
// it (SIGKILL: ship keeps no state, DESIGN.md section 13).
func startShip(t *testing.T, s *stack, c creds, args ...string) (stop func()) {
	t.Helper()
	full := append(args, "--nats-url", s.natsURL, "--nats-user", c.user, "--nats-password", c.password)
	cmd := exec.Command(sessionlogBin(t), full...)
	cmd.Env = environ()
	out := &syncBuf{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Logf("ship:\n%s", out)
		})
	}
	t.Cleanup(stop)
	return stop
}

// natsLogScript appends a session through clients/nats-log's Log on a
// connection as NATS_USER with inboxPrefix NATS_INBOX (none when empty),
// reads it back, and prints what happened as JSON: the events read, or
// the error's code and message.
const natsLogScript = `
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
const dir = process.env.NATS_LOG_DIR;
const { connect } = createRequire(dir + "/package.json")("nats");
const { Log } = await import(pathToFileURL(dir + "/dist/index.js").href);
const opts = { servers: process.argv[2], user: process.env.NATS_USER, pass: process.env.NATS_PASS };
if (process.env.NATS_INBOX) opts.inboxPrefix = process.env.NATS_INBOX;
const nc = await connect(opts);
const log = new Log(nc, { timeoutMs: 60000 });
try {
  await log.request("sessions.api.append", JSON.stringify({ sessionId: "s-ts", expectedSeq: 0,
    events: [{ eventId: "c1", type: "session/created", data: { title: "from nats-log" } }] }));
  const read = [];
  await log.read("s-ts", 0, (e) => read.push(e.sessionId));
  console.log(JSON.stringify({ read }));
} catch (e) {
  console.log(JSON.stringify({ code: e.code, message: e.message }));
}
await nc.close();
`

// clients/nats-log, as an agent of tenant acme: with inboxPrefix
// _INBOX.alice its append and read work and the session is stored as
// _Tacme_s-ts; with nats.js's default _INBOX the first request fails at
// once (its timeout is a minute) with forbidden, saying inboxPrefix, and
// nothing is stored (before Log checked the inbox, the writer stored the
// append whose answer the agent could not receive).
func TestNatsLogInboxPrefix(t *testing.T) {
	const dir = "../../clients/nats-log"
	node := testbin.Node(t, dir, "dist/index.js")
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "inbox.mjs")
	if err := os.WriteFile(script, []byte(natsLogScript), 0o600); err != nil {
		t.Fatal(err)
	}
	confPath, env, users := tenantsDeployment(t)
	s := startUp(t, env, "--nats-config", confPath)
	op := connect(t, s.natsURL, creds{"operator", deployPasswords["OPERATOR"]}, nats.CustomInboxPrefix(natsauth.OperatorInboxPrefix))
	run := func(inbox string) map[string]any {
		t.Helper()
		out := testbin.RunNode(t, node, abs, []string{"NATS_LOG_DIR=" + abs, "NATS_USER=alice", "NATS_PASS=" + users["alice"].password,
			"NATS_INBOX=" + inbox}, script, s.natsURL)
		var rep map[string]any
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("report %s: %v", out, err)
		}
		return rep
	}
	rep := run(natsauth.AgentInboxPrefix)
	if rep["code"] != "forbidden" || !strings.Contains(fmt.Sprint(rep["message"]), "inboxPrefix") {
		t.Fatalf("with _INBOX: %v", rep)
	}
	if r := ask(t, op, "sessions.api.read", map[string]any{"sessionId": "_Tacme_s-ts"}); r.code != "not_found" {
		t.Fatalf("with _INBOX, _Tacme_s-ts: %q %.200s", r.code, r.body)
	}
	rep = run(natsauth.InboxPrefix("alice"))
	if fmt.Sprint(rep["read"]) != "[_Tacme_s-ts]" {
		t.Fatalf("with _INBOX.alice: %v", rep)
	}
	if r := ask(t, op, "sessions.api.read", map[string]any{"sessionId": "_Tacme_s-ts"}); r.code != "" {
		t.Fatalf("_Tacme_s-ts: %q %.200s", r.code, r.body)
	}
}

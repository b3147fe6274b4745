package perms

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// tenantsDeployment is the shipped server.conf and auth.conf, with the
// tenants' section generated for two tenants besides the default one:
// acme (agents alice and bob) and globex (agent carol).
func tenantsDeployment(t *testing.T) (confPath string, env []string, users map[string]creds) {
	t.Helper()
	tenants := append(natsauth.DefaultTenants(),
		natsauth.Tenant{Name: "acme", Users: []natsauth.TenantUser{{Name: "alice"}, {Name: "bob"}}},
		natsauth.Tenant{Name: "globex", Users: []natsauth.TenantUser{{Name: "carol"}}})
	dir := t.TempDir()
	auth, err := os.ReadFile("../../deploy/nats/auth.conf")
	if err != nil {
		t.Fatal(err)
	}
	if auth, err = natsauth.WithTenants(auth, tenants); err != nil {
		t.Fatal(err)
	}
	srv, err := os.ReadFile("../../deploy/nats/server.conf")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"auth.conf": auth, "server.conf": srv} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env = deployEnv("")
	users = map[string]creds{"agent": {"agent", deployPasswords["AGENT"]}}
	for _, tn := range tenants[1:] {
		for _, u := range tn.Users {
			pw := "p" + u.Name + "0123456789abcdef"
			env = append(env, natsauth.PasswordVar(tn.Name, u.Name)+"="+pw)
			users[u.Name] = creds{u.Name, pw}
		}
	}
	return filepath.Join(dir, "server.conf"), env, users
}

// reply is a service's answer: its error code, or its body.
type reply struct {
	code string
	body []byte
}

// ask sends a request and returns the answer's error code ("" for a
// success) and body; no answer fails.
func ask(t *testing.T, c *client, subject string, body any) reply {
	t.Helper()
	return askMsg(t, c, &nats.Msg{Subject: subject, Data: mustJSON(t, body)})
}

func askMsg(t *testing.T, c *client, m *nats.Msg) reply {
	t.Helper()
	r, err := c.RequestMsg(m, 15*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", m.Subject, err)
	}
	var e struct {
		Error *struct{ Code string } `json:"error"`
	}
	if json.Unmarshal(r.Data, &e) == nil && e.Error != nil {
		return reply{code: e.Error.Code, body: r.Data}
	}
	return reply{body: r.Data}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTenants runs up on the shipped configuration with two tenants and
// three agents, and tries every path an agent has across the tenant line
// (carol of globex against acme's sessions) and across agents of one
// tenant (bob against alice's), each as a hostile agent holding its own
// real credentials: each is refused with a definite code or a permission
// violation, none answers a byte of the session, and what is allowed
// still works.
func TestTenants(t *testing.T) {
	confPath, env, users := tenantsDeployment(t)
	s := startUp(t, env, "--nats-config", confPath)
	const secret = "alice-secret-5be1"
	agentConn := func(name string) *client {
		opts := []nats.Option{nats.UserInfo(users[name].user, users[name].password)}
		if name != "agent" {
			opts = append(opts, nats.CustomInboxPrefix(natsauth.InboxPrefix(name)))
		}
		return natstest.ConnectWatched(t, s.natsURL, opts...)
	}
	alice, bob, carol, legacy := agentConn("alice"), agentConn("bob"), agentConn("carol"), agentConn("agent")
	op := connect(t, s.natsURL, creds{"operator", deployPasswords["OPERATOR"]}, nats.CustomInboxPrefix(natsauth.OperatorInboxPrefix))

	// Snoops, subscribed to all they may before anything is sent: the
	// default tenant's agent to every _INBOX and live subject of its own
	// account, bob to his own inbox.
	snooped := make(chan *nats.Msg, 4096)
	for _, subj := range []string{"_INBOX.>", "sessions.live.>"} {
		if _, err := legacy.ChanSubscribe(subj, snooped); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bob.ChanSubscribe(natsauth.InboxPrefix("bob")+".>", snooped); err != nil {
		t.Fatal(err)
	}
	legacy.NoViolation(t)
	bob.NoViolation(t)

	created := func(data string) map[string]any { return ev("c1", "session/created", "", "", data) }
	turn := []map[string]any{
		ev("e2", "turn/started", "t1", "", ""),
		ev("e3", "message/user", "t1", "", fmt.Sprintf(`{"content":%q}`, secret)),
		ev("e4", "turn/ended", "t1", "", `{"reason":"completed"}`),
	}
	t.Run("owners use their sessions", func(t *testing.T) {
		appendEvents(t, alice, "s-alice", "h-alice", append([]map[string]any{created(`{"title":"alice's"}`)}, turn...)...)
		appendEvents(t, alice, "s-shared", "h-shared", created(`{"title":"shared","grants":["bob"]}`))
		appendEvents(t, carol, "s-alice", "h-carol", created(`{"title":"carol's, named as alice's is"}`))
		appendEvents(t, legacy, "s-legacy", "h-legacy", created(`{"title":"the default tenant's"}`))
		request(t, alice, "sessions.api.heartbeat", map[string]string{"sessionId": "s-alice", "holder": "h-alice"}, nil)
		var r struct {
			Events []json.RawMessage `json:"events"`
		}
		request(t, alice, "sessions.api.read", map[string]any{"sessionId": "s-alice"}, &r)
		if len(r.Events) != 4 || !bytes.Contains(r.Events[2], []byte(secret)) {
			t.Fatalf("alice reads %d events of her session", len(r.Events))
		}
		var owner struct {
			Data struct {
				Owner struct{ Tenant, Agent string }
			} `json:"data"`
		}
		if err := json.Unmarshal(r.Events[0], &owner); err != nil || owner.Data.Owner.Tenant != "acme" || owner.Data.Owner.Agent != "alice" {
			t.Fatalf("session/created records owner %+v (%v): %s", owner.Data.Owner, err, r.Events[0])
		}
		request(t, alice, "sessions.api.fork", map[string]string{"parentId": "s-alice", "childId": "s-alice-child"}, nil)
		request(t, legacy, "sessions.api.read", map[string]any{"sessionId": "s-legacy"}, nil)
		if err := alice.Publish("sessions.live.s-alice", []byte(fmt.Sprintf(`{"afterSeq":4,"type":"delta","data":%q}`, secret))); err != nil {
			t.Fatal(err)
		}
		for _, c := range []*client{alice, carol, legacy} {
			c.NoViolation(t)
		}
	})

	// Every request path, by a hostile agent, on a session it must not
	// use: the answers' codes, none holding a byte of the session.
	forks := 0
	hostile := func(t *testing.T, c *client, id string) []string {
		t.Helper()
		forks++
		var codes []string
		for _, tc := range []struct {
			subject string
			body    any
		}{
			{"sessions.api.append", map[string]any{"sessionId": id, "events": []map[string]any{ev("x1", "session/paused", "", "", `{"reason":"hostile"}`)}}},
			{"sessions.api.append", map[string]any{"sessionId": id, "expectedSeq": 4, "holder": "h-evil", "takeover": true, "events": []map[string]any{ev("x2", "turn/started", "t9", "", "")}}},
			{"sessions.api.heartbeat", map[string]any{"sessionId": id, "holder": "h-evil", "takeover": true}},
			{"sessions.api.read", map[string]any{"sessionId": id}},
			{"sessions.api.read", map[string]any{"sessionId": id, "afterSeq": 2, "limit": 1}},
			{"sessions.api.fork", map[string]any{"parentId": id, "childId": fmt.Sprintf("s-stolen-%d", forks)}},
			{"sessions.api.fork", map[string]any{"parentId": id, "childId": fmt.Sprintf("s-stolen-at-%d", forks), "at": map[string]any{"seq": 2}}},
		} {
			r := ask(t, c, tc.subject, tc.body)
			if r.code == "" || bytes.Contains(r.body, []byte(secret)) {
				t.Errorf("%s %v: answered %q %.300s", tc.subject, tc.body, r.code, r.body)
			}
			codes = append(codes, r.code)
		}
		c.NoViolation(t)
		return codes
	}
	t.Run("another agent of the tenant is forbidden", func(t *testing.T) {
		for _, id := range []string{"s-alice", "s-alice-child"} {
			for i, code := range hostile(t, bob, id) {
				if code != "forbidden" {
					t.Errorf("bob on %s, request %d: %q, want forbidden", id, i, code)
				}
			}
		}
		r := ask(t, bob, "sessions.api.append", map[string]any{"sessionId": "s-alice", "expectedSeq": 0, "events": []map[string]any{created(`{"title":"squat"}`)}})
		if r.code != "forbidden" {
			t.Errorf("bob creating s-alice again: %q", r.code)
		}
	})
	t.Run("another tenant finds nothing", func(t *testing.T) {
		// Each tenant names its own sessions: carol's s-alice is hers.
		var r struct {
			Events []json.RawMessage `json:"events"`
		}
		request(t, carol, "sessions.api.read", map[string]any{"sessionId": "s-alice"}, &r)
		if len(r.Events) != 1 || bytes.Contains(r.Events[0], []byte(secret)) {
			t.Fatalf("carol's s-alice: %d events", len(r.Events))
		}
		// Acme's sessions by every name carol or the default tenant's
		// agent may try answer as a session that does not exist does.
		nowhere := hostile(t, carol, "s-nowhere")
		for _, id := range []string{"_Tacme_s-alice", "_Tacme_s-shared", "s-shared", "s-legacy"} {
			if got := hostile(t, carol, id); !slices.Equal(got, nowhere) {
				t.Errorf("carol on %s: %q, for a session that does not exist %q", id, got, nowhere)
			}
		}
		for i, code := range hostile(t, legacy, "_Tacme_s-alice") {
			if code != "bad_request" {
				t.Errorf("the default tenant's agent on acme's stored id, request %d: %q", i, code)
			}
		}
		if got, want := hostile(t, legacy, "s-alice"), hostile(t, legacy, "s-nowhere"); !slices.Equal(got, want) {
			t.Errorf("the default tenant's agent on s-alice: %q, for a session that does not exist %q", got, want)
		}
	})
	t.Run("live events reach only their own tenant's session", func(t *testing.T) {
		// The dashboard's watches of alice's s-alice and carol's s-alice
		// (one name, two tenants), each after its last durable seq.
		acmeW, globexW := watchLines(t, s.httpURL, "_Tacme_s-alice", 4), watchLines(t, s.httpURL, "_Tglobex_s-alice", 1)
		natstest.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
			// A watch subscribes when it starts: publish until alice's
			// event comes through hers.
			if err := alice.Publish("sessions.live.s-alice", []byte(fmt.Sprintf(`{"afterSeq":4,"type":"delta","data":%q}`, secret))); err != nil {
				return err
			}
			if err := alice.Flush(); err != nil {
				return err
			}
			for {
				select {
				case l := <-acmeW:
					if strings.Contains(l, secret) {
						return nil
					}
				default:
					return errors.New("alice's live event has not reached the watch of her session")
				}
			}
		})
		// Carol's event, published after alice's were delivered: her
		// watch gets it, and none of alice's before it.
		if err := carol.Publish("sessions.live.s-alice", []byte(`{"afterSeq":1,"type":"delta","data":"carol-live"}`)); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(20 * time.Second)
		for {
			select {
			case l := <-globexW:
				if strings.Contains(l, secret) {
					t.Fatalf("the watch of carol's s-alice got alice's live event: %s", l)
				}
				if !strings.Contains(l, "carol-live") {
					continue
				}
			case <-deadline:
				t.Fatal("carol's live event did not reach the watch of her session")
			}
			break
		}
	})
	t.Run("live events are shown only from the session's writers", func(t *testing.T) {
		// bob publishes live events on alice's s-alice (his tenant's
		// session, not his), each followed by one of alice's: the watch of
		// her session and an operator's tail of it show hers and none of
		// his; on s-shared, which alice grants him, his are shown.
		opC := creds{"operator", deployPasswords["OPERATOR"]}
		aliceW, sharedW := watchLines(t, s.httpURL, "_Tacme_s-alice", 4), watchLines(t, s.httpURL, "_Tacme_s-shared", 1)
		tailL := tailLines(t, s, opC, "_Tacme_s-alice")
		var forged []string
		seen := func(lines <-chan string, want string) bool {
			for {
				select {
				case l := <-lines:
					if strings.Contains(l, "bob-forged") {
						forged = append(forged, l)
					}
					if strings.Contains(l, want) {
						return true
					}
				default:
					return false
				}
			}
		}
		// live publishes a live event following the session's last seq.
		live := func(c *client, id, data string) error {
			after := map[string]int{"s-alice": 4, "s-shared": 1}[id]
			if err := c.Publish("sessions.live."+id, []byte(fmt.Sprintf(`{"afterSeq":%d,"type":"delta","data":%q}`, after, data))); err != nil {
				return err
			}
			return c.Flush()
		}
		// Each watch and the tail subscribe when they start: publish
		// until alice's event comes through both. Delivery keeps the
		// order of publishes each flushed before the next: bob's event of
		// a round reaches them before alice's.
		var inWatch, inTail bool
		round := 0
		natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			round++
			if err := live(bob, "s-alice", fmt.Sprintf("bob-forged-%d", round)); err != nil {
				return err
			}
			if err := live(alice, "s-alice", fmt.Sprintf("alice-live-%d", round)); err != nil {
				return err
			}
			mark := fmt.Sprintf("alice-live-%d", round)
			inWatch = inWatch || seen(aliceW, mark)
			inTail = inTail || seen(tailL, mark)
			if !inWatch || !inTail {
				return fmt.Errorf("alice's live event reached the watch %v, the tail %v", inWatch, inTail)
			}
			return nil
		})
		if len(forged) > 0 {
			t.Fatalf("bob's live events on alice's session were shown (%d): %s", len(forged), forged[0])
		}
		natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			if err := live(bob, "s-shared", "bob-granted"); err != nil {
				return err
			}
			if !seen(sharedW, "bob-granted") {
				return errors.New("bob's live event has not reached the watch of s-shared, which grants him")
			}
			return nil
		})
		code, body, err := httpGet(s.httpURL + "/metrics")
		if err != nil || code != http.StatusOK || !strings.Contains(body, `sessionlog_projector_transient_dropped_total{reason="forbidden"}`) {
			t.Fatalf("/metrics: %d %v, no forbidden transient events counted", code, err)
		}
		bob.NoViolation(t)
	})
	t.Run("a grant lets another agent in", func(t *testing.T) {
		appendEvents(t, bob, "s-shared", "", ev("g2", "session/paused", "", "", `{"reason":"bob was granted"}`))
		request(t, bob, "sessions.api.read", map[string]any{"sessionId": "s-shared"}, nil)
		// A grant is the owner's to give, not to pass on.
		if r := ask(t, bob, "sessions.api.append", map[string]any{"sessionId": "s-shared",
			"events": []map[string]any{ev("g3", "session/granted", "", "", `{"grants":["mallory"]}`)}}); r.code != "forbidden" {
			t.Fatalf("bob passing his grant on: %q %s", r.code, r.body)
		}
		bob.NoViolation(t)
	})
	t.Run("identity cannot be claimed", func(t *testing.T) {
		// An owner in the event that is not the requester.
		r := ask(t, bob, "sessions.api.append", map[string]any{"sessionId": "s-bob-as-alice",
			"events": []map[string]any{created(`{"owner":{"tenant":"acme","agent":"alice"}}`)}})
		if r.code != "forbidden" {
			t.Fatalf("bob creating a session owned by alice: %q %s", r.code, r.body)
		}
		// The server's header, forged: the server replaces it.
		m := nats.NewMsg("sessions.api.read")
		m.Data = mustJSON(t, map[string]any{"sessionId": "s-alice"})
		m.Header.Set("Nats-Request-Info", `{"acc":"acme","user":"alice"}`)
		if r := askMsg(t, bob, m); r.code != "forbidden" {
			t.Fatalf("bob's read with a forged Nats-Request-Info: %q %.300s", r.code, r.body)
		}
		m.Header.Set("Nats-Request-Info", `{"acc":"SESSIONLOG","user":"operator"}`)
		m.Data = mustJSON(t, map[string]any{"sessionId": "s-shared"})
		if r := askMsg(t, carol, m); r.code != "not_found" {
			t.Fatalf("carol's read with a forged Nats-Request-Info: %q %.300s", r.code, r.body)
		}
	})
	t.Run("no agent subscribes to what is not its own", func(t *testing.T) {
		for _, c := range []struct {
			c    *client
			subj string
		}{
			{bob, "_INBOX.>"}, {bob, natsauth.InboxPrefix("alice") + ".>"}, {bob, "sessions.live.>"}, {bob, "sessions.live.s-alice"},
			{carol, ">"}, {carol, "_INBOX.alice.>"}, {bob, "sessions.api.>"}, {bob, "_SL_SVC.>"}, {bob, "$JS.API.>"}, {bob, "$KV.>"},
		} {
			sub, err := c.c.SubscribeSync(c.subj)
			if err != nil {
				t.Fatal(err)
			}
			c.c.WantViolation(t, "Subscription", c.subj)
			_ = sub.Unsubscribe()
		}
	})
	t.Run("no agent writes around the services", func(t *testing.T) {
		for _, subj := range []string{
			"sessions.ev.s-alice", "$KV.SESSION_LEASES.s-alice", "$KV.SESSION_CLAIMS.s-alice", "$KV.SESSION_FORKS.s-alice",
			"sessions.api.repair", "sessions.api.erase", "_INBOX.alice.x",
		} {
			if err := bob.Publish(subj, []byte(`{"forged":true}`)); err != nil {
				t.Fatal(err)
			}
			bob.WantViolation(t, "Publish", subj)
		}
		for _, subj := range []string{"$JS.API.STREAM.INFO.SESSIONS", "$JS.API.DIRECT.GET.SESSIONS.sessions.ev.s-alice", "$JS.API.CONSUMER.CREATE.SESSIONS"} {
			if _, err := carol.Request(subj, nil, 300*time.Millisecond); err == nil {
				t.Errorf("%s answered carol", subj)
			}
			carol.WantViolation(t, "Publish", subj)
		}
	})
	t.Run("transcripts are their tenant's and their agent's", func(t *testing.T) {
		// alice's transcript through sessions.api.source.* (section 15):
		// bob (her tenant) and carol (another) list none of it, bob's load
		// and append are refused, carol's key is her own, never written.
		const proj, key = "-home-alice-shop", "77777777-7777-4777-8777-777777777777"
		k := func(more ...any) map[string]any {
			m := map[string]any{"format": "claude-code", "projectKey": proj, "sessionKey": key}
			for i := 0; i+1 < len(more); i += 2 {
				m[more[i].(string)] = more[i+1]
			}
			return m
		}
		line := json.RawMessage(fmt.Sprintf(`{"parentUuid":null,"isSidechain":false,"cwd":"/home/alice/shop","sessionId":%q,"type":"user","message":{"role":"user","content":%q},"uuid":"u1","timestamp":"2026-11-30T09:00:01.000Z"}`, key, secret))
		if r := ask(t, alice, "sessions.api.source.append", k("entries", []json.RawMessage{line})); r.code != "" {
			t.Fatalf("alice's source append: %s %s", r.code, r.body)
		}
		if r := ask(t, alice, "sessions.api.source.load", k()); r.code != "" || !bytes.Contains(r.body, []byte(secret)) {
			t.Fatalf("alice loads her transcript: %s %.300s", r.code, r.body)
		}
		for _, c := range []struct {
			name string
			c    *client
			// load and append: bob is refused, carol's key is her own.
			load, append string
		}{{"bob", bob, "forbidden", "forbidden"}, {"carol", carol, "", ""}} {
			for _, tc := range []struct {
				subject, code string
				body          any
			}{
				{"sessions.api.source.list", "", map[string]any{"format": "claude-code", "projectKey": proj}},
				{"sessions.api.source.subkeys", "", k()},
				{"sessions.api.source.load", c.load, k()},
				{"sessions.api.source.append", c.append, k("entries", []json.RawMessage{json.RawMessage(`{"type":"user","uuid":"u2","message":{"role":"user","content":"hostile"}}`)})},
			} {
				r := ask(t, c.c, tc.subject, tc.body)
				if r.code != tc.code || bytes.Contains(r.body, []byte(secret)) || bytes.Contains(r.body, []byte(`"sessionKey"`)) || bytes.Contains(r.body, []byte(`"found":true`)) {
					t.Errorf("%s: %s answered %q %.300s", c.name, tc.subject, r.code, r.body)
				}
			}
			c.c.NoViolation(t)
		}
		var r struct {
			Events []json.RawMessage `json:"events"`
		}
		request(t, op, "sessions.api.read", map[string]any{"sessionId": "_Tacme_cc-" + key}, &r)
		if len(r.Events) == 0 {
			t.Fatal("alice's transcript is not stored")
		}
		for _, e := range r.Events {
			if bytes.Contains(e, []byte("hostile")) {
				t.Fatalf("alice's transcript holds bob's entry: %s", e)
			}
		}
	})
	t.Run("nothing leaked", func(t *testing.T) {
		// What the hostile requests must not have changed.
		var r struct {
			Events  []json.RawMessage `json:"events"`
			LastSeq uint64            `json:"lastSeq"`
		}
		request(t, op, "sessions.api.read", map[string]any{"sessionId": "_Tacme_s-alice"}, &r)
		if r.LastSeq != 4 {
			t.Fatalf("s-alice has %d events after the hostile requests, want 4", r.LastSeq)
		}
		// None of the forks or sessions the hostile requests asked for.
		for _, id := range []string{"_Tacme_s-stolen-1", "_Tacme_s-stolen-at-1", "_Tacme_s-stolen-2", "_Tacme_s-stolen-at-2", "_Tacme_s-bob-as-alice"} {
			if rr := ask(t, op, "sessions.api.read", map[string]any{"sessionId": id}); rr.code != "not_found" {
				t.Errorf("%s exists: %q", id, rr.code)
			}
		}
		// The operator's verbs see every tenant's sessions.
		if out, err := cli(t, s, creds{"operator", deployPasswords["OPERATOR"]}, "replay", "_Tacme_s-alice"); err != nil || !strings.Contains(out, secret) {
			t.Fatalf("operator replay: %v", err)
		}
		n := len(snooped)
		for range n {
			m := <-snooped
			if bytes.Contains(m.Data, []byte(secret)) {
				t.Fatalf("an agent received %s: %.300q", m.Subject, m.Data)
			}
		}
		t.Logf("the snooping agents received %d messages (their own replies), none of alice's", n)
	})
	// Last, since bob then reads what the snoops must not have seen.
	t.Run("a later grant lets another agent in", func(t *testing.T) {
		if r := ask(t, bob, "sessions.api.read", map[string]any{"sessionId": "s-alice-child"}); r.code != "forbidden" {
			t.Fatalf("bob's read of s-alice-child before the grant: %q", r.code)
		}
		appendEvents(t, alice, "s-alice-child", "", ev("g4", "session/granted", "", "", `{"grants":["bob"]}`))
		var r struct {
			Events []json.RawMessage `json:"events"`
		}
		request(t, bob, "sessions.api.read", map[string]any{"sessionId": "s-alice-child"}, &r)
		if len(r.Events) != 6 || !bytes.Contains(r.Events[2], []byte(secret)) {
			t.Fatalf("bob reads %d events of s-alice-child", len(r.Events))
		}
		bob.NoViolation(t)
	})
	// No refusal of the services, only of the hostile agents.
	for _, l := range strings.Split(s.stderr.String(), "\n") {
		if strings.Contains(l, "Violation") && !strings.Contains(l, `user:bob\"`) && !strings.Contains(l, `user:carol\"`) {
			t.Errorf("refused, not as a hostile agent: %s", l)
		}
	}
}

// watchLines follows GET /v1/sessions/{id}/watch?after=N and sends its
// lines.
func watchLines(t *testing.T, base, id string, after int) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/sessions/%s/watch?after=%d", base, id, after), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("watch %s: %d %s", id, resp.StatusCode, b)
	}
	lines := make(chan string, 1024)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	return lines
}

// tailLines runs `sessionlog tail <id>` as op and sends its lines.
func tailLines(t *testing.T, s *stack, op creds, id string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, sessionlogBin(t), "tail", id, "--nats-url", s.natsURL, "--nats-user", op.user, "--nats-password", op.password)
	cmd.Env = environ()
	cmd.Stderr = &syncBuf{}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	return lines
}

// Package perms runs the whole stack (`sessionlog up`, a real process) under
// the NATS permissions a deployment gives it, and uses it as the users that
// deployment defines: agents append, heartbeat and fork; the repairer closes
// an orphan on its own; the operator repairs on demand and runs the SRE
// verbs. As an agent it then tries what an agent must not do (write the log,
// read the services' inboxes, call the JetStream API, touch the KV buckets,
// purge or delete) and checks the server refuses each one.
//
// Two deployments: up on deploy/nats/server.conf (the file shipped for
// nats-server, passwords from the environment), and up --nats-user
// --operator-user (the embedded server's users, built from the same
// definitions).
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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/testbin"
)

const (
	leaseTTL = 2 * time.Second
	grace    = time.Second
)

func sessionlogBin(t *testing.T) string { return testbin.Path(t) }

func TestMain(m *testing.M) { testbin.Main(m) }

// environ is the test process's environment without any SESSIONLOG_
// variable, plus env: what up sees is what the test says.
func environ(env ...string) []string {
	var out []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "SESSIONLOG_") {
			out = append(out, e)
		}
	}
	return append(out, env...)
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// stack is a running `sessionlog up`.
type stack struct {
	natsURL, httpURL string
	stdout           []string // the lines up printed before it was ready
	stderr           *syncBuf
	dataDir          string
	// stop stops up (SIGTERM) and waits for it; the test's end does too.
	stop func()
}

func startUp(t *testing.T, env []string, args ...string) *stack {
	t.Helper()
	dataDir := t.TempDir()
	full := append([]string{"up", "--data-dir", dataDir, "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--lease-ttl", leaseTTL.String(), "--grace", grace.String()}, args...)
	cmd := exec.Command(sessionlogBin(t), full...)
	cmd.Env = environ(env...)
	st := &stack{stderr: &syncBuf{}, dataDir: dataDir}
	cmd.Stderr = st.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	var stopOnce sync.Once
	st.stop = func() {
		stopOnce.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Errorf("up did not stop on SIGTERM")
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(st.stop)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(60 * time.Second)
	for st.natsURL == "" || st.httpURL == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				<-done
				t.Fatalf("up exited: %v\n%s", waitErr, st.stderr)
			}
			st.stdout = append(st.stdout, l)
			if v, ok := strings.CutPrefix(l, "dashboard: "); ok {
				st.httpURL = strings.TrimSuffix(v, "/")
			}
			if v, ok := strings.CutPrefix(l, "nats: "); ok {
				st.natsURL = v
			}
		case <-deadline:
			t.Fatalf("up printed no addresses\n%s", st.stderr)
		}
	}
	natstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		code, body, err := httpGet(st.httpURL + "/readyz")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("readyz %d %s %v", code, body, err)
		}
		return nil
	})
	return st
}

func httpGet(url string) (int, string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// creds is a user of the deployment.
type creds struct{ user, password string }

// client is a connection whose permission violations are collected.
type client = natstest.Watched

func connect(t *testing.T, url string, c creds, opts ...nats.Option) *client {
	t.Helper()
	return natstest.ConnectWatched(t, url, append([]nats.Option{nats.UserInfo(c.user, c.password)}, opts...)...)
}

// ev is an event of an append request.
func ev(id, typ, turn, tool, data string) map[string]any {
	m := map[string]any{"eventId": id, "type": typ}
	if turn != "" {
		m["turnId"] = turn
	}
	if tool != "" {
		m["toolCallId"] = tool
	}
	if data != "" {
		m["data"] = json.RawMessage(data)
	}
	return m
}

// request sends a request and decodes the reply; an error reply fails.
func request(t *testing.T, c *client, subject string, body any, out any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Request(subject, b, 15*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	var e struct {
		Error *struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(m.Data, &e) == nil && e.Error != nil {
		t.Fatalf("%s: %s: %s", subject, e.Error.Code, e.Error.Message)
	}
	if out != nil {
		if err := json.Unmarshal(m.Data, out); err != nil {
			t.Fatalf("%s reply %q: %v", subject, m.Data, err)
		}
	}
}

func appendEvents(t *testing.T, c *client, id, holder string, events ...map[string]any) {
	t.Helper()
	req := map[string]any{"sessionId": id, "events": events}
	if holder != "" {
		req["holder"] = holder
	}
	request(t, c, "sessions.api.append", req, nil)
}

// detail is the part of GET /v1/sessions/{id} the test reads.
type detail struct {
	Status  string `json:"status"`
	Repairs int    `json:"repairs"`
	LastSeq uint64 `json:"lastSeq"`
}

func (s *stack) session(id string) (detail, error) {
	code, body, err := httpGet(s.httpURL + "/v1/sessions/" + id)
	if err != nil {
		return detail{}, err
	}
	if code != http.StatusOK {
		return detail{}, fmt.Errorf("GET session %s: %d %s", id, code, body)
	}
	var d detail
	return d, json.Unmarshal([]byte(body), &d)
}

// cli runs a sessionlog verb as the operator.
func cli(t *testing.T, s *stack, op creds, args ...string) (string, error) {
	t.Helper()
	return cliEnv(t, s, op, nil, args...)
}

// cliEnv is cli with env added to the command's environment.
func cliEnv(t *testing.T, s *stack, op creds, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := append(args, "--nats-url", s.natsURL, "--nats-user", op.user, "--nats-password", op.password)
	cmd := exec.CommandContext(ctx, sessionlogBin(t), full...)
	cmd.Env = environ(env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("sessionlog %s: %v\n%s", args[0], err, errb.String())
	}
	return out.String(), nil
}

// exercise runs the product through the deployment's users on a store of
// that many partitions, then tries what an agent must not do.
//
// The agent is agentC (with agentOpts, its inbox prefix); spyC, when set,
// is another agent, listening to every inbox and live subject it may from
// the start: it must see nothing of the agent's sessions, not even the
// replies to the agent's reads. Without one (`up --nats-user` has one
// agent user: every connection of it is the same agent), a connection of
// the agent's own user listens, and must see nothing the services or the
// operator receive.
func exercise(t *testing.T, s *stack, partitions int, agentC, spyC, opC creds, agentOpts, spyOpts []nats.Option) {
	layout, err := logstore.NewLayout(partitions)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "secret-marker-7f3a"
	agent := connect(t, s.natsURL, agentC, agentOpts...)
	otherAgent := spyC.user != ""
	if !otherAgent {
		spyC, spyOpts = agentC, agentOpts
	}
	spy := connect(t, s.natsURL, spyC, spyOpts...)
	spied := make(chan *nats.Msg, 4096)
	inbox := natsauth.AgentInboxPrefix + ".>"
	if spyOpts != nil {
		inbox = natsauth.InboxPrefix(spyC.user) + ".>"
	}
	if _, err := spy.ChanSubscribe(inbox, spied); err != nil {
		t.Fatal(err)
	}
	spy.NoViolation(t)
	op := connect(t, s.natsURL, opC, nats.CustomInboxPrefix(natsauth.OperatorInboxPrefix))

	t.Run("agent appends, heartbeats and reads", func(t *testing.T) {
		appendEvents(t, agent, "s-live", "h-live",
			ev("e1", "session/created", "", "", `{"title":"perms"}`),
			ev("e2", "turn/started", "t1", "", ""),
			ev("e3", "message/user", "t1", "", fmt.Sprintf(`{"content":%q}`, marker)),
			ev("e4", "turn/ended", "t1", "", `{"reason":"completed"}`))
		var hb struct{ Holder string }
		request(t, agent, "sessions.api.heartbeat", map[string]string{"sessionId": "s-live", "holder": "h-live"}, &hb)
		if hb.Holder != "h-live" {
			t.Fatalf("heartbeat reply holder %q", hb.Holder)
		}
		// The projector reads the session for the HTTP API (its consumer's
		// deliveries go to the services' inbox).
		natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
			code, body, err := httpGet(s.httpURL + "/v1/sessions/s-live/events")
			if err != nil || code != http.StatusOK {
				return fmt.Errorf("events: %d %v %s", code, err, body)
			}
			var evs struct{ Events []json.RawMessage }
			if err := json.Unmarshal([]byte(body), &evs); err != nil {
				return err
			}
			if len(evs.Events) != 4 || !strings.Contains(body, marker) {
				return fmt.Errorf("%d events: %s", len(evs.Events), body)
			}
			return nil
		})
		agent.NoViolation(t)
	})

	// Before the spy's messages are looked at: another agent sees none
	// of the answer (ADR 010).
	t.Run("agent reads its session over NATS", func(t *testing.T) {
		var r struct {
			Events  []json.RawMessage `json:"events"`
			LastSeq uint64            `json:"lastSeq"`
		}
		request(t, agent, "sessions.api.read", map[string]any{"sessionId": "s-live"}, &r)
		if len(r.Events) != 4 || r.LastSeq != 4 || !bytes.Contains(r.Events[2], []byte(marker)) {
			t.Fatalf("read: %d events, last seq %d", len(r.Events), r.LastSeq)
		}
		agent.NoViolation(t)
	})

	t.Run("agent forks", func(t *testing.T) {
		var r struct{ ChildID, ParentID string }
		request(t, agent, "sessions.api.fork", map[string]string{"parentId": "s-live", "childId": "s-live-child"}, &r)
		if r.ChildID != "s-live-child" {
			t.Fatalf("fork reply %+v", r)
		}
		natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
			d, err := s.session("s-live-child")
			if err != nil {
				return err
			}
			if d.LastSeq < 4 {
				return fmt.Errorf("child %+v", d)
			}
			return nil
		})
		agent.NoViolation(t)
	})

	t.Run("repairer closes an orphan after its lease lapses", func(t *testing.T) {
		appendEvents(t, agent, "s-orphan", "h-orphan",
			ev("e1", "session/created", "", "", `{"title":"orphan"}`),
			ev("e2", "turn/started", "t1", "", ""),
			ev("e3", "tool/requested", "t1", "c1", `{"name":"sh","input":{}}`),
			ev("e4", "tool/started", "t1", "c1", ""))
		start := time.Now()
		natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
			d, err := s.session("s-orphan")
			if err != nil {
				return err
			}
			if d.Repairs < 1 || d.Status != "paused" {
				return fmt.Errorf("not repaired after %v: %+v", time.Since(start), d)
			}
			return nil
		})
		t.Logf("orphan repaired %v after its last append (lease TTL %v, grace %v)", time.Since(start).Round(10*time.Millisecond), leaseTTL, grace)
	})

	t.Run("operator repairs on demand and runs the SRE verbs", func(t *testing.T) {
		// No holder: no lease, nothing the repairer would close by itself.
		appendEvents(t, agent, "s-stuck", "",
			ev("e1", "session/created", "", "", `{"title":"stuck"}`),
			ev("e2", "turn/started", "t1", "", ""),
			ev("e3", "tool/requested", "t1", "c1", `{"name":"sh","input":{}}`),
			ev("e4", "tool/started", "t1", "c1", ""))
		out, err := cli(t, s, opC, "repair", "s-stuck")
		if err != nil || !strings.Contains(out, "repaired") {
			t.Fatalf("repair: %q %v", out, err)
		}
		if out, err := cli(t, s, opC, "fork", "s-live", "--child", "s-op-child"); err != nil || strings.TrimSpace(out) != "s-op-child" {
			t.Fatalf("fork: %q %v", out, err)
		}
		if out, err := cli(t, s, opC, "replay", "s-live"); err != nil || !strings.Contains(out, marker) {
			t.Fatalf("replay: %q %v", out, err)
		}
		if out, err := cli(t, s, opC, "ls"); err != nil || !strings.Contains(out, "s-stuck") {
			t.Fatalf("ls: %q %v", out, err)
		}
		// The repair request itself is the operator's, never an agent's.
		var rr struct{ Repaired bool }
		request(t, op, "sessions.api.repair", map[string]any{"sessionId": "s-stuck"}, &rr)
		if rr.Repaired {
			t.Fatal("s-stuck repaired twice")
		}
		op.NoViolation(t)
	})

	// stored counts the messages of every session stream.
	stored := func() uint64 {
		t.Helper()
		var n uint64
		for _, stream := range layout.Streams() {
			m, err := op.Request("$JS.API.STREAM.INFO."+stream, nil, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var info struct {
				State struct {
					Msgs uint64 `json:"messages"`
				} `json:"state"`
				Error *struct {
					Description string `json:"description"`
				} `json:"error"`
			}
			if err := json.Unmarshal(m.Data, &info); err != nil || info.Error != nil {
				t.Fatalf("stream info %s: %s: %v", stream, m.Data, err)
			}
			n += info.State.Msgs
		}
		if n == 0 {
			t.Fatalf("the streams %v hold nothing", layout.Streams())
		}
		return n
	}
	live, err := layout.Locate("s-live")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("agent is refused", func(t *testing.T) {
		before := stored()
		// The log's subjects: of one stream, and of every partition
		// (DESIGN.md section 11), whatever the store holds.
		logSubjects := []string{"sessions.ev.s-live", "sessions.ev.forged", live.Subject}
		for p := range partitions {
			logSubjects = append(logSubjects, fmt.Sprintf("sessions.%d.ev.forged", p))
		}
		for _, subject := range append(logSubjects,
			"$KV.SESSION_LEASES.s-live",
			"$KV.SESSION_CLAIMS.s-live",
			"$KV.SESSION_FORKS.s-live",
			"sessions.api.repair",
			"sessions.api.erase",
			"$KV.SESSION_ERASED.s-live",
			"$KV.SESSION_KEYS.s-live",
			"sessions.audit.erased.s-live",
			natsauth.ServiceInboxPrefix+".x",
		) {
			if err := agent.Publish(subject, []byte(`{"forged":true}`)); err != nil {
				t.Fatal(err)
			}
			agent.WantViolation(t, "Publish", subject)
		}
		api := []string{"$JS.API.STREAM.DELETE.KV_SESSION_LEASES"}
		for _, stream := range layout.Streams() {
			api = append(api,
				"$JS.API.STREAM.PURGE."+stream,
				"$JS.API.STREAM.DELETE."+stream,
				"$JS.API.STREAM.MSG.DELETE."+stream,
				"$JS.API.STREAM.INFO."+stream,
				"$JS.API.CONSUMER.CREATE."+stream)
		}
		api = append(api, "$JS.API.DIRECT.GET."+live.Stream+"."+live.Subject,
			// No agent gets a session's data key (docs/adr/011-sealed-bodies.md).
			"$JS.API.STREAM.MSG.GET.KV_SESSION_KEYS",
			"$JS.API.DIRECT.GET.KV_SESSION_KEYS",
			"$JS.API.DIRECT.GET.KV_SESSION_KEYS.$KV.SESSION_KEYS.s-live",
			"$JS.API.CONSUMER.CREATE.KV_SESSION_KEYS")
		for _, subject := range api {
			if _, err := agent.Request(subject, []byte(`{"seq":1}`), 300*time.Millisecond); err == nil {
				t.Errorf("%s answered", subject)
			}
			agent.WantViolation(t, "Publish", subject)
		}
		for _, subject := range []string{
			natsauth.ServiceInboxPrefix + ".>",
			natsauth.OperatorInboxPrefix + ".>",
			"sessions.ev.>",
			"sessions.*.ev.>",
			"sessions.api.>",
			"$JS.API.>",
			"$KV.>",
			">",
		} {
			sub, err := agent.SubscribeSync(subject)
			if err != nil {
				t.Fatal(err)
			}
			agent.WantViolation(t, "Subscription", subject)
			_ = sub.Unsubscribe()
		}
		// A request whose reply subject is the log or a bucket: the service's
		// answer must not land there (the server checks no publish
		// permission of the requester on its reply subject).
		victim, err := layout.Locate("s-victim")
		if err != nil {
			t.Fatal(err)
		}
		for _, reply := range []string{"sessions.ev.s-victim", victim.Subject, "$KV.SESSION_LEASES.s-live", "$KV.SESSION_CLAIMS.s-live"} {
			for _, subject := range []string{"sessions.api.append", "sessions.api.heartbeat", "sessions.api.fork"} {
				if err := agent.PublishRequest(subject, reply, []byte(`{"sessionId":"s-live","holder":"h-evil","events":[]}`)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := agent.Flush(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		if got := stored(); got != before {
			t.Fatalf("stream holds %d messages, want %d", got, before)
		}
		if d, err := s.session("s-live"); err != nil || d.LastSeq != 4 {
			t.Fatalf("s-live after the agent's attempts: %+v %v", d, err)
		}
		// The log still reads whole (nothing purged or deleted).
		if out, err := cli(t, s, opC, "replay", "s-live"); err != nil || strings.Count(out, "\n") != 4 {
			t.Fatalf("replay after the attempts: %q %v", out, err)
		}
	})

	t.Run("no agent saw the services' or the operator's traffic", func(t *testing.T) {
		n := len(spied)
		for range n {
			m := <-spied
			if strings.HasPrefix(m.Subject, natsauth.ServiceInboxPrefix) || (otherAgent && bytes.Contains(m.Data, []byte(marker))) {
				t.Fatalf("an agent received %s: %.200q", m.Subject, m.Data)
			}
		}
		t.Logf("the spying agent received %d messages under %s, none of the services' or, from another agent, with session content", n, inbox)
		spy.NoViolation(t)
	})

	// Last of all: the operator erases it, through the eraser, which
	// deletes as the eraser user without one refusal (checked below).
	t.Run("operator erases", func(t *testing.T) {
		if _, err := agent.Request("sessions.api.erase", []byte(`{"sessionId":"s-live","reason":"r","by":"agent"}`), 300*time.Millisecond); err == nil {
			t.Fatal("the agent's erase was answered")
		}
		agent.WantViolation(t, "Publish", "sessions.api.erase")
		out, err := cli(t, s, opC, "erase", "s-live", "--reason", "perms test", "--cascade")
		if err != nil || !strings.Contains(out, "erased s-live") {
			t.Fatalf("erase: %q %v", out, err)
		}
		m, err := agent.Request("sessions.api.read", []byte(`{"sessionId":"s-live"}`), 15*time.Second)
		if err != nil || !strings.Contains(string(m.Data), `"code":"erased"`) {
			t.Fatalf("read after the erase: %v", err)
		}
	})

	// The services worked under their permissions without one refusal.
	for _, l := range strings.Split(s.stderr.String(), "\n") {
		if strings.Contains(l, "Violation") && !strings.Contains(l, "user:"+agentC.user+`\"`) {
			t.Errorf("refused, not as the agent: %s", l)
		}
	}
}

// Passwords of the form auth.conf asks for.
var deployPasswords = map[string]string{
	"SERVICE":  "pSvc8d7e6f5a4b3c2d1e0f",
	"ERASER":   "pEr4s3r5e6f7a8b9c0d1e2",
	"AGENT":    "pAgent1a2b3c4d5e6f7a8b",
	"OPERATOR": "pOp9f8e7d6c5b4a3f2e1d",
	"SYS":      "pSys0a1b2c3d4e5f6a7b8c",
}

func deployEnv(skip string) []string {
	var env []string
	for k, v := range deployPasswords {
		if k != skip {
			env = append(env, "SESSIONLOG_"+k+"_PASSWORD="+v)
		}
	}
	return env
}

// TestDeployConfig: up on the shipped single-server config, on one stream
// and on three partitions.
func TestDeployConfig(t *testing.T) {
	for _, partitions := range []int{1, 3} {
		t.Run(fmt.Sprintf("P%d", partitions), func(t *testing.T) {
			// The shipped config, with the tenants' section generated for
			// acme (alice, bob) and globex (carol) besides the default
			// tenant: its agent is the agent, bob the spy (TestTenants
			// tries the agents of one tenant against each other).
			conf, env, users := tenantsDeployment(t)
			args := []string{"--nats-config", conf, "--partitions", strconv.Itoa(partitions)}
			if partitions > 1 {
				// Sealed bodies (docs/adr/011-sealed-bodies.md): the services
				// make and read the keys, the eraser destroys one and purges
				// a partition's subject, each with its deployed user.
				args = append(args, "--seal-bodies")
			}
			s := startUp(t, env, args...)
			exercise(t, s, partitions, users["agent"], users["bob"], creds{"operator", deployPasswords["OPERATOR"]},
				nil, []nats.Option{nats.CustomInboxPrefix(natsauth.InboxPrefix("bob"))})
		})
	}
}

// TestUpNATSUser: up's own users, from --nats-user and --operator-user.
func TestUpNATSUser(t *testing.T) {
	agent := creds{"fleet", "pFleet0123456789"}
	op := creds{"sre", "pSre0123456789"}
	s := startUp(t, nil, "--nats-user", agent.user, "--nats-password", agent.password,
		"--operator-user", op.user, "--operator-password", op.password)
	for _, l := range s.stdout {
		if strings.HasPrefix(l, "open:") {
			t.Fatalf("up with users says it is open: %q", l)
		}
	}
	// Without credentials, or with wrong ones, no connection at all.
	for _, opt := range []nats.Option{func(*nats.Options) error { return nil }, nats.UserInfo(agent.user, "pWrong")} {
		if nc, err := nats.Connect(s.natsURL, opt, nats.NoReconnect()); err == nil {
			nc.Close()
			t.Fatal("connected without the right credentials")
		} else if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("want an authorization error, got %v", err)
		}
	}
	exercise(t, s, 1, agent, creds{}, op, nil, nil)
}

// TestUpOpen: without users up says first that NATS is open, and refuses
// to listen beyond loopback.
func TestUpOpen(t *testing.T) {
	s := startUp(t, nil)
	if len(s.stdout) == 0 || !strings.HasPrefix(s.stdout[0], "open:") {
		t.Fatalf("first line %q, want the open warning", s.stdout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sessionlogBin(t), "up", "--data-dir", t.TempDir(), "--nats-listen", "0.0.0.0:0", "--http-listen", "127.0.0.1:0")
	cmd.Env = environ()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--nats-user") {
		t.Fatalf("up --nats-listen 0.0.0.0:0 without users: %v\n%s", err, out)
	}
}

// TestUpConfigMissingVariable: a variable the config references but the
// environment lacks is named, instead of a failed in-process connection
// ("io: read/write on closed pipe").
func TestUpConfigMissingVariable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sessionlogBin(t), "up", "--data-dir", t.TempDir(), "--nats-listen", "127.0.0.1:0",
		"--http-listen", "127.0.0.1:0", "--nats-config", "../../deploy/nats/server.conf")
	cmd.Env = environ(deployEnv("AGENT")...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("up started without SESSIONLOG_AGENT_PASSWORD\n%s", out)
	}
	if !strings.Contains(string(out), "environment variable SESSIONLOG_AGENT_PASSWORD is not set") || strings.Contains(string(out), "closed pipe") {
		t.Fatalf("error does not name the variable:\n%s", out)
	}
}

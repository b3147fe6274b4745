// Package natsauth_test runs the shipped permission config (auth.conf) in a real,
// embedded nats-server and shows what each user may and may not do: the
// services write the log and run the JetStream API; agents only reach the log
// through the services' request subjects, and can neither write the stream,
// nor delete it, nor forge a lease, nor answer requests meant for the services.
//
// The responder below is a stand-in for the writer, running as the "service"
// user; the real writer on this permission config is covered by the e2e tests.
package natsauth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/synadia-io/orbit.go/jetstreamext"
	"golang.org/x/crypto/bcrypt"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

const (
	authConf    = "auth.conf"
	k8sAuthConf = "../k8s/auth.conf"
	streamName  = "SESSIONS"
	leaseBucket = "SESSION_LEASES"
	// How long a refused request waits for the answer that never comes.
	refusedWait = 500 * time.Millisecond
)

// Plain passwords of the form the docs ask for: a letter, then letters and digits.
var passwords = map[string]string{
	"service":  "p3f9c1b7e2a4d6058c9b1e3f7a2d4c6b8e0f1a3c5d7e9b1",
	"agent":    "pAgentSecret0123456789abcdefABCDEF",
	"operator": "pOperator9a8b7c6d5e4f3a2b1c0d",
	"eraser":   "pEraser5e4d3c2b1a0f9e8d7c6b5a4",
	"sys":      "pSys0f1e2d3c4b5a69788776655",
}

// startServer writes a server config that includes a copy of auth.conf, on a
// random port with its JetStream store in a temp dir, and starts it. The agent
// password is given to the server as a bcrypt hash, the others in plain text,
// so both documented forms are exercised.
func startServer(t *testing.T) *server.Server {
	t.Helper()
	dir := t.TempDir()
	auth, err := os.ReadFile(authConf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, authConf), auth, 0o600); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("port: -1\nserver_name: auth-test\njetstream {\n  store_dir: %q\n}\ninclude %s\n",
		filepath.Join(dir, "js"), authConf)
	confPath := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(passwords["agent"]), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SESSIONLOG_SERVICE_PASSWORD", passwords["service"])
	t.Setenv("SESSIONLOG_AGENT_PASSWORD", string(hash))
	t.Setenv("SESSIONLOG_OPERATOR_PASSWORD", passwords["operator"])
	t.Setenv("SESSIONLOG_ERASER_PASSWORD", passwords["eraser"])
	t.Setenv("SESSIONLOG_SYS_PASSWORD", passwords["sys"])

	opts, err := server.ProcessConfigFile(confPath)
	if err != nil {
		t.Fatalf("nats-server rejects the config: %v", err)
	}
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// client is a connection whose permission violations are collected.
type client = natstest.Watched

// inboxPrefix is the inbox prefix each user's programs use: the services
// and the sessionlog verbs their own, agents nats.go's default.
var inboxPrefix = map[string]string{
	"service":  natsauth.ServiceInboxPrefix,
	"eraser":   natsauth.ServiceInboxPrefix,
	"operator": natsauth.OperatorInboxPrefix,
	"agent":    natsauth.AgentInboxPrefix,
	"sys":      natsauth.AgentInboxPrefix,
}

func connect(t *testing.T, s *server.Server, user string) *client {
	t.Helper()
	return natstest.ConnectWatched(t, s.ClientURL(), nats.CustomInboxPrefix(inboxPrefix[user]),
		nats.UserInfo(user, passwords[user]), nats.Name("auth-test-"+user))
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// sessionsStream is the SESSIONS stream of DESIGN.md section 2 (R1 here).
var sessionsStream = jetstream.StreamConfig{
	Name:               streamName,
	Subjects:           []string{"sessions.ev.*"},
	Storage:            jetstream.FileStorage,
	Duplicates:         2 * time.Minute,
	AllowAtomicPublish: true,
	AllowDirect:        true,
	DenyDelete:         false, // erasure deletes (section 14); the permissions decide who
	Replicas:           1,
}

func event(subject, sessionID, eventID string, expectedLast uint64) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header.Set(jetstream.MsgIDHeader, sessionID+":"+eventID)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, fmt.Sprint(expectedLast))
	m.Data = []byte(fmt.Sprintf(`{"schemaVersion":1,"sessionId":%q,"eventId":%q}`, sessionID, eventID))
	return m
}

func TestPermissions(t *testing.T) {
	s := startServer(t)
	svc := connect(t, s, "service")
	agent := connect(t, s, "agent")
	op := connect(t, s, "operator")

	svcJS, err := jetstream.New(svc.Conn)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := svcJS.CreateStream(ctxT(t, 5*time.Second), sessionsStream)
	if err != nil {
		t.Fatalf("service cannot create %s: %v", streamName, err)
	}
	msgs := func() uint64 {
		t.Helper()
		info, err := stream.Info(ctxT(t, 5*time.Second))
		if err != nil {
			t.Fatalf("stream info: %v", err)
		}
		return info.State.Msgs
	}

	// A stand-in writer (micro service, queue group, as the service user):
	// appends each request's events with the per-subject sequence check.
	type appendReq struct {
		SessionID   string   `json:"sessionId"`
		ExpectedSeq uint64   `json:"expectedSeq"`
		EventIDs    []string `json:"eventIds"`
	}
	writer, err := micro.AddService(svc.Conn, micro.Config{
		Name:       "sessionlog-writer-standin",
		Version:    "0.0.1",
		QueueGroup: "writer",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = writer.Stop() })
	api := writer.AddGroup("sessions.api")
	err = api.AddEndpoint("append", micro.HandlerFunc(func(r micro.Request) {
		var req appendReq
		if err := json.Unmarshal(r.Data(), &req); err != nil || len(req.EventIDs) == 0 {
			_ = r.Error("400", "bad_request", nil)
			return
		}
		subject := "sessions.ev." + req.SessionID
		batch := make([]*nats.Msg, len(req.EventIDs))
		for i, id := range req.EventIDs {
			batch[i] = event(subject, req.SessionID, id, req.ExpectedSeq)
			if i > 0 {
				batch[i].Header.Del(jetstream.ExpectedLastSubjSeqHeader)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var seq uint64
		if len(batch) == 1 {
			ack, err := svcJS.PublishMsg(ctx, batch[0])
			if err != nil {
				_ = r.Error("409", err.Error(), nil)
				return
			}
			seq = ack.Sequence
		} else {
			ack, err := jetstreamext.PublishMsgBatch(ctx, svcJS, batch)
			if err != nil {
				_ = r.Error("409", err.Error(), nil)
				return
			}
			seq = ack.Sequence
		}
		_ = r.RespondJSON(map[string]any{"sessionId": req.SessionID, "streamSeq": seq})
	}), micro.WithEndpointSubject("append"))
	if err != nil {
		t.Fatal(err)
	}
	err = api.AddEndpoint("heartbeat", micro.HandlerFunc(func(r micro.Request) {
		_ = r.RespondJSON(map[string]bool{"ok": true})
	}), micro.WithEndpointSubject("heartbeat"))
	if err != nil {
		t.Fatal(err)
	}
	svc.NoViolation(t)

	t.Run("service writes the log, single and atomic batch", func(t *testing.T) {
		before := msgs()
		if _, err := svcJS.PublishMsg(ctxT(t, 5*time.Second), event("sessions.ev.s-svc", "s-svc", "e1", 0)); err != nil {
			t.Fatalf("service publish: %v", err)
		}
		b := []*nats.Msg{event("sessions.ev.s-svc", "s-svc", "e2", 1), event("sessions.ev.s-svc", "s-svc", "e3", 0)}
		b[1].Header.Del(jetstream.ExpectedLastSubjSeqHeader)
		if _, err := jetstreamext.PublishMsgBatch(ctxT(t, 5*time.Second), svcJS, b); err != nil {
			t.Fatalf("service atomic batch: %v", err)
		}
		if got := msgs(); got != before+3 {
			t.Fatalf("stream holds %d messages, want %d", got, before+3)
		}
		// Direct get (AllowDirect) through $JS.API.
		m, err := stream.GetLastMsgForSubject(ctxT(t, 5*time.Second), "sessions.ev.s-svc")
		if err != nil || m.Header.Get(jetstream.MsgIDHeader) != "s-svc:e3" {
			t.Fatalf("last message: %v %v", m, err)
		}
		svc.NoViolation(t)
	})

	t.Run("service keeps leases in the KV bucket with per-key TTL", func(t *testing.T) {
		kv, err := svcJS.CreateKeyValue(ctxT(t, 5*time.Second), jetstream.KeyValueConfig{
			Bucket:         leaseBucket,
			Storage:        jetstream.FileStorage,
			LimitMarkerTTL: time.Second,
		})
		if err != nil {
			t.Fatalf("create %s: %v", leaseBucket, err)
		}
		w, err := kv.Watch(ctxT(t, 5*time.Second), "s-1")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = w.Stop() }()
		if _, err := kv.Create(ctxT(t, 5*time.Second), "s-1", []byte(`{"holder":"agent-7"}`), jetstream.KeyTTL(30*time.Second)); err != nil {
			t.Fatalf("lease create: %v", err)
		}
		if _, err := kv.Put(ctxT(t, 5*time.Second), "s-1", []byte(`{"holder":"agent-7","renewedAt":"now"}`)); err != nil {
			t.Fatalf("lease renew: %v", err)
		}
		e, err := kv.Get(ctxT(t, 5*time.Second), "s-1")
		if err != nil || !bytes.Contains(e.Value(), []byte("renewedAt")) {
			t.Fatalf("lease get: %v %v", e, err)
		}
		// The watcher sees the lease (initial nil marker, then the values).
		seen := false
		timeout := time.After(5 * time.Second)
		for !seen {
			select {
			case u := <-w.Updates():
				seen = u != nil && u.Key() == "s-1"
			case <-timeout:
				t.Fatal("watch saw no lease")
			}
		}
		svc.NoViolation(t)
	})

	// Issue 12: the service user could not write the claim and fork
	// buckets, so every fork timed out and no lease claim held.
	t.Run("service keeps claims and fork records", func(t *testing.T) {
		for _, bucket := range []string{natsauth.BucketClaims, natsauth.BucketForks} {
			kv, err := svcJS.CreateOrUpdateKeyValue(ctxT(t, 5*time.Second), jetstream.KeyValueConfig{Bucket: bucket, Storage: jetstream.FileStorage})
			if err != nil {
				t.Fatalf("create %s: %v", bucket, err)
			}
			if _, err := kv.Create(ctxT(t, 5*time.Second), "s-1", []byte(`{"holder":"agent-7"}`)); err != nil {
				t.Fatalf("%s create: %v", bucket, err)
			}
			if _, err := kv.Update(ctxT(t, 5*time.Second), "s-1", []byte(`{"holder":"agent-8"}`), 1); err != nil {
				t.Fatalf("%s update: %v", bucket, err)
			}
			if _, err := kv.Get(ctxT(t, 5*time.Second), "s-1"); err != nil {
				t.Fatalf("%s get: %v", bucket, err)
			}
			keys, err := kv.ListKeys(ctxT(t, 5*time.Second))
			if err != nil {
				t.Fatalf("%s list: %v", bucket, err)
			}
			n := 0
			for range keys.Keys() {
				n++
			}
			if n != 1 {
				t.Fatalf("%s lists %d keys, want 1", bucket, n)
			}
			if err := kv.Purge(ctxT(t, 5*time.Second), "s-1"); err != nil {
				t.Fatalf("%s purge key: %v", bucket, err)
			}
		}
		svc.NoViolation(t)
	})

	// Issue 12: the services' JetStream deliveries went to _INBOX, where
	// any agent could subscribe and read every session's events.
	t.Run("agent cannot read the services' or operators' inboxes", func(t *testing.T) {
		for _, subject := range []string{natsauth.ServiceInboxPrefix + ".>", natsauth.OperatorInboxPrefix + ".>", natsauth.ServiceInboxPrefix + ".abc"} {
			sub, err := agent.SubscribeSync(subject)
			if err != nil {
				t.Fatal(err)
			}
			agent.WantViolation(t, "Subscription", subject)
			_ = sub.Unsubscribe()
			// Nor forge answers to what the services asked JetStream.
			if err := agent.Publish(natsauth.ServiceInboxPrefix+".x", []byte(`{"stream":"SESSIONS","seq":1}`)); err != nil {
				t.Fatal(err)
			}
			agent.WantViolation(t, "Publish", natsauth.ServiceInboxPrefix+".x")
		}
		// A service read goes to the service's inbox: an agent's _INBOX.>
		// subscription sees nothing of it.
		spy, err := agent.SubscribeSync("_INBOX.>")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = spy.Unsubscribe() }()
		if err := agent.Flush(); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.GetLastMsgForSubject(ctxT(t, 5*time.Second), "sessions.ev.s-svc"); err != nil {
			t.Fatal(err)
		}
		cons, err := stream.OrderedConsumer(ctxT(t, 5*time.Second), jetstream.OrderedConsumerConfig{FilterSubjects: []string{"sessions.ev.s-svc"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cons.Next(jetstream.FetchMaxWait(2 * time.Second)); err != nil {
			t.Fatalf("service consumer: %v", err)
		}
		if m, err := spy.NextMsg(300 * time.Millisecond); err == nil {
			t.Fatalf("agent received %s (%q) meant for a service", m.Subject, m.Data)
		}
		agent.NoViolation(t)
		svc.NoViolation(t)
	})

	t.Run("service may not delete or purge the stream", func(t *testing.T) {
		before := msgs()
		for subject, call := range map[string]func() error{
			"$JS.API.STREAM.DELETE." + streamName: func() error { return svcJS.DeleteStream(ctxT(t, refusedWait), streamName) },
			"$JS.API.STREAM.PURGE." + streamName:  func() error { return stream.Purge(ctxT(t, refusedWait)) },
		} {
			if err := call(); err == nil {
				t.Errorf("%s succeeded", subject)
			}
			svc.WantViolation(t, "Publish", subject)
		}
		if got := msgs(); got != before {
			t.Fatalf("stream holds %d messages, want %d", got, before)
		}
	})

	t.Run("service may not delete a message; the eraser may, and nothing more", func(t *testing.T) {
		seq, err := svcJS.PublishMsg(ctxT(t, 5*time.Second), event("sessions.ev.s-erase", "s-erase", "e1", 0))
		if err != nil {
			t.Fatal(err)
		}
		del := fmt.Sprintf(`{"seq":%d}`, seq.Sequence)
		if _, err := svc.Request("$JS.API.STREAM.MSG.DELETE."+streamName, []byte(del), refusedWait); err == nil {
			t.Error("the service's message delete was answered")
		}
		svc.WantViolation(t, "Publish", "$JS.API.STREAM.MSG.DELETE."+streamName)
		for _, subject := range []string{"$KV.SESSION_ERASED.s-1", "sessions.audit.erased.s-1", "sessions.api.erase"} {
			if err := svc.Publish(subject, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			svc.WantViolation(t, "Publish", subject)
		}
		if _, err := stream.GetMsg(ctxT(t, 5*time.Second), seq.Sequence); err != nil {
			t.Fatalf("the message is gone after the service's delete: %v", err)
		}

		eraser := connect(t, s, "eraser")
		erJS, err := jetstream.New(eraser.Conn)
		if err != nil {
			t.Fatal(err)
		}
		erStream, err := erJS.Stream(ctxT(t, 5*time.Second), streamName)
		if err != nil {
			t.Fatal(err)
		}
		if err := erStream.SecureDeleteMsg(ctxT(t, 5*time.Second), seq.Sequence); err != nil {
			t.Fatalf("eraser: %v", err)
		}
		eraser.NoViolation(t)
		if _, err := stream.GetMsg(ctxT(t, 5*time.Second), seq.Sequence); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Fatalf("after the eraser's delete: %v, want not found", err)
		}
		// A sealed session's subject is purged once its key is destroyed
		// (docs/adr/011-sealed-bodies.md): the eraser may purge the log's
		// streams, no other.
		if _, err := svcJS.PublishMsg(ctxT(t, 5*time.Second), event("sessions.ev.s-shred", "s-shred", "e1", 0)); err != nil {
			t.Fatal(err)
		}
		if err := erStream.Purge(ctxT(t, 5*time.Second), jetstream.WithPurgeSubject("sessions.ev.s-shred")); err != nil {
			t.Fatalf("eraser: purge of a session's subject: %v", err)
		}
		eraser.NoViolation(t)
		for subject, call := range map[string]func() error{
			"$JS.API.STREAM.DELETE." + streamName: func() error { return erJS.DeleteStream(ctxT(t, refusedWait), streamName) },
			"$JS.API.STREAM.PURGE.KV_SESSION_KEYS": func() error {
				_, err := eraser.Request("$JS.API.STREAM.PURGE.KV_SESSION_KEYS", nil, refusedWait)
				return err
			},
		} {
			if err := call(); err == nil {
				t.Errorf("eraser: %s succeeded", subject)
			}
			eraser.WantViolation(t, "Publish", subject)
		}
		if err := eraser.Publish("sessions.api.erase", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		eraser.WantViolation(t, "Publish", "sessions.api.erase")
	})

	t.Run("agent cannot publish to the log", func(t *testing.T) {
		before := msgs()
		// A plain core publish...
		if err := agent.Publish("sessions.ev.x", []byte(`{"forged":true}`)); err != nil {
			t.Fatal(err)
		}
		agent.WantViolation(t, "Publish", "sessions.ev.x")
		// ...and a JetStream publish (a request expecting the stream's ack).
		agentJS, err := jetstream.New(agent.Conn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := agentJS.PublishMsg(ctxT(t, refusedWait), event("sessions.ev.x", "x", "e1", 0)); err == nil {
			t.Fatal("agent's JetStream publish was acknowledged")
		}
		agent.WantViolation(t, "Publish", "sessions.ev.x")
		if got := msgs(); got != before {
			t.Fatalf("stream holds %d messages, want %d", got, before)
		}
		if _, err := stream.GetLastMsgForSubject(ctxT(t, 5*time.Second), "sessions.ev.x"); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Fatalf("sessions.ev.x: want not found, got %v", err)
		}
	})

	t.Run("agent cannot use the JetStream API", func(t *testing.T) {
		if _, err := agent.Request("$JS.API.STREAM.DELETE."+streamName, nil, refusedWait); err == nil {
			t.Fatal("stream delete request answered")
		}
		agent.WantViolation(t, "Publish", "$JS.API.STREAM.DELETE."+streamName)
		if _, err := svcJS.Stream(ctxT(t, 5*time.Second), streamName); err != nil {
			t.Fatalf("stream gone after the agent's delete: %v", err)
		}
		// Nor read it behind the projector's back, nor change it.
		for _, subject := range []string{
			"$JS.API.STREAM.INFO." + streamName,
			"$JS.API.DIRECT.GET." + streamName + ".sessions.ev.s-svc",
			"$JS.API.STREAM.MSG.DELETE." + streamName,
			"$JS.API.STREAM.PURGE." + streamName,
			"$JS.API.CONSUMER.CREATE." + streamName,
		} {
			if _, err := agent.Request(subject, []byte(`{}`), refusedWait); err == nil {
				t.Errorf("%s answered", subject)
			}
			agent.WantViolation(t, "Publish", subject)
		}
	})

	t.Run("agent cannot forge leases or impersonate the services", func(t *testing.T) {
		for _, subject := range []string{"$KV.SESSION_LEASES.s-1", "$KV.SESSION_CLAIMS.s-1", "$KV.SESSION_FORKS.s-1", "sessions.api.repair", "sessions.api.erase", "$SRV.PING"} {
			if err := agent.Publish(subject, []byte(`{"holder":"evil"}`)); err != nil {
				t.Fatal(err)
			}
			agent.WantViolation(t, "Publish", subject)
		}
		// Subscribing to the request subjects would let an agent read, or
		// answer, other agents' appends; subscribing to the log subjects
		// would bypass the projector.
		for _, subject := range []string{"sessions.api.append", "sessions.api.>", "sessions.ev.>", "$KV.>", "$JS.API.>", "$JS.>", ">"} {
			sub, err := agent.SubscribeSync(subject)
			if err != nil {
				t.Fatal(err)
			}
			agent.WantViolation(t, "Subscription", subject)
			if _, err := sub.NextMsg(time.Second); !errors.Is(err, nats.ErrPermissionViolation) {
				t.Errorf("subscription to %s: want a permission violation, got %v", subject, err)
			}
			_ = sub.Unsubscribe()
		}
	})

	t.Run("agent sends and watches live events", func(t *testing.T) {
		watcher := connect(t, s, "agent")
		agentSub, err := watcher.SubscribeSync("sessions.live.>")
		if err != nil {
			t.Fatal(err)
		}
		projectorSub, err := svc.SubscribeSync("sessions.live.>")
		if err != nil {
			t.Fatal(err)
		}
		if err := watcher.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := svc.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := agent.Publish("sessions.live.s-1", []byte(`{"afterSeq":3,"delta":"hel"}`)); err != nil {
			t.Fatal(err)
		}
		for name, sub := range map[string]*nats.Subscription{"agent": agentSub, "service": projectorSub} {
			m, err := sub.NextMsg(2 * time.Second)
			if err != nil || m.Subject != "sessions.live.s-1" {
				t.Fatalf("%s watcher: %v %v", name, m, err)
			}
		}
		agent.NoViolation(t)
		watcher.NoViolation(t)
	})

	t.Run("agent appends through the service", func(t *testing.T) {
		before := msgs()
		reply, err := agent.Request("sessions.api.append", []byte(`{"sessionId":"s-agent","expectedSeq":0,"eventIds":["e1"]}`), 5*time.Second)
		if err != nil {
			t.Fatalf("append request: %v", err)
		}
		if reply.Header.Get(micro.ErrorHeader) != "" {
			t.Fatalf("append failed: %s", reply.Header.Get(micro.ErrorHeader))
		}
		var ok struct {
			SessionID string `json:"sessionId"`
			StreamSeq uint64 `json:"streamSeq"`
		}
		if err := json.Unmarshal(reply.Data, &ok); err != nil || ok.SessionID != "s-agent" || ok.StreamSeq == 0 {
			t.Fatalf("reply %s: %v", reply.Data, err)
		}
		// A batch: the service's atomic publish on the agent's behalf.
		reply, err = agent.Request("sessions.api.append", []byte(`{"sessionId":"s-agent","expectedSeq":`+fmt.Sprint(ok.StreamSeq)+`,"eventIds":["e2","e3"]}`), 5*time.Second)
		if err != nil || reply.Header.Get(micro.ErrorHeader) != "" {
			t.Fatalf("batch append: %v %v", err, reply.Header)
		}
		if got := msgs(); got != before+3 {
			t.Fatalf("stream holds %d messages, want %d", got, before+3)
		}
		if reply, err := agent.Request("sessions.api.heartbeat", []byte(`{"sessionId":"s-agent","holder":"agent-7"}`), 5*time.Second); err != nil || !bytes.Contains(reply.Data, []byte("ok")) {
			t.Fatalf("heartbeat: %v", err)
		}
		// Fork and read are allowed too; nothing serves them here.
		for _, subject := range []string{"sessions.api.fork", "sessions.api.read"} {
			if _, err := agent.Request(subject, []byte(`{}`), time.Second); !errors.Is(err, nats.ErrNoResponders) {
				t.Fatalf("%s: want no responders (allowed, unserved), got %v", subject, err)
			}
		}
		agent.NoViolation(t)
		svc.NoViolation(t)
	})

	t.Run("operator administers the account", func(t *testing.T) {
		// Service discovery reaches the stand-in writer through $SRV.
		reply, err := op.Request("$SRV.PING.sessionlog-writer-standin", nil, 2*time.Second)
		if err != nil || !bytes.Contains(reply.Data, []byte("sessionlog-writer-standin")) {
			t.Fatalf("$SRV.PING: %v", err)
		}
		opJS, err := jetstream.New(op.Conn)
		if err != nil {
			t.Fatal(err)
		}
		scratch, err := opJS.CreateStream(ctxT(t, 5*time.Second), jetstream.StreamConfig{Name: "SCRATCH", Subjects: []string{"scratch.>"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := opJS.DeleteStream(ctxT(t, 5*time.Second), scratch.CachedInfo().Config.Name); err != nil {
			t.Fatalf("operator cannot delete a stream: %v", err)
		}
		if _, err := opJS.Stream(ctxT(t, 5*time.Second), streamName); err != nil {
			t.Fatal(err)
		}
		op.NoViolation(t)
	})

	t.Run("system account", func(t *testing.T) {
		if sa := s.SystemAccount(); sa == nil || sa.GetName() != "SYS" {
			t.Fatalf("system account %v", sa)
		}
		sys := connect(t, s, "sys")
		if _, err := sys.Request("$SYS.REQ.SERVER.PING.VARZ", nil, 2*time.Second); err != nil {
			t.Fatalf("server ping: %v", err)
		}
	})
}

func TestAuthenticationRequired(t *testing.T) {
	s := startServer(t)
	for name, opt := range map[string]nats.Option{
		"anonymous":      func(*nats.Options) error { return nil },
		"wrong password": nats.UserInfo("agent", "pWrong0000"),
		"unknown user":   nats.UserInfo("root", passwords["operator"]),
		"hash as password": func() nats.Option {
			h, _ := bcrypt.GenerateFromPassword([]byte(passwords["agent"]), bcrypt.MinCost)
			return nats.UserInfo("agent", string(h))
		}(),
	} {
		nc, err := nats.Connect(s.ClientURL(), opt, nats.NoReconnect())
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
			continue
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("%s: %v, want an authorization error", name, err)
		}
	}
}

// One permission config: the copy kustomize packs must equal this one.
func TestAuthConfMatchesK8sCopy(t *testing.T) {
	a, err := os.ReadFile(authConf)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(k8sAuthConf)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("deploy/nats/%s and deploy/k8s/auth.conf differ: edit both (cp deploy/nats/auth.conf deploy/k8s/auth.conf)", authConf)
	}
}

// The single-server config parses, with auth.conf included, and grants what
// auth.conf grants.
func TestServerConf(t *testing.T) {
	for _, v := range []string{"SERVICE", "ERASER", "AGENT", "OPERATOR", "SYS"} {
		t.Setenv("SESSIONLOG_"+v+"_PASSWORD", "pPlaceholder"+v)
	}
	opts, err := server.ProcessConfigFile("server.conf")
	if err != nil {
		t.Fatalf("nats-server rejects server.conf: %v", err)
	}
	if !opts.JetStream || opts.Port != 4222 || opts.SystemAccount != "SYS" {
		t.Fatalf("jetstream=%v port=%d system_account=%q", opts.JetStream, opts.Port, opts.SystemAccount)
	}
	if !opts.SyncAlways {
		t.Errorf("sync_interval is not always: an acknowledged event is not fsynced before its ack")
	}
	users := map[string]*server.User{}
	for _, u := range opts.Users {
		users[u.Username] = u
	}
	for _, name := range []string{"service", "agent", "operator", "sys"} {
		if users[name] == nil {
			t.Fatalf("no user %s", name)
		}
	}
	if users["operator"].Permissions != nil {
		t.Errorf("operator is restricted: %+v", users["operator"].Permissions)
	}
	if p := users["agent"].Permissions; p == nil || p.Publish == nil || len(p.Publish.Allow) == 0 || p.Subscribe == nil {
		t.Errorf("agent has no allow lists: %+v", p)
	}
	if p := users["service"].Permissions; p == nil || p.Response == nil {
		t.Errorf("service cannot respond to arbitrary reply subjects: %+v", p)
	}
	// Every password is a variable: a missing one stops the server.
	os.Unsetenv("SESSIONLOG_AGENT_PASSWORD")
	if _, err := server.ProcessConfigFile("server.conf"); err == nil || !strings.Contains(err.Error(), "SESSIONLOG_AGENT_PASSWORD") {
		t.Fatalf("unset password: want an error naming it, got %v", err)
	}
}

// One permission definition: auth.conf grants each user exactly what
// deploy/nats/perms.go (which `sessionlog up` uses) says.
func TestAuthConfMatchesGo(t *testing.T) {
	for _, v := range []string{"SERVICE", "ERASER", "AGENT", "OPERATOR", "SYS"} {
		t.Setenv("SESSIONLOG_"+v+"_PASSWORD", "pPlaceholder"+v)
	}
	opts, err := server.ProcessConfigFile("server.conf")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*server.Permissions{
		"service":  natsauth.Service(),
		"eraser":   natsauth.Eraser(),
		"agent":    natsauth.Agent(),
		"operator": natsauth.Operator(),
	}
	for _, u := range opts.Users {
		w, ok := want[u.Username]
		if !ok {
			continue
		}
		delete(want, u.Username)
		if !natsauth.Equal(u.Permissions, w) {
			t.Errorf("user %s: auth.conf and perms.go differ\n%s", u.Username, permsDiff(u.Permissions, w))
		}
		wantAcc := natsauth.ServiceAccount
		if u.Username == "agent" {
			wantAcc = natsauth.DefaultTenant
		}
		if u.Account == nil || u.Account.Name != wantAcc {
			t.Errorf("user %s in account %v, want %s", u.Username, u.Account, wantAcc)
		}
	}
	for name := range want {
		t.Errorf("auth.conf has no user %s", name)
	}
	// Equal itself: a missing entry, an extra deny, a response limit differ.
	a, b := natsauth.Agent(), natsauth.Agent()
	b.Subscribe.Deny = b.Subscribe.Deny[1:]
	if natsauth.Equal(a, b) {
		t.Error("Equal ignores a missing deny entry")
	}
	s1, s2 := natsauth.Service(), natsauth.Service()
	s2.Response.MaxMsgs = 5
	if natsauth.Equal(s1, s2) || natsauth.Equal(s1, nil) || !natsauth.Equal(nil, nil) {
		t.Error("Equal ignores the response permission or nil")
	}
}

func permsDiff(got, want *server.Permissions) string {
	var b strings.Builder
	side := func(name string, g, w *server.SubjectPermission) {
		if g == nil {
			g = &server.SubjectPermission{}
		}
		if w == nil {
			w = &server.SubjectPermission{}
		}
		for _, l := range []struct {
			what string
			g, w []string
		}{{"allow", g.Allow, w.Allow}, {"deny", g.Deny, w.Deny}} {
			for _, s := range l.g {
				if !contains(l.w, s) {
					fmt.Fprintf(&b, "  %s %s: %q only in auth.conf\n", name, l.what, s)
				}
			}
			for _, s := range l.w {
				if !contains(l.g, s) {
					fmt.Fprintf(&b, "  %s %s: %q only in perms.go\n", name, l.what, s)
				}
			}
		}
	}
	if got == nil || want == nil {
		return fmt.Sprintf("  auth.conf %+v, perms.go %+v", got, want)
	}
	side("publish", got.Publish, want.Publish)
	side("subscribe", got.Subscribe, want.Subscribe)
	if (got.Response == nil) != (want.Response == nil) || (got.Response != nil && *got.Response != *want.Response) {
		fmt.Fprintf(&b, "  allow_responses: auth.conf %+v, perms.go %+v\n", got.Response, want.Response)
	}
	return b.String()
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// The tenants' section of auth.conf is what TenantsConf makes of the
// default tenant; a change to perms.go shows here until it is regenerated.
func TestAuthConfTenants(t *testing.T) {
	b, err := os.ReadFile(authConf)
	if err != nil {
		t.Fatal(err)
	}
	want, err := natsauth.WithTenants(b, natsauth.DefaultTenants())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("the tenants section of auth.conf is not natsauth.TenantsConf(natsauth.DefaultTenants()): regenerate it (natsauth.WithTenants) and copy it to deploy/k8s")
	}
	for _, bad := range [][]natsauth.Tenant{
		{{Name: "acme"}},
		{{Name: "ac_me", Users: []natsauth.TenantUser{{Name: "x"}}}},
		{{Name: "acme", Users: []natsauth.TenantUser{{Name: "a.b"}}}},
		{{Name: "SESSIONLOG", Users: []natsauth.TenantUser{{Name: "x"}}}},
		{{Name: "acme", Users: []natsauth.TenantUser{{Name: "service"}}}},
		{{Name: "acme", Users: []natsauth.TenantUser{{Name: "x"}}}, {Name: "globex", Users: []natsauth.TenantUser{{Name: "x"}}}},
		{{Name: natsauth.DefaultTenant, Users: []natsauth.TenantUser{{Name: "agent"}, {Name: "bob"}}}},
	} {
		if _, err := natsauth.TenantsConf(bad); err == nil {
			t.Errorf("TenantsConf(%+v) made a config", bad)
		}
	}
}

// The identity a service sees comes from the server: a Nats-Request-Info
// header the agent sends is replaced by the server's, naming the agent's
// account and user (ADR 010).
func TestRequestInfoFromServer(t *testing.T) {
	s := startServer(t)
	svc := connect(t, s, "service")
	agent := connect(t, s, "agent")
	got := make(chan nats.Header, 1)
	sub, err := svc.Subscribe("sessions.api.read", func(m *nats.Msg) {
		got <- m.Header
		_ = m.Respond([]byte(`{}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := svc.Flush(); err != nil {
		t.Fatal(err)
	}
	forged := `{"acc":"SESSIONLOG","user":"operator"}`
	m := nats.NewMsg("sessions.api.read")
	m.Header.Set("Nats-Request-Info", forged)
	m.Header["Nats-Request-Info"] = append(m.Header["Nats-Request-Info"], forged)
	m.Data = []byte(`{"sessionId":"s-1"}`)
	if _, err := agent.RequestMsg(m, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if v := h.Values("Nats-Request-Info"); len(v) != 1 {
		t.Fatalf("the service got %d Nats-Request-Info values: %q", len(v), v)
	}
	var ci struct{ Acc, User string }
	if err := json.Unmarshal([]byte(h.Get("Nats-Request-Info")), &ci); err != nil {
		t.Fatal(err)
	}
	if ci.Acc != natsauth.DefaultTenant || ci.User != "agent" {
		t.Fatalf("the service was told account %q user %q, want %s agent", ci.Acc, ci.User, natsauth.DefaultTenant)
	}
	agent.NoViolation(t)
}

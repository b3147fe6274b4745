package eraser

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// env is one embedded server and a store on it.
type env struct {
	t     *testing.T
	nc    *nats.Conn
	store *logstore.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, logstore.Config{})
}

// newEnvWith is newEnv with the store's configuration.
func newEnvWith(t *testing.T, cfg logstore.Config) *env {
	t.Helper()
	srv := natstest.RunServerDir(t, t.TempDir())
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st, err := logstore.Open(context.Background(), nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, nc: nc, store: st}
}

// running is an eraser started by env.start.
type running struct {
	svc    *Service
	cancel context.CancelFunc
	done   chan error
}

// start runs an eraser on the env's store and connection until stop or
// the end of the test.
func (e *env) start(cfg Config) *running {
	e.t.Helper()
	cfg.Store, cfg.Conn = e.store, e.nc
	svc, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{svc: svc, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- svc.Run(ctx) }()
	e.t.Cleanup(r.stop)
	natstest.CheckFor(e.t, 10*time.Second, 10*time.Millisecond, svc.Ready)
	return r
}

func (r *running) stop() {
	r.cancel()
	<-r.done
	r.done <- nil // a second stop (the test's Cleanup) returns at once
}

// appendEvents stores events (JSON lines) after the session's tail.
func (e *env) appendEvents(id string, lines ...string) {
	e.t.Helper()
	if _, err := e.tryAppend(id, lines...); err != nil {
		e.t.Fatalf("append %s: %v", id, err)
	}
}

// tryAppend stores events after the session's tail, each completed as the
// writer completes it, checked against the tail it read.
func (e *env) tryAppend(id string, lines ...string) (logstore.AppendResult, error) {
	ctx := context.Background()
	tail, err := e.store.Tail(ctx, id)
	if err != nil {
		return logstore.AppendResult{}, err
	}
	req := logstore.AppendRequest{SessionID: id, ExpectedStreamSeq: tail.StreamSeq}
	for _, l := range lines {
		ev := schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: tail.Seq + 1 + uint64(len(req.Events)), Time: time.Now().UTC()}
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			e.t.Fatalf("event %q: %v", l, err)
		}
		ev.EventID = fmt.Sprintf("%s-%d-%d", id, ev.Seq, time.Now().UnixNano())
		req.Events = append(req.Events, ev)
	}
	return e.store.Append(ctx, req)
}

// claim takes the session's lease (and with it its claim) for holder.
func (e *env) claim(id, holder string) {
	e.t.Helper()
	if err := e.store.RenewLease(context.Background(), id, holder, time.Now()); err != nil {
		e.t.Fatal(err)
	}
}

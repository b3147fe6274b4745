package writer_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// reopen shuts the server down and starts a new one on the same
// directory, to count what really reached the disk.
func reopen(t *testing.T, e *env) (*logstore.Store, *nats.Conn) {
	t.Helper()
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	srv := natstest.RunServerDir(t, e.dir)
	nc := natstest.Connect(t, srv)
	st, err := logstore.Open(context.Background(), nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return st, nc
}

// not_committed: JetStream is stopped, so the publish (warm cache) or
// the read of the session (cold cache) finds no responder and nothing can
// have been stored.
func TestAppendNotCommitted(t *testing.T) {
	// The JetStream API of a server whose JetStream is stopped does not
	// answer: reads wait for the request timeout.
	e := newEnv(t, envOpts{store: logstore.Config{RequestTimeout: time.Second}})
	mustOK(t, e.nc, map[string]any{"sessionId": "warm", "events": events(created())})
	if err := e.srv.DisableJetStream(); err != nil {
		t.Fatal(err)
	}
	r := appendReq(t, e.nc, map[string]any{"sessionId": "warm", "events": events(ev(schema.TypeMessageUser, "data", map[string]any{"content": "x"}))})
	if r.code() != string(schema.CodeNotCommitted) || r.header != string(schema.CodeNotCommitted) {
		t.Fatalf("warm: %s %+v", r.code(), r.err)
	}
	r = appendReq(t, e.nc, map[string]any{"sessionId": "never", "events": events(created())})
	if r.code() != string(schema.CodeNotCommitted) {
		t.Fatalf("cold: %s %+v", r.code(), r.err)
	}
	st, _ := reopen(t, e)
	if n := len(stored(t, st, "warm")); n != 1 {
		t.Fatalf("warm has %d events, want 1", n)
	}
	if n := len(stored(t, st, "never")); n != 0 {
		t.Fatalf("never has %d events, want 0", n)
	}
}

// outcome_unknown: JetStream stores the event, the acknowledgement is lost
// and JetStream goes away before the writer can resolve it (re-send and
// read both fail). The writer must not claim either outcome; the event is
// stored once, and the client's retry of the same request, once JetStream
// is back, is answered as a duplicate.
func TestAppendOutcomeUnknown(t *testing.T) {
	dir := t.TempDir()
	srv := natstest.RunServerDir(t, dir)
	var broken atomic.Bool
	e := newEnv(t, envOpts{srv: srv, store: logstore.Config{ResolveAttempts: 2, RequestTimeout: time.Second, FaultHook: func(s logstore.FaultStage) error {
		if s == logstore.FaultAck && broken.CompareAndSwap(false, true) {
			if err := srv.DisableJetStream(); err != nil {
				t.Errorf("disable JetStream: %v", err)
			}
			return errors.New("injected: ack lost")
		}
		return nil
	}}})
	e.dir = dir
	req := map[string]any{"sessionId": "s1", "expectedSeq": 0, "events": events(ev(schema.TypeSessionCreated, "eventId", "ev-1"))}
	r := appendReq(t, e.nc, req)
	if r.code() != string(schema.CodeOutcomeUnknown) || r.header != string(schema.CodeOutcomeUnknown) {
		t.Fatalf("got %s %+v, want outcome_unknown", r.code(), r.err)
	}
	st, snc := reopen(t, e)
	evs := stored(t, st, "s1")
	if len(evs) != 1 || evs[0].EventID != "ev-1" {
		t.Fatalf("stored %+v, want ev-1 once", evs)
	}
	// The retry against a writer on the recovered server.
	nc, err := nats.Connect(snc.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	startWriter(t, st, snc, writerConfig())
	r = appendReq(t, nc, req)
	if r.err != nil || !r.ok.Duplicate || r.ok.LastSeq != 1 {
		t.Fatalf("retry: %+v %+v", r.ok, r.err)
	}
	if n := len(stored(t, st, "s1")); n != 1 {
		t.Fatalf("%d events after retry", n)
	}
}
